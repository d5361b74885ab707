"""Anserini's own REST server (io.anserini.api.RestServer, from the fatjar pyserini ships, started here on a free
port) as a remote index in both of its URL forms, a prebuilt name and an index path; our GET /v1/{index}/search
answering its shape (checked against its own openapi.yaml both ways, and a client of one working with the
other); and a remote that is down, slow, drips or answers HTML bounded by the deadline."""

from __future__ import annotations

import http.server
import threading
import time
import zipfile
from urllib.parse import quote

import httpx
import jsonschema
import pytest
import yaml
from fastapi.testclient import TestClient
from servers import anserini_rest_server, serve_app

from api.main import create_app
from ragnarok.core.java import anserini_jar
from ragnarok.core.settings import Settings
from ragnarok.core.types import Query
from ragnarok.runtime.netaddr import free_port
from ragnarok.stages.retrieve.remote import RemoteRetriever

QUERIES = [
    "a language for numerical processes",
    "recursive compile of a node tree",
    "exception group handler",
    "multicast memory slots",
    "report on the algorithmic language",
    "educational programmers",
    "teardown class check values",
    "parser memory system",
    "time name description",
    "callable cmsg",
]


@pytest.fixture(scope="module")
def rest(v21):
    """The RestServer, finding prebuilt names in the stand-ins' cache as it finds them in pyserini's."""
    with anserini_rest_server({"ANSERINI_INDEX_CACHE": str(v21.cache)}) as base:
        yield base


def openapi_schema(name: str) -> dict:
    """A schema of the RestServer's own openapi.yaml (inside its jar), its $refs resolvable."""
    with zipfile.ZipFile(anserini_jar()) as jar:
        spec = yaml.safe_load(jar.read("rest/openapi.yaml"))
    components = spec["components"]["schemas"]
    return {**components[name], "components": {"schemas": components}}


def test_its_rest_server_is_a_remote_index_in_both_url_forms(v21, rest, tmp_path):
    indexes = {
        "by-name": f"{rest}/v1/msmarco-v2.1-doc-segmented",
        "by-path": f"{rest}/v1/{quote(str(v21.bm25), safe='')}",
        "raw-path": f"{rest}/v1/{v21.bm25}",
        "local": str(v21.bm25),
    }
    settings = Settings(data_dir=tmp_path / "data", indexes=indexes, default_index="local")
    with TestClient(create_app(settings, arena=False)) as client:
        for text in QUERIES:
            rankings = {}
            for index in indexes:
                answer = client.post("/v1/retrieve", json={"query": text, "index": index, "k": 10})
                assert answer.status_code == 200, (index, answer.text)
                rankings[index] = [c["docid"] for c in answer.json()["candidates"]]
                first = answer.json()["candidates"][0]["doc"]
                assert isinstance(first["start_char"], int) and first["segment"] and "contents" not in first
            assert rankings["by-name"] == rankings["by-path"] == rankings["raw-path"] == rankings["local"], text
        rag = client.post("/rag", json={"topic": QUERIES[0], "pipeline": "bm25@10 | extractive", "index": "by-name"})
        assert rag.status_code == 200 and any(s["citations"] for s in rag.json()["answer"]), rag.text


def test_our_search_route_answers_its_shape_both_ways(v21, rest, tmp_path):
    search, document = openapi_schema("SearchResponse"), openapi_schema("DocumentResponse")
    theirs = httpx.get(f"{rest}/v1/msmarco-v2.1-doc-segmented/search", params={"query": QUERIES[0], "hits": 5})
    jsonschema.validate(theirs.json(), search)
    settings = Settings(data_dir=tmp_path / "data", indexes={"v21": str(v21.bm25)}, default_index="v21")
    app = create_app(settings, arena=False)
    with TestClient(app) as client:
        ours = client.get("/v1/v21/search", params={"query": QUERIES[0], "hits": 5})
        jsonschema.validate(ours.json(), search)
        assert set(ours.json()) == set(theirs.json()) == {"api", "index", "query", "candidates"}
        assert [c["docid"] for c in ours.json()["candidates"]] == [c["docid"] for c in theirs.json()["candidates"]]
        assert [c["rank"] for c in ours.json()["candidates"]] == [1, 2, 3, 4, 5]
        raw = client.get("/v1/v21/search", params={"query": QUERIES[0], "hits": 2, "parse": "false"})
        jsonschema.validate(raw.json(), search)
        assert all(isinstance(c["doc"], str) for c in raw.json()["candidates"])
        docid = ours.json()["candidates"][0]["docid"]
        one = client.get(f"/v1/v21/doc/{quote(docid, safe='')}")
        jsonschema.validate(one.json(), document)
        assert one.json()["doc"]["segment"] == ours.json()["candidates"][0]["doc"]["segment"]
        assert client.get("/v1/v21/doc/no-such-docid").status_code == 404
    with serve_app(app) as base:  # a client of Anserini's REST shape (ours is one) against our server
        for text in QUERIES[:3]:
            via_ours = RemoteRetriever("bm25", f"{base}/v1/v21", 10).retrieve(Query(text=text), 5)
            via_theirs = RemoteRetriever("bm25", f"{rest}/v1/msmarco-v2.1-doc-segmented", 10).retrieve(
                Query(text=text), 5
            )
            assert [c.docid for c in via_ours.candidates] == [c.docid for c in via_theirs.candidates]
            assert [c.doc.start_char for c in via_ours.candidates] == [c.doc.start_char for c in via_theirs.candidates]


class _Bad(http.server.BaseHTTPRequestHandler):
    mode = "html"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.mode == "slow":
            time.sleep(5)
        self.send_response(200)
        body = b"<html><body>Bad gateway</body></html>" if self.mode != "drip" else b'{"candidates": [' + b" " * 50
        self.send_header("Content-Length", str(len(body) + (10**6 if self.mode == "drip" else 0)))
        self.end_headers()
        if self.mode == "drip":
            for _ in range(40):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("mode", "status", "says"),
    [
        ("down", 502, "failed: ConnectError"),
        ("html", 502, "with something that is not JSON"),
        ("slow", 504, "did not answer within 1 s"),
        ("drip", 504, "sent no whole answer within 1 s"),
    ],
)
def test_a_remote_that_is_down_slow_dripping_or_html_is_bounded(tmp_path, mode, status, says):
    server = None
    if mode == "down":
        url = f"http://127.0.0.1:{free_port()}/v1/x"
    else:
        handler = type(f"_Bad{mode}", (_Bad,), {"mode": mode})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/x"
    settings = Settings(data_dir=tmp_path / "data", indexes={"anz": url}, default_index="anz", remote_timeout_s=1)
    try:
        with TestClient(create_app(settings, arena=False)) as client:
            start = time.monotonic()
            answer = client.post("/v1/retrieve", json={"query": "x", "k": 3})
            assert time.monotonic() - start < 3.5
            assert answer.status_code == status and says in answer.json()["detail"], answer.text
            assert url not in answer.text  # the internal address is not shown
    finally:
        if server is not None:
            server.shutdown()
