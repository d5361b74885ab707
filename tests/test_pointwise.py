"""Pointwise rerankers without rank_llm: monoT5 (transformers) and cross-encoders
(sentence-transformers), run for real on tiny randomly initialised checkpoints built here with the
`tokenizers` library and saved to a temp dir, loaded by path through the code users use (the registry, the
API, `/rag`). The contract: finite scores, the output is the top-k of the input, batching gives the scores of
one by one, runs are deterministic; the bounds of the CPU rerankers (413 before any work, deadline, cancel);
bad input answered 4xx naming the problem. A real checkpoint is checked where an env var points at one."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from servers import rerank_behind_a_counting_hub, serve_app

from api.main import create_app
from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.fuse import ranked, rrf
from ragnarok.core.settings import Settings
from ragnarok.core.types import Request
from ragnarok.runtime.cancel import CancelToken, ShuttingDown
from ragnarok.service.retrieval_service import RerankService
from ragnarok.stages.components import RERANKERS
from ragnarok.stages.rerank.base import RerankerUnavailable
from ragnarok.stages.rerank.cross_encoder import CrossEncoderReranker
from ragnarok.stages.rerank.monot5 import MonoT5Reranker
from ragnarok.stages.rerank.pointwise import PointwiseReranker
from ragnarok.stages.rerank.rank_llm_adapter import RankLLMReranker
from ragnarok.stages.rerank.tiny import build_tiny_cross_encoder, build_tiny_monot5

ROOT = Path(__file__).resolve().parent.parent

QUERY = "how do i compress a file with gzip"
TEXTS = [
    "the gzip module provides a simple interface to compress and decompress files like gnu gzip",
    "the capital of france is paris a city on the river seine",
    "parse command line arguments with argparse options flags and positional arguments",
    "json encoder decoder dumps loads strings numbers lists objects",
    "sqlite3 database connection cursor execute query rows tables " * 80,  # ~700 words: truncated to 512 tokens
    "threads processes locks queues asyncio event loop tasks futures",
    "compress",
    "gzip gzip gzip decompress files",
    "a city on the river",
    "unknown words zebra quokka",
    "how do i compress a file with gzip and decompress it again " * 3,
]
KINDS = {"monot5": MonoT5Reranker, "crossencoder": CrossEncoderReranker}


def request_of(texts: list[str], query: str = QUERY) -> Request:
    return Request.model_validate(
        {
            "query": {"text": query, "qid": "q1"},
            "candidates": [
                {"docid": f"d{i}", "score": float(len(texts) - i), "doc": {"title": f"t{i}", "segment": t}}
                for i, t in enumerate(texts)
            ],
        }
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {"monot5": build_tiny_monot5(root / "t5"), "crossencoder": build_tiny_cross_encoder(root / "ce")}


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No model hub, and an empty Hugging Face cache: nothing can be found or fetched but what is on disk."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def tiny_settings(tmp_path: Path, tiny: dict[str, Path], **extra) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        monot5_model=str(tiny["monot5"]),
        cross_encoder_model=str(tiny["crossencoder"]),
        **extra,
    )


# --- the contract ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_reranker_contract(kind, tiny, tmp_path):
    service = RerankService(tiny_settings(tmp_path, tiny, pointwise_batch_size=4))
    reranker = service.get(kind)  # the configured path
    assert type(reranker) is KINDS[kind] and reranker.availability() is None
    assert reranker.checkpoint == str(tiny[kind])
    request = request_of(TEXTS)
    n = len(TEXTS)
    full = reranker.rerank(request, n)
    assert reranker.batches == 3  # 11 candidates, 4 at a time
    ids = [c.docid for c in full.candidates]
    assert sorted(ids) == sorted(c.docid for c in request.candidates)  # a permutation of the input
    scores = [c.score for c in full.candidates]
    assert all(np.isfinite(scores)) and scores == sorted(scores, reverse=True)
    assert len(set(scores)) > 1, "a random model still tells candidates apart"
    by_id = {c.docid: c for c in request.candidates}
    assert all(c.doc == by_id[c.docid].doc for c in full.candidates)  # stored fields unchanged
    top = reranker.rerank(request, 5)
    assert [c.docid for c in top.candidates] == ids[:5]  # the top-k of the same scores
    assert reranker.rerank(request, n).model_dump() == full.model_dump()  # deterministic, to the bit
    # batching gives the scores of one by one (padding is masked), whatever the order of the candidates
    one = KINDS[kind](name=kind, checkpoint=str(tiny[kind]), batch_size=1)
    single = one.scores(QUERY, [f"t{i}\n{t}" for i, t in enumerate(TEXTS)])
    assert one.batches == n
    batched = dict(zip(ids, scores))
    np.testing.assert_allclose([batched[f"d{i}"] for i in range(n)], single, rtol=0, atol=1e-5)
    # by path in the request too, and the empty cases
    by_path = service.get(f"{kind}:{tiny[kind]}")
    assert by_path is not reranker and by_path.rerank(request, 3).candidates == top.candidates[:3]
    assert reranker.rerank(request_of([]), 5).candidates == []


def test_monot5_prompt_is_cut_to_512_tokens_keeping_its_end(tiny):
    reranker = MonoT5Reranker(checkpoint=str(tiny["monot5"]))
    loaded = reranker._loaded()
    tok = loaded.tokenizer
    short, long = reranker.input_ids(loaded, QUERY, [TEXTS[0], TEXTS[4]])
    assert short == tok(f"Query: {QUERY} Document: {TEXTS[0]} Relevant:")["input_ids"]  # as one string, </s>
    assert len(long) == 512 and long[-3:] == [*loaded.suffix, tok.eos_token_id]
    (huge,) = reranker.input_ids(loaded, "gzip " * 1000, [TEXTS[0]])
    assert len(huge) <= 512 and huge[-3:] == [*loaded.suffix, tok.eos_token_id]
    assert loaded.true_id == tok.convert_tokens_to_ids("true") and loaded.false_id == tok.convert_tokens_to_ids("false")


def test_native_monot5_is_the_default_and_rank_llm_keeps_its_other_models(tiny, tmp_path):
    service = RerankService(tiny_settings(tmp_path, tiny))
    assert isinstance(service.get("monot5"), MonoT5Reranker)
    assert isinstance(service.get("crossencoder"), CrossEncoderReranker)
    assert "transformers" in RERANKERS.get("monot5").description
    assert "rank_llm" in RERANKERS.get("lit5").description
    with pytest.raises(RerankerUnavailable, match="rank_llm"):
        service.get("lit5")  # rank_llm is not installed here: it says so
    assert not issubclass(RankLLMReranker, PointwiseReranker)


def test_a_model_name_from_a_request_never_reaches_a_model_hub(tmp_path):
    """A fresh process, online as far as it knows, whose model hub (HF_ENDPOINT) is a local server counting
    requests: names a request makes up are refused (404) without a single request to it."""
    statuses, hits = rerank_behind_a_counting_hub(
        [
            "monot5:castorini/monot5-large-msmarco",
            "crossencoder:BAAI/bge-reranker-large",
            "monot5:nope",
            "crossencoder:../nope",
        ],
        tmp_path,
    )
    assert statuses == [404, 404, 404, 404]
    assert hits == []


# --- bounds: work cap, cancellation, deadline ---------------------------------------------------------------


def body(texts: list[str], reranker: str, k: int = 5) -> dict:
    return {"request": request_of(texts).model_dump(mode="json"), "reranker": reranker, "k": k}


def test_cancelled_work_stops_before_the_next_batch(tiny):
    reranker = MonoT5Reranker(checkpoint=str(tiny["monot5"]), batch_size=1)
    reranker._loaded()
    token = CancelToken()
    token.cancel(ShuttingDown, "the server is shutting down")
    with pytest.raises(ShuttingDown):
        token.run(lambda: reranker.rerank(request_of(TEXTS), 5))
    assert reranker.batches == 0


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_is_a_4xx_naming_the_problem(kind, tiny, tmp_path):
    other = tiny["crossencoder" if kind == "monot5" else "monot5"]
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((tiny[kind] / "config.json").read_text())
    # paths in requests allowed (RAGNAROK_ALLOW_MODEL_PATHS=1); tests/test_request_paths.py has the default
    app = create_app(tiny_settings(tmp_path, tiny, cpu_rerank_max_candidates=10, allow_model_paths=True), arena=False)
    unknown_path = ["(a path, not echoed)", "a local model directory"]  # one 404 for any path, never echoed
    with TestClient(app) as client:
        cases = [
            (f"{kind}:/no/such/model", 404, unknown_path),
            # the other kind's configured directory: what it holds and what is needed, never its path
            (f"{kind}:{other}", 422, ["(not echoed) holds a", "needs a"]),
            (f"{kind}:{tmp_path}", 404, unknown_path),  # a directory without config.json: the same 404
            (f"{kind}:{no_weights}", 422, ["no weights in", "model.safetensors"]),
            (f"{kind}:made-up/model", 404, unknown_path),  # never looked up on a hub
            (
                f"{kind}:{'base' if kind == 'monot5' else 'bge-base'}",
                422,
                ["not on this machine", "RAGNAROK_ALLOW_DOWNLOADS=1"],
            ),
        ]
        for reranker, status, words in cases:
            r = client.post("/v1/rerank", json=body(TEXTS[:3], reranker))
            assert r.status_code == status, (reranker, r.text)
            assert all(w in r.json()["detail"] for w in words), (reranker, r.json())
            if reranker == f"{kind}:{other}":  # a configured model's directory is never named by its path
                assert str(other) not in r.text, (reranker, r.text)
        # more candidates than the cap: 413 before anything is scored
        served = app.state.reranking.get(kind)
        before = served.batches
        r = client.post("/v1/rerank", json=body(TEXTS, kind))
        assert r.status_code == 413 and "at most 10" in r.json()["detail"], r.text
        assert "RAGNAROK_CPU_RERANK_MAX_CANDIDATES" in r.json()["detail"] and served.batches == before
        r = client.post("/v1/rerank", json=body(TEXTS[:10], kind))
        assert r.status_code == 200 and len(r.json()["candidates"]) == 5 and served.batches > before
    # the default checkpoint, a Hugging Face name that is not on this machine: 422 naming what to set
    with TestClient(create_app(Settings(data_dir=tmp_path / "d2"), arena=False)) as client:
        r = client.post("/v1/rerank", json=body(TEXTS[:3], kind))
        setting = "RAGNAROK_MONOT5_MODEL" if kind == "monot5" else "RAGNAROK_CROSS_ENCODER_MODEL"
        assert r.status_code == 422 and setting in r.json()["detail"] and "not on this machine" in r.json()["detail"]


@pytest.mark.slow
def test_the_deadline_answers_504_and_stops_the_work(tiny, tmp_path):
    app = create_app(tiny_settings(tmp_path, tiny, pointwise_batch_size=1, cpu_rerank_timeout_s=1.0), arena=False)
    served = app.state.reranking.get("monot5")
    served._loaded()  # loading (importing transformers) may itself take more than the 1 s under test
    with serve_app(app) as base:
        r = httpx.post(f"{base}/v1/rerank", json=body(TEXTS[:2], "monot5"), timeout=60)
        assert r.status_code == 200 and served.batches == 2, r.text
        many = [TEXTS[4][:2400]] * 800  # 800 candidates of ~400 tokens, one per batch: far more than 1 s
        r = httpx.post(f"{base}/v1/rerank", json=body(many, "monot5"), timeout=60)
        assert r.status_code == 504 and r.json()["detail"] == "no answer within 1 s", r.text
        seen = served.batches
        time.sleep(1.0)
        assert served.batches - seen <= 1 and served.batches < 800  # stopped within a batch


# --- /rag over a tiny index, with both rerankers given by path ------------------------------------------------


def test_rag_runs_monot5_with_rrf_and_a_cross_encoder(tiny, tmp_path):
    docs = [
        {"docid": f"doc{i}", "title": f"t{i}", "body": t, "url": f"https://example.org/{i}", "headings": ""}
        for i, t in enumerate(TEXTS)
    ]
    index = tmp_path / "index"
    assert index_documents(iter(docs), index) == len(TEXTS)
    settings = tiny_settings(tmp_path, tiny, indexes={"tiny": str(index)}, default_index="tiny")
    spec = "bm25@30 | monot5@20~rrf | crossencoder@20 | extractive"
    with TestClient(create_app(settings, arena=False)) as client:
        r = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": spec, "trace": True})
        assert r.status_code == 200, r.text
        out = r.json()
        stages = [t["stage"] for t in out["trace"]]
        assert stages[0].startswith("bm25") and stages[1:] == ["monot5@20~rrf", "crossencoder@20", "extractive"]
        retrieved, fused, reranked = (t["ranking"] for t in out["trace"][:3])
        assert len(retrieved) >= 3 and len(fused) == len(reranked) == len(retrieved)  # all kept (@20)
        assert sorted(fused) == sorted(retrieved) and sorted(reranked) == sorted(retrieved)
        # the cross-encoder's order is its own scores' order: what it answers for the same input directly
        found = client.post("/v1/retrieve", json={"query": "compress a file with gzip", "k": 30}).json()
        docs = {c["docid"]: c for c in found["candidates"]}
        assert [c["docid"] for c in found["candidates"]] == retrieved
        # ~rrf: monoT5's ranking fused with the one it was given
        mono = client.post("/v1/rerank", json={"request": found, "reranker": "monot5", "k": 20}).json()
        expected = rrf(
            [
                {c["docid"]: c["score"] for c in mono["candidates"]},
                {c["docid"]: c["score"] for c in found["candidates"]},
            ]
        )
        assert fused == [d for d, _ in ranked(expected)]
        direct = client.post(
            "/v1/rerank",
            json={
                "request": {"query": found["query"], "candidates": [docs[d] for d in fused]},
                "reranker": "crossencoder",
                "k": 20,
            },
        )
        assert direct.status_code == 200 and [c["docid"] for c in direct.json()["candidates"]] == reranked
        assert out["references"] and set(out["references"]) <= set(retrieved)


# --- a real checkpoint, where one is on this machine ----------------------------------------------------------

PAIRS = [  # MS MARCO-style: (query, relevant passage, non-relevant passage)
    (
        "what is the capital of france",
        "Paris is the capital and most populous city of France.",
        "The gzip module provides a simple interface to compress and decompress files.",
    ),
    (
        "how many legs does a spider have",
        "Spiders are arachnids: they have eight legs and two body segments.",
        "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    ),
    (
        "when did world war 2 end",
        "World War II ended in 1945, with the surrenders of Germany and Japan.",
        "Photosynthesis converts light energy into chemical energy in plants.",
    ),
]


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("RAGNAROK_TEST_MONOT5"),
    reason="set RAGNAROK_TEST_MONOT5 to a local monoT5 checkpoint (e.g. monot5-base-msmarco-10k)",
)
def test_a_real_monot5_checkpoint_ranks_relevant_passages_first():
    reranker = MonoT5Reranker(checkpoint=os.environ["RAGNAROK_TEST_MONOT5"])
    for query, relevant, other in PAIRS:
        yes, no = reranker.scores(query, [relevant, other])
        assert yes > np.log(0.5) > no, (query, yes, no)  # P(true) above and below one half


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("RAGNAROK_TEST_CROSS_ENCODER"),
    reason="set RAGNAROK_TEST_CROSS_ENCODER to a local cross-encoder (e.g. ms-marco-MiniLM-L-6-v2)",
)
def test_a_real_cross_encoder_ranks_relevant_passages_first():
    reranker = CrossEncoderReranker(checkpoint=os.environ["RAGNAROK_TEST_CROSS_ENCODER"])
    for query, relevant, other in PAIRS:
        yes, no = reranker.scores(query, [relevant, other])
        assert yes > no, (query, yes, no)


def test_tiny_checkpoints_are_what_users_load(tiny):
    """The test models are plain Hugging Face directories (what `save_pretrained` writes), nothing special."""
    config = json.loads((tiny["monot5"] / "config.json").read_text())
    assert config["model_type"] == "t5" and config["architectures"] == ["T5ForConditionalGeneration"]
    config = json.loads((tiny["crossencoder"] / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    for path in tiny.values():
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in path.iterdir()}
