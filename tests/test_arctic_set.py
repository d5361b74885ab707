"""The 10 prebuilt Arctic-embed-L HNSW-int8 shards as one dense source, on stand-ins built here with Anserini's
own IndexHnswDenseVectors under pyserini's directory names (bench/v21_standins.py): one retriever name that
ranks as one index would, Arctic's query recipe, anywhere the grammar takes a retriever, its texts read from the
BM25 index beside it, and shards that are missing or of another dimension named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from ragnarok.core.settings import Settings
from ragnarok.service.retrieval_service import RetrievalService
from ragnarok.stages.embed.encoder import ARCTIC_PREFIX, Encoder, check_recipe

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import v21_standins  # noqa: E402

SET = "msmarco-v2.1-doc-segmented.arctic-embed-l"
BM25 = "msmarco-v2.1-doc-segmented"


def settings_for(tmp_path: Path, prebuilt_dir: Path | None = None, **indexes: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        prebuilt_dir=prebuilt_dir,
        indexes={"v21": f"prebuilt:{BM25}", **indexes},
        default_index="v21",
    )


def queries(v21, n: int = 20) -> np.ndarray:
    """Query vectors near some segments (their vectors plus noise), L2-normalised."""
    rng = np.random.default_rng(7)
    rows = v21.vectors[rng.choice(len(v21.docids), n, replace=False)]
    noisy = rows + rng.normal(0, 0.05, rows.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def exact(v21, q: np.ndarray, k: int = 100) -> list[str]:
    scores = v21.vectors @ q
    return [v21.docids[i] for i in np.argsort(-scores, kind="stable")[:k]]


def assert_exact(got: list[str], v21, q: np.ndarray, k: int = 100) -> None:
    """``got`` is exact search's top ``k``, order and all, but for segments whose scores tie to float32 rounding
    (Lucene's dot product and numpy's add in different orders, so a near-tie may come out either way)."""
    scores = v21.vectors @ q
    by_docid = dict(zip(v21.docids, scores))
    assert len(got) == k and len(set(got)) == k
    np.testing.assert_allclose([by_docid[d] for d in got], np.sort(scores)[::-1][:k], rtol=0, atol=1e-5)


def test_the_set_ranks_as_one_index_searched_exactly(v21_env, tmp_path):
    """Shards of float vectors searched with efSearch past their size: the merged ranking is exact search's over
    all the vectors, order and all. The int8 shards (as the prebuilt ones are) lose what 8-bit codes lose: on
    these stand-in vectors (MiniLM pooled by CLS, which crowds them together) about a fifth of the top 100; on
    well-spread vectors far less (bench/bench_arctic_set.py at 100k: docs/BENCHMARKS.md). Random would keep 17 %."""
    float_dir = tmp_path / "float"
    v21_standins.write_shards(float_dir, v21_env.docids, v21_env.vectors, int8=False)
    service = RetrievalService(settings_for(tmp_path, float_dir))
    one = service.get(f"dense:prebuilt:{SET}:ef_1000", "v21")
    for q in queries(v21_env):
        assert_exact([d for d, _ in one.search_vector(q, 100)], v21_env, q)
    int8 = RetrievalService(settings_for(tmp_path)).get(f"dense:prebuilt:{SET}", "v21")  # efSearch 1000
    recall = np.mean(
        [len({d for d, _ in int8.search_vector(q, 100)} & set(exact(v21_env, q))) / 100 for q in queries(v21_env)]
    )
    assert recall >= 0.7, recall
    assert int8._index.shards == 10 and int8._index.ef_search == 1000 and int8._index.dim == 384


def test_queries_are_encoded_by_arctics_recipe(v21_env, tmp_path):
    """The query prefix of Arctic-embed-L's card, CLS pooling and normalisation (its directory says CLS); a
    directory that pools otherwise is refused with what the card says."""
    retriever = RetrievalService(settings_for(tmp_path)).get(f"dense:prebuilt:{SET}", "v21")
    text = "how do compilers translate a language"
    mine = retriever.encoder().encode([text], query=True)[0]
    by_hand = Encoder(str(v21_env.arctic)).encode([ARCTIC_PREFIX + text])[0]
    assert np.allclose(mine, by_hand, atol=1e-5) and abs(np.linalg.norm(mine) - 1) < 1e-5
    assert [d for d, _ in retriever.search(text, 10)] == [d for d, _ in retriever.search_vector(by_hand, 10)]
    mean = tmp_path / "mean-pooled"
    subprocess.run(["cp", "-r", str(v21_env.arctic), str(mean)], check=True)
    pooling = mean / "1_Pooling" / "config.json"
    pooling.write_text(
        json.dumps(
            {**json.loads(pooling.read_text()), "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}
        )
    )
    with pytest.raises(FileNotFoundError, match="pools by mean; its model card's recipe is cls pooling"):
        check_recipe("arctic-l", str(mean))


def test_the_set_wherever_the_grammar_takes_a_retriever(v21_env, tmp_path):
    from ragnarok.optimize.config import load_config
    from ragnarok.optimize.space import build_space

    with TestClient(create_app(settings_for(tmp_path), arena=False)) as client:
        for spec in (
            f"dense:prebuilt:{SET}@5 | extractive",
            f"rrf(bm25, dense:prebuilt:{SET})@10 | extractive",
            f"cc(bm25=0.4, dense:prebuilt:{SET}:ef_500=0.6)@10 | mmr@5 | extractive",
        ):
            answer = client.post("/rag", json={"topic": "a language for numerical processes", "pipeline": spec})
            assert answer.status_code == 200, (spec, answer.text)
            body = answer.json()
            assert body["references"] and all(r.startswith("msmarco_v2.1_doc_") for r in body["references"])
            assert any(s["citations"] for s in body["answer"]), body
        listed = {(r["index"], r["name"]): r["status"] for r in client.get("/v1/retrievers").json()}
        assert listed[("v21", f"dense:prebuilt:{SET}")] == "available"
        bad = client.post("/rag", json={"topic": "x", "pipeline": f"dense:prebuilt:{SET}:ef_0@5 | extractive"})
        assert bad.status_code == 422 and "ef_N" in bad.text
    config = tmp_path / "space.yaml"
    config.write_text(
        f"index: v21\ntopics: demo\nqrels: demo\nobjective: nDCG@10\nbudget: {{trials: 2}}\nnodes:\n"
        f"  - node: semantic\n    modules: [{{module: dense, model: 'prebuilt:{SET}'}}]\n"
        "  - node: retrieval\n    modules: [{module: semantic, depth: 10}]\n"
    )
    space = build_space(*load_config(config), settings_for(tmp_path))
    assert space.spec({}) == f"dense:prebuilt:{SET}@10"


def _cache_with(tmp_path: Path, v21, shards: list[Path]) -> Path:
    """A pyserini cache of links: the BM25 index and the given shards."""
    cache = tmp_path / "pyserini" / "indexes"
    cache.mkdir(parents=True)
    for path in [v21.bm25, *shards]:
        (cache / path.name).symlink_to(path, target_is_directory=True)
    return cache


def test_a_missing_shard_or_one_of_another_dimension_is_named(v21_env, tmp_path, monkeypatch):
    cache = _cache_with(tmp_path / "nine", v21_env, [s for s in v21_env.shards if "shard07" not in s.name])
    monkeypatch.setenv("PYSERINI_CACHE", str(cache.parent))
    with TestClient(create_app(settings_for(tmp_path), arena=False)) as client:
        answer = client.post("/v1/retrieve", json={"query": "x", "retriever": f"dense:prebuilt:{SET}", "k": 5})
        assert answer.status_code == 503 and "1 of its shards (shard07) missing" in answer.json()["detail"]
        assert "ragnarok prebuilt fetch msmarco-v2.1-doc-segmented.arctic-embed-l" in answer.json()["detail"]
    odd = tmp_path / "odd"
    v21_standins.write_shards(odd, [f"odd{i}" for i in range(60)], np.eye(60, 8, dtype=np.float32), shards=4)
    shards = [odd / v21_env.shards[3].name if "shard03" in s.name else s for s in v21_env.shards]
    cache = _cache_with(tmp_path / "mixed", v21_env, shards)
    monkeypatch.setenv("PYSERINI_CACHE", str(cache.parent))
    with TestClient(create_app(settings_for(tmp_path), arena=False)) as client:
        answer = client.post("/v1/retrieve", json={"query": "x", "retriever": f"dense:prebuilt:{SET}", "k": 5})
        assert answer.status_code == 503, answer.text
        assert "the shards' vectors differ in dimension: shard03 (8) against 384 for the others" in answer.text


def test_hits_the_bm25_index_has_no_text_for_are_dropped_and_counted(v21_env, tmp_path):
    half = tmp_path / "half.jsonl"
    lines = v21_env.collection.read_text(encoding="utf-8").splitlines()
    half.write_text("\n".join(lines[: len(lines) // 2]) + "\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "index", str(half), str(tmp_path / "half")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    kept = {json.loads(line)["docid"] for line in lines[: len(lines) // 2]}
    with TestClient(create_app(settings_for(tmp_path, half=str(tmp_path / "half")), arena=False)) as client:
        answer = client.post(
            "/v1/retrieve",
            json={"query": "numerical processes", "index": "half", "k": 40, "retriever": f"dense:prebuilt:{SET}"},
        )
        assert answer.status_code == 200, answer.text
        found = [c["docid"] for c in answer.json()["candidates"]]
        dropped = int(answer.headers["Ragnarok-Dropped-Hits"].split()[0])
        assert set(found) <= kept and dropped > 0 and len(found) + dropped == 40
        assert answer.headers["Ragnarok-Dropped-Hits"].endswith(
            "hits dropped: their docids are not in the index of texts"
        )


def test_the_catalogues_other_dense_indexes_say_what_they_lack(v21_env, tmp_path):
    service = RetrievalService(settings_for(tmp_path))
    with pytest.raises(FileNotFoundError, match="msmarco-v1-passage.bge-base-en-v1.5.hnsw is not on this machine"):
        service.get("dense:prebuilt:msmarco-v1-passage.bge-base-en-v1.5.hnsw", "v21").search("x", 1)
