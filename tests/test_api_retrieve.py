"""The R service over a real Lucene index: the happy path, Anserini's REST shape, and every bad input."""

import pytest
from fastapi.testclient import TestClient
from servers import serve_app
from test_lucene import DOCS

from api.main import create_app
from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.settings import Settings


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    index_documents(iter(DOCS), root / "small")
    return Settings(data_dir=root, indexes={"small": str(root / "small")}, default_index="small")


@pytest.fixture(scope="module")
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


def test_retrieve_returns_a_rank_llm_request(client):
    r = client.post("/v1/retrieve", json={"query": "compress files module", "qid": "q9", "k": 2})
    assert r.status_code == 200
    body = r.json()
    assert body["query"] == {"text": "compress files module", "qid": "q9"}
    assert body["candidates"][0]["docid"] == "gzip#0_0"
    assert set(body["candidates"][0]["doc"]) == {"segment", "title", "url", "headings", "start_char", "end_char"}
    assert len(body["candidates"]) == 2


@pytest.mark.parametrize("retriever", ["bm25", "bm25+rocchio", "bm25+rm3"])
def test_each_retriever_is_served(client, retriever):
    r = client.post("/v1/retrieve", json={"query": "command line", "retriever": retriever, "k": 3})
    assert r.status_code == 200 and r.json()["candidates"][0]["docid"].startswith("argparse")


def test_anserini_search_shape(client):
    r = client.get("/v1/small/search", params={"query": "zlib", "hits": 1, "qid": "7"})
    assert r.status_code == 200
    assert r.json()["query"] == {"text": "zlib", "qid": "7"}
    assert [c["docid"] for c in r.json()["candidates"]] == ["gzip#0_0"]


def test_retrievers_listing_and_docs(client):
    listed = client.get("/v1/retrievers").json()
    assert {
        "name": "bm25+rm3",
        "index": "small",
        "kind": "local",
        "available": True,
        "status": "available",
        "reason": "",
        "progress": None,
    } in listed
    demo = [x for x in listed if x["index"] == "demo"]
    assert demo and not demo[0]["available"] and "no Lucene index" in demo[0]["reason"]
    assert demo[0]["status"] == "unavailable"
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/docs").status_code == 200
    assert "/v1/retrieve" in client.get("/openapi.json").json()["paths"]


BAD_BODIES = {
    "empty query": (b'{"query": ""}', 422, "empty"),
    "whitespace query": (b'{"query": " \\t\\n "}', 422, "empty"),
    "k zero": (b'{"query": "x", "k": 0}', 422, "k must be"),
    "k negative": (b'{"query": "x", "k": -5}', 422, "k must be"),
    "k too large": (b'{"query": "x", "k": 10001}', 422, "k must be"),
    "unknown retriever": (b'{"query": "x", "retriever": "splade"}', 404, "unknown retriever"),
    "unknown index": (b'{"query": "x", "index": "msmarco"}', 404, "unknown index"),
    "malformed json": (b'{"query": "x",', 422, "JSON"),
    "not an object": (b'["x"]', 422, "dictionary"),
    "query not a string": (b'{"query": 5}', 422, "string"),
    "invalid utf-8": (b'{"query": "\xff\xfe caf\xe9"}', 400, ""),
    "1 MB query": (b'{"query": "' + b"a" * 1_000_000 + b'"}', 413, "limit"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES), ids=list(BAD_BODIES))
def test_bad_input_is_a_clear_4xx(client, case):
    body, status, words = BAD_BODIES[case]
    r = client.post("/v1/retrieve", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json")
    assert words in str(r.json()["detail"])


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"query": "", "hits": 5}, 422),
        ({"hits": 5}, 422),
        ({"query": "x", "hits": 0}, 422),
        ({"query": "x", "hits": "many"}, 422),
        ({"query": "\ufffd broken"}, 400),
    ],
)
def test_bad_search_params(client, params, status):
    assert client.get("/v1/small/search", params=params).status_code == status


def test_invalid_utf8_in_url_is_refused(client):
    r = client.get("/v1/small/search?query=%FF%FEabc&hits=1")
    assert r.status_code == 400 and "UTF-8" in r.json()["detail"]


def test_unknown_index_in_path(client):
    r = client.get("/v1/nope/search", params={"query": "x"})
    assert r.status_code == 404 and "unknown index (the name is not echoed)" in r.json()["detail"]


def test_remote_anserini_backend_over_real_http(settings):
    """A second R service uses the first one (Anserini's REST shape) as its index, over real HTTP."""
    with serve_app(create_app(settings)) as base:
        remote = Settings(data_dir=settings.data_dir, indexes={"far": f"{base}/v1/small"}, default_index="far")
        with TestClient(create_app(remote)) as far:
            r = far.post("/v1/retrieve", json={"query": "compress files", "k": 2})
            assert r.status_code == 200, r.text
            assert r.json()["candidates"][0]["docid"] == "gzip#0_0"
            assert r.json()["candidates"][0]["doc"]["title"] == "gzip"
            assert far.post("/v1/retrieve", json={"query": "x", "retriever": "bm25+rm3"}).status_code == 404
    down = Settings(data_dir=settings.data_dir, indexes={"far": f"{base}/v1/small"}, default_index="far")
    with TestClient(create_app(down)) as far:
        r = far.post("/v1/retrieve", json={"query": "compress files", "k": 2})
        assert r.status_code == 502 and "failed" in r.json()["detail"]
