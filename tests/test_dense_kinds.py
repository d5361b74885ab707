"""Dense index kinds at scale: flat (memory-mapped), hnsw, hnsw-sq8, lucene-hnsw and auto, written from
vectors computed elsewhere (`write_dense_index`), sharded and merged by score, searched by vector; an index of
another kind or dimension than it says is one clear error; a prebuilt Lucene HNSW index by name. Synthetic
clustered vectors over a real tiny Lucene index (the model is not the point), MiniLM where it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_dense import DOCS, PARAPHRASES

from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.registry import UnknownComponentError
from ragnarok.core.types import Query
from ragnarok.stages.retrieve.dense import DenseIndexMismatchError, DenseIndexNotFoundError, DenseRetriever, Encoder
from ragnarok.stages.retrieve.dense_build import write_dense_index
from ragnarok.stages.retrieve.dense_kinds import resolve_kind
from ragnarok.stages.retrieve.prebuilt import PrebuiltMissing, catalogue

N, DIM = 2000, 64


def clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 60 centres (as embeddings of a collection cluster by topic), float32."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, dim))
    vectors = centres[rng.integers(0, 60, n)] + 0.6 * rng.standard_normal((n, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def lucene_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kinds")
    docs = [{"docid": d, "title": t, "body": b, "url": "", "headings": ""} for d, t, b in DOCS]
    index_documents(iter(docs), root / "idx")
    return root / "idx"


@pytest.fixture(scope="module")
def built(lucene_dir) -> dict[str, Path]:
    """One synthetic collection written as every FAISS kind, and flat in 4 shards."""
    vectors, docids = clustered(N, DIM), [f"seg{i}" for i in range(N)]
    out = {}
    for name, kind, shards in [
        ("flat", "flat", 1),
        ("flat4", "flat", 4),
        ("hnsw", "hnsw", 1),
        ("sq8", "hnsw-sq8", 1),
        ("sq8x3", "hnsw-sq8", 3),
    ]:
        out[name] = lucene_dir.parent / name
        meta = write_dense_index(
            vectors, docids, out[name], model="minilm", kind=kind, shards=shards, lucene_dir=lucene_dir
        )
        assert meta["kind"] == kind and meta["dim"] == DIM and len(meta["shards"]) == shards
    return out


def dense(lucene_dir: Path, index_dir: Path) -> DenseRetriever:
    return DenseRetriever("dense:minilm", str(lucene_dir), "minilm", index_dir=str(index_dir))


def queries(n: int = 30) -> np.ndarray:
    rng = np.random.default_rng(7)
    base = clustered(N, DIM)[rng.integers(0, N, n)] + 0.3 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (base / np.linalg.norm(base, axis=1, keepdims=True)).astype(np.float32)


def test_exact_search_over_4_shards_ranks_as_one_flat_index(lucene_dir, built):
    one, four = dense(lucene_dir, built["flat"]), dense(lucene_dir, built["flat4"])
    assert [s["dir"] for s in json.loads((built["flat4"] / "meta.json").read_text())["shards"]] == [
        "shard-000",
        "shard-001",
        "shard-002",
        "shard-003",
    ]
    for q in queries():
        expected = one.search_vector(q, 100)
        assert four.search_vector(q, 100) == expected  # same docids, same scores, same order
        exact = np.argsort(-(clustered(N, DIM) @ q), kind="stable")[:100]
        assert [d for d, _ in expected] == [f"seg{i}" for i in exact]
        # the scores are the float64 inner products, row by row: the same whatever the shard boundaries (FAISS's
        # float32 ones can differ in the last bit with a row's place in its SIMD blocks, and swap near-ties)
        vectors = clustered(N, DIM).astype(np.float64)
        assert [s for _, s in expected] == [float((vectors[i] * q.astype(np.float64)).sum()) for i in exact]


def test_flat_is_memory_mapped_and_sq8_is_smaller_with_recall(lucene_dir, built):
    flat = dense(lucene_dir, built["flat"])
    flat.search_vector(queries(1)[0], 5)
    maps = Path("/proc/self/maps").read_text()
    assert str(built["flat"] / "index.faiss") in maps  # mapped, not read onto the heap
    import faiss

    in_memory = faiss.IndexFlatIP(DIM)
    in_memory.add(clustered(N, DIM)[N // 4 : N // 2])  # written by rows, never held: FAISS's own bytes
    assert (built["flat4"] / "shard-001" / "index.faiss").read_bytes() == faiss.serialize_index(in_memory).tobytes()
    size = {name: sum(f.stat().st_size for f in path.rglob("index.faiss")) for name, path in built.items()}
    assert size["hnsw"] - size["sq8"] >= 0.7 * size["flat"]  # 8-bit codes instead of 32-bit floats
    for name in ("hnsw", "sq8", "sq8x3"):
        approx = dense(lucene_dir, built[name])
        recall = np.mean(
            [
                len({d for d, _ in approx.search_vector(q, 100)} & {d for d, _ in flat.search_vector(q, 100)}) / 100
                for q in queries()
            ]
        )
        assert recall >= 0.95, (name, recall)


def test_auto_is_exact_up_to_the_setting_then_hnsw_sq8(lucene_dir, tmp_path, monkeypatch):
    assert resolve_kind("auto", 50, exact_max=100) == "flat" and resolve_kind("auto", 101, exact_max=100) == "hnsw-sq8"
    assert resolve_kind("hnsw", 10, exact_max=100) == "hnsw"
    with pytest.raises(ValueError, match="unknown dense index kind 'ivf'.*flat, hnsw, hnsw-sq8, lucene-hnsw, auto"):
        resolve_kind("ivf", 10)
    from ragnarok.core.settings import get_settings

    get_settings.cache_clear()
    monkeypatch.setenv("RAGNAROK_DENSE_EXACT_MAX_SEGMENTS", "500")
    try:
        vectors = clustered(600, DIM)
        meta = write_dense_index(vectors, [f"s{i}" for i in range(600)], tmp_path / "a", lucene_dir=lucene_dir)
        assert meta["kind"] == "hnsw-sq8" and meta["params"]["M"] == 32
        meta = write_dense_index(vectors[:500], [f"s{i}" for i in range(500)], tmp_path / "b", lucene_dir=lucene_dir)
        assert meta["kind"] == "flat"
    finally:
        get_settings.cache_clear()


def test_an_index_of_another_kind_or_dimension_is_one_clear_error(lucene_dir, built, tmp_path):
    wrong = tmp_path / "wrong"
    shutil.copytree(built["flat"], wrong)
    meta = json.loads((wrong / "meta.json").read_text())
    (wrong / "meta.json").write_text(json.dumps({**meta, "kind": "hnsw"}))
    with pytest.raises(
        DenseIndexMismatchError,
        match="says it is hnsw .meta.json. but its file holds a IndexFlatIP, not a IndexHNSWFlat",
    ):
        dense(lucene_dir, wrong).search_vector(queries(1)[0], 3)
    (wrong / "meta.json").write_text(json.dumps({**meta, "kind": "ivf-pq"}))
    with pytest.raises(DenseIndexMismatchError, match="unknown kind 'ivf-pq'"):
        dense(lucene_dir, wrong).search_vector(queries(1)[0], 3)
    (wrong / "meta.json").write_text(json.dumps({**meta, "dim": 384}))
    with pytest.raises(DenseIndexMismatchError, match="holds 64-dimensional vectors but its meta.json says 384"):
        dense(lucene_dir, wrong).search_vector(queries(1)[0], 3)
    # the query encoder (MiniLM, 384) against 64-dimensional vectors: named, not a crash in FAISS
    with pytest.raises(
        DenseIndexMismatchError,
        match="holds 64-dimensional vectors but the query encoder minilm gives 384-dimensional ones",
    ):
        dense(lucene_dir, built["sq8"]).search("a string instrument", 3)


def test_the_api_answers_503_and_the_cli_one_error_line_naming_the_mismatch(lucene_dir, built, tmp_path):
    from fastapi.testclient import TestClient

    from api.main import create_app
    from ragnarok.core.settings import Settings
    from ragnarok.stages.retrieve.dense import dense_dir

    lucene = tmp_path / "idx"
    shutil.copytree(lucene_dir, lucene)
    shutil.copytree(built["flat"], dense_dir(lucene, "minilm"))  # 64-dimensional vectors where MiniLM's go
    meta = json.loads((dense_dir(lucene, "minilm") / "meta.json").read_text())
    from ragnarok.collection.lucene_index import index_identity

    (dense_dir(lucene, "minilm") / "meta.json").write_text(
        json.dumps({**meta, "lucene": {**index_identity(lucene), "count": N}})
    )
    with TestClient(
        create_app(Settings(data_dir=tmp_path / "data", indexes={"x": str(lucene)}, default_index="x"))
    ) as client:
        r = client.post("/v1/retrieve", json={"query": "violin", "retriever": "dense:minilm", "k": 3})
    assert r.status_code == 503 and "64-dimensional vectors but the query encoder minilm gives 384" in r.text, r.text
    from test_index_lifecycle import _topics, ragnarok

    out = ragnarok(
        "search",
        "--topics",
        str(_topics(tmp_path)),
        "--index",
        str(lucene),
        "--retriever",
        "dense:minilm",
        "--output",
        str(tmp_path / "run.txt"),
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "holds 64-dimensional vectors but the query encoder minilm gives 384-dimensional ones" in errors[0]
    assert not (tmp_path / "run.txt").exists()


def test_lucene_hnsw_and_a_prebuilt_index_by_name(lucene_dir, built, tmp_path):
    """Anserini's HNSW index, written by write_dense_index and searched by vector, finds what exact search
    finds; the same index unpacked under a name is `dense:prebuilt:NAME` with its query encoder."""
    from ragnarok.core.settings import Settings
    from ragnarok.service.retrieval_service import RetrievalService

    vectors = clustered(N, DIM)[:600]
    meta = write_dense_index(
        vectors, [f"seg{i}" for i in range(600)], tmp_path / "lh", kind="lucene-hnsw", lucene_dir=lucene_dir
    )
    assert meta["kind"] == "lucene-hnsw" and meta["params"] == {"M": 16, "efConstruction": 100, "efSearch": 256}
    lucene_hnsw = dense(lucene_dir, tmp_path / "lh")
    for q in queries(5):
        exact = np.argsort(-(vectors @ q))[:10]
        hits = lucene_hnsw.search_vector(q, 10)
        assert len({d for d, _ in hits} & {f"seg{i}" for i in exact}) >= 9
        assert abs(hits[0][1] - float(vectors[int(hits[0][0][3:])] @ q)) < 1e-3  # a cosine, as FAISS gives
    with pytest.raises(DenseIndexMismatchError, match="holds 64-dimensional vectors but the query encoder minilm"):
        lucene_hnsw.search("a string instrument", 3)

    # a prebuilt index by its catalogue name, unpacked under pyserini's own directory name (tarball name + md5)
    name = "msmarco-v2.1-doc-segmented-shard00.arctic-embed-l.hnsw-int8"
    settings = Settings(
        data_dir=tmp_path / "data",
        prebuilt_dir=tmp_path / "prebuilt",
        indexes={"x": str(lucene_dir)},
        default_index="x",
    )
    for bad in ("tiny-minilm.hnsw", "../" + str(lucene_dir), ".hidden"):  # no catalogue name, or a path: never echoed
        with pytest.raises(UnknownComponentError) as missing:
            RetrievalService(settings).get(f"dense:prebuilt:{bad}")
        assert "not echoed" in missing.value.public and bad not in missing.value.public
    assert missing.value.public == (
        "unknown prebuilt index (the name is not echoed); available: a name of "
        "pyserini's prebuilt catalogue (`ragnarok prebuilt list`)"
    )
    with pytest.raises(
        PrebuiltMissing,
        match=rf"the prebuilt index {name} is not on this machine: .* Download it "
        rf"with `ragnarok prebuilt fetch {name}`",
    ):
        RetrievalService(settings).get(f"dense:prebuilt:{name}").search("x", 1)
    texts = [f"{t}\n{b}" for _, t, b in DOCS]
    write_dense_index(
        Encoder("minilm").encode(texts), [f"{d}#0_0" for d, _, _ in DOCS], tmp_path / "built", kind="lucene-hnsw"
    )
    (tmp_path / "prebuilt").mkdir()
    unpacked = tmp_path / "prebuilt" / catalogue()[name].dir_name
    (tmp_path / "built" / "lucene-hnsw").rename(unpacked)
    (unpacked / "ragnarok-prebuilt.json").write_text('{"encoder": "minilm"}')  # MiniLM's vectors, not Arctic's
    found = RetrievalService(settings).get(f"dense:prebuilt:{name}")
    for text, expected in PARAPHRASES:
        top = found.retrieve(Query(text=text), 3).candidates[0]
        assert top.docid == expected and top.doc.title, text
    (unpacked / "ragnarok-prebuilt.json").unlink()  # the name's encoder, Arctic-embed-L: not on this machine
    with pytest.raises(DenseIndexNotFoundError, match="arctic-l is not on this machine"):
        RetrievalService(settings).get(f"dense:prebuilt:{name}").search("x", 1)


def test_a_lucene_hnsw_index_is_written_from_a_fresh_process(tmp_path):
    """write_dense_index(kind="lucene-hnsw") as the first call of a process: the JVM is started with Anserini's
    jar before jnius is imported (it failed with NoClassDefFoundError: io/anserini/index/IndexHnswDenseVectors)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np; from pathlib import Path; "
        "from ragnarok.stages.retrieve.dense_build import write_dense_index; "
        "v = np.eye(20, 8, dtype=np.float32); "
        "print(write_dense_index(v, [f'd{i}' for i in range(20)], Path(sys.argv[1]), kind='lucene-hnsw')['kind'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "lh")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.returncode == 0 and out.stdout.split() == ["lucene-hnsw"], out.stderr[-2000:]
