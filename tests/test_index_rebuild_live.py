"""An index rebuilt under a running server: the service notices the new commit before the next search,
reopens its Lucene searchers, refuses the dense index derived from the old commit as stale (503 naming the
rebuild) until it is rebuilt, and lists dense:minilm as not built for an index that has none."""

from __future__ import annotations

import httpx
from servers import serve_app
from test_index_lifecycle import docs

from api.main import create_app
from ragnarok.collection.demo_index import ensure_dense_index
from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.settings import Settings

T = 120


def _retrieve(base: str, retriever: str, index: str = "x") -> httpx.Response:
    return httpx.post(
        f"{base}/v1/retrieve",
        json={"query": "alpha bravo topic", "retriever": retriever, "index": index, "k": 20},
        timeout=T,
    )


def _docids(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {c["docid"].split("#")[0] for c in response.json()["candidates"]}


def _segments(base: str, prefixes: list[str]) -> dict:
    answer = httpx.post(f"{base}/v1/segments", json={"prefixes": prefixes, "index": "x"}, timeout=T)
    assert answer.status_code == 200, answer.text
    return answer.json()["segments"]


def _listed(base: str, index: str, name: str) -> dict:
    listed = httpx.get(f"{base}/v1/retrievers", timeout=T).json()
    return next(r for r in listed if r["index"] == index and r["name"] == name)


def test_a_rebuilt_index_is_noticed_by_a_running_server(tmp_path):
    lucene, bare = tmp_path / "idx", tmp_path / "bare"
    index_documents(iter(docs(12)), lucene)
    ensure_dense_index(lucene, "minilm")
    index_documents(iter(docs(3, prefix="b")), bare)  # no dense index built
    settings = Settings(data_dir=tmp_path / "data", indexes={"x": str(lucene), "y": str(bare)}, default_index="x")
    app = create_app(settings, arena=False)
    with serve_app(app) as base:
        old = {f"d{i}" for i in range(12)}
        assert _docids(_retrieve(base, "bm25")) <= old
        assert _docids(_retrieve(base, "dense:minilm")) <= old
        assert _listed(base, "x", "dense:minilm")["available"]
        assert set(_segments(base, ["d1#", "new1#"])) == {"d1#"}
        not_built = _listed(base, "y", "dense:minilm")  # listed, though its dense index is not built yet
        assert not not_built["available"] and not_built["status"] == "unavailable"
        assert not_built["reason"].startswith("not built") and "ragnarok index --dense minilm" in not_built["reason"]

        index_documents(iter(docs(5, prefix="new")), lucene)  # `ragnarok index` under the running server
        new = {f"new{i}" for i in range(5)}
        assert _docids(_retrieve(base, "bm25")) <= new  # the searcher reopened on the new commit
        assert app.state.retrieval.reopened == 1
        assert set(_segments(base, ["d1#", "new1#"])) == {"new1#"}  # neighbours/automerge look in the new commit
        assert _docids(_retrieve(base, "bm25+rm3")) <= new
        dense = _retrieve(base, "dense:minilm")
        assert dense.status_code == 503, dense.text
        detail = dense.json()["detail"]
        assert "is stale" in detail and "ragnarok index --dense minilm --from-lucene" in detail, detail
        listed = _listed(base, "x", "dense:minilm")
        assert not listed["available"] and listed["reason"].startswith("stale")
        mixed = httpx.post(
            f"{base}/rag",
            json={"topic": "alpha", "index": "x", "pipeline": "rrf(bm25, dense:minilm)@10 | extractive"},
            timeout=T,
        )
        assert mixed.status_code == 503 and "is stale" in mixed.text, mixed.text  # no new BM25 with old dense hits

        ensure_dense_index(lucene, "minilm")  # rebuilt: served at once
        assert _docids(_retrieve(base, "dense:minilm")) <= new
        assert _listed(base, "x", "dense:minilm")["available"]
        answer = httpx.post(
            f"{base}/rag",
            json={"topic": "alpha", "index": "x", "trace": True, "pipeline": "rrf(bm25, dense:minilm)@10 | extractive"},
            timeout=T,
        )
        assert answer.status_code == 200, answer.text
        assert "d1#" not in answer.text and "new" in answer.text
        # the other index was not touched: its retrievers were not dropped
        assert _docids(_retrieve(base, "bm25", "y")) <= {"b0", "b1", "b2"}
        assert app.state.retrieval.reopened == 2  # the lucene rebuild, then the dense rebuild


def test_an_unchanged_index_keeps_its_retrievers(tmp_path):
    from ragnarok.service.retrieval_service import RetrievalService

    lucene = tmp_path / "idx"
    index_documents(iter(docs(4)), lucene)
    service = RetrievalService(Settings(data_dir=tmp_path / "data", indexes={"x": str(lucene)}, default_index="x"))
    first = service.get("bm25", "x")
    (lucene / "write.lock").touch()  # the directory changes, the commit does not
    assert service.get("bm25", "x") is first and service.reopened == 0
    index_documents(iter(docs(4)), lucene)  # the same documents again: another commit all the same
    assert service.get("bm25", "x") is not first and service.reopened == 1
