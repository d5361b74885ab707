"""Every bad input gets a short 4xx JSON error naming the problem, never a 500.

Real parts throughout: the demo Lucene index, the app in process (TestClient) or on a real uvicorn server
(chunked bodies, a counting "model hub").
"""

from __future__ import annotations

import dataclasses
import json
import math
import socket
from pathlib import Path

import anyio
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from servers import rerank_behind_a_counting_hub, serve_app

from api.body import MAX_NESTING, StrictJSONRoute
from api.errors import ErrorOut
from api.main import create_app
from ragnarok.core.fuse import cc, dbsf, ranked, rrf
from ragnarok.core.spec import MAX_SOURCES, SpecError, parse
from ragnarok.core.spec_mapping import from_mapping
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.service.gateway import PipelineRunner, StageError

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = [
    {"docid": f"d{i}", "score": 1.0 - i / 10, "doc": {"segment": f"gzip compresses files, part {i}."}} for i in range(3)
]
REQUEST = {"query": {"text": "gzip", "qid": "1"}, "candidates": CANDIDATES}


@pytest.fixture(scope="module")
def app(demo_settings):
    return create_app(demo_settings, arena=False)


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def error(r, status: int) -> object:
    """The ``detail`` of an error response, checked to be ``status`` and to match the documented schema."""
    assert r.status_code == status, r.text[:2000]
    assert r.headers["content-type"].startswith("application/json"), r.text[:200]
    ErrorOut.model_validate(r.json())
    assert len(r.content) < 2_000, f"an error body of {len(r.content):,} bytes"
    return r.json()["detail"]


# 1. a pipeline given as an object with missing or wrong-typed keys


@pytest.mark.parametrize(
    ("pipeline", "words"),
    [
        ({}, "pipeline.retrieve is missing"),
        ({"rerank": "abc"}, "rerank"),
        ({"retrieve": "bm25", "rerank": "abc"}, "rerank"),
        ({"retrieve": "bm25", "depth": "abc"}, "depth"),
        ({"retrieve": "bm25", "generate": ["extractive"]}, "generate"),
        ({"retrieve": "bm25", "rerank": [{"name": "mmr"}]}, "depth"),
        ({"retrieve": "bm25", "depth": 10**30}, "depth"),
        ({"retrieve": "bm25", "nope": 1}, "(an unknown key)"),  # the caller's key is not echoed
        ({"pipeline": "bm25 | extractive", "depth": 3}, "give no other key"),
    ],
)
def test_pipeline_objects_are_typed(client, pipeline, words):
    detail = error(client.post("/rag", json={"topic": "gzip", "pipeline": pipeline}), 422)
    assert words in json.dumps(detail)


def test_from_mapping_raises_spec_errors_naming_the_key():
    for bad in (
        {},
        {"depth": "abc"},
        {"retrieve": "bm25", "generate": [1]},
        {"retrieve": 3},
        {"retrieve": "bm25", "rerank": [{"name": "mmr", "depth": True}]},
    ):
        with pytest.raises(SpecError, match="malformed pipeline"):
            from_mapping(bad)
    with pytest.raises(SpecError, match=r"pipeline\.rerank\.0\.depth must be at most 50"):
        from_mapping({"retrieve": "bm25", "depth": 50, "rerank": [{"name": "mmr", "depth": 60}]}, max_depth=50)
    assert (
        str(
            from_mapping(
                {
                    "retrieve": "bm25",
                    "rerank": [{"name": "mmr", "depth": 5, "arg": "0.5"}],
                    "generate": {"name": "extractive"},
                }
            )
        )
        == "bm25@100 | mmr:0.5@5 | extractive"
    )


def test_a_structured_pipeline_runs(client):
    r = client.post(
        "/rag",
        json={
            "topic": "compress a file with gzip",
            "pipeline": {"retrieve": "bm25", "depth": 10, "generate": {"name": "extractive"}},
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["references"]


# 2. a bad MMR λ


@pytest.mark.parametrize("lam", ["abc", "2", "nan", "-0.5", "inf", "1e400"])
def test_bad_mmr_lambda_is_422_naming_it(client, lam):
    detail = error(client.post("/v1/rerank", json={"request": REQUEST, "reranker": f"mmr:{lam}", "k": 2}), 422)
    assert detail == "mmr:LAMBDA takes a number from 0 to 1, got (not echoed)"  # never the caller's text


@pytest.mark.parametrize("lam", ["abc", "2", "nan"])
def test_bad_mmr_lambda_inside_a_pipeline(client, lam):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": f"bm25@10 | mmr:{lam}@5 | extractive"})
    detail = error(r, 422)
    assert detail["stage"] == "rerank mmr" and "mmr:LAMBDA takes a number from 0 to 1" in detail["error"]


# 3. unknown embedding models: a clear 4xx, and no model hub is ever asked


@pytest.mark.parametrize(
    "reranker",
    ["embedding:nope", "embedding:sentence-transformers/all-mpnet-base-v2", "embedding:/etc", "embedding:../.."],
)
def test_unknown_embedding_model_is_404_naming_the_models(client, reranker):
    detail = error(client.post("/v1/rerank", json={"request": REQUEST, "reranker": reranker, "k": 2}), 404)
    assert detail.startswith("unknown embedding model") and "minilm" in detail and "arctic-l" in detail


def test_unknown_dense_model_is_404(client):
    detail = error(client.post("/v1/retrieve", json={"query": "gzip", "retriever": "dense:nope"}), 404)
    assert "unknown embedding model (the name is not echoed)" in detail
    r = client.post("/rag", json={"topic": "gzip", "pipeline": "rrf(bm25, dense:nope)@10 | extractive"})
    assert "unknown embedding model (the name is not echoed)" in error(r, 404)["error"]


def test_a_client_chosen_model_never_reaches_a_model_hub(tmp_path):
    """A fresh process whose model hub (HF_ENDPOINT) is a local server counting requests: ``embedding:NAME``
    and ``dense:NAME`` for names that are not configured must not make a single request to it."""
    statuses, hits = rerank_behind_a_counting_hub(
        ["embedding:sentence-transformers/all-mpnet-base-v2", "embedding:nope"], tmp_path, timeout_s=120
    )
    assert hits == []
    assert statuses == [404, 404]


# 4. lone surrogates in any JSON string, on every route


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/retrieve", '{"query": "gzip \\ud800"}', "body.query"),
        ("/v1/retrieve", '{"query": "gzip", "qid": "\\udfff"}', "body.qid"),
        (
            "/v1/generate",
            '{"request": {"query": {"text": "gzip \\ud800"}, "candidates": []}}',
            "body.request.query.text",
        ),
        (
            "/v1/rerank",
            '{"reranker": "embedding", "request": {"query": {"text": "gzip"}, "candidates": '
            '[{"docid": "a", "score": 1, "doc": {"segment": "x\\ud800y"}}]}}',
            "body.request.candidates.0.doc.segment",
        ),
        (
            "/v1/rerank",
            '{"reranker": "embedding", "request": {"query": {"text": "gzip"}, "candidates": '
            '[{"docid": "a", "score": 1, "doc": {"\\ud800": "y"}}]}}',
            "body.request.candidates.0.doc",
        ),
        ("/rag", '{"topic": "gzip \\ud800"}', "body.topic"),
        ("/rag", '{"topic": "gzip", "pipeline": "bm25 | \\udbff"}', "body.pipeline"),
    ],
)
def test_lone_surrogates_are_400_naming_the_field(client, path, body, field):
    r = client.post(path, content=body.encode(), headers={"content-type": "application/json"})
    detail = error(r, 400)
    assert detail.startswith(field) and "lone surrogate" in detail, detail


def test_surrogate_bytes_and_invalid_utf8_are_400(client):
    for raw in (b'{"query": "gzip \xed\xa0\x80"}', b'{"query": "gzip \xff"}'):
        r = client.post("/v1/retrieve", content=raw, headers={"content-type": "application/json"})
        assert "not valid UTF-8" in error(r, 400)


def test_every_route_decodes_bodies_strictly(app):
    routes = [
        r
        for top in app.routes  # included routers are kept whole (FastAPI >= 0.165)
        for r in (top.original_router.routes if hasattr(top, "original_router") else [top])
    ]
    api_routes = [r for r in routes if isinstance(r, APIRoute)]
    assert len(api_routes) >= 10 and all(isinstance(r, StrictJSONRoute) for r in api_routes), [
        r.path for r in api_routes if not isinstance(r, StrictJSONRoute)
    ]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"query": "gzip", "k": NaN}', "NaN is not JSON"),
        ('{"query": "gzip", "k": -Infinity}', "-Infinity is not JSON"),
        ('{"query": "gzip", "k": 1e400}', "out of range"),
        ('{"query": "gzip", "k": ' + "9" * 5000 + "}", "5,000 characters"),
    ],
)
def test_non_finite_and_huge_numbers_are_422(client, body, words):
    r = client.post("/v1/retrieve", content=body.encode(), headers={"content-type": "application/json"})
    assert words in error(r, 422)


# 5. bounded pipelines


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("bm25@" + "9" * 5000 + " | extractive", "at most 2,000 characters"),
        ("bm25@" + "9" * 4400, "at most 2,000 characters"),
        ("bm25@" + "9" * 50 + " | extractive", "a depth is at most 10,000"),
        ("bm25@10001 | extractive", "a depth is at most 10,000"),
        ("bm25@10 | mmr@" + "1" * 30 + " | extractive", "a depth is at most 10,000"),
        ("rrf(" * 1000 + "bm25" + ", bm25)" * 1000 + " | extractive", "at most 2,000 characters"),
        ("rrf(" * 100 + "bm25" + ", bm25)" * 100 + " | extractive", "fusions nest at most 4 deep"),
        ("rrf(" + ", ".join(["bm25"] * 100) + ") | extractive", f"at most {MAX_SOURCES} retrievers"),
        (
            "rrf(bm25, rrf(bm25, rrf(bm25, rrf(bm25, bm25, bm25, bm25, bm25, bm25)))) | extractive",
            f"at most {MAX_SOURCES} retrievers",
        ),
        ("bm25@10" + " | mmr@5" * 9 + " | extractive", "at most 8 rerank stages"),
        ("cc(bm25=" + "1" * 400 + ", bm25+rm3) | extractive", "a weight is a number from 0 to 1,000,000"),
    ],
)
def test_pipelines_are_bounded(client, spec, words):
    detail = error(client.post("/rag", json={"topic": "gzip", "pipeline": spec}), 422)
    assert words in detail


def test_depth_bound_follows_max_k(demo_settings):
    with TestClient(create_app(demo_settings.model_copy(update={"max_k": 50}), arena=False)) as small:
        assert "a depth is at most 50" in error(
            small.post("/rag", json={"topic": "gzip", "pipeline": "bm25@51 | extractive"}), 422
        )
    assert parse("rrf(bm25, rrf(bm25, rrf(bm25, rrf(bm25, bm25))))@10000").depth == 10_000


# 7. bodies nested deeper than MAX_NESTING levels, on every route


def _nested(levels: int) -> dict:
    value: dict = {"x": 1}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


@pytest.mark.parametrize("levels", [40, 300, 5000])
def test_deeply_nested_bodies_are_422(client, levels):
    extra = '{"x": ' * levels + "1" + "}" * levels
    body = (
        '{"reranker": "embedding", "k": 1, "request": {"query": {"text": "gzip"}, "candidates": '
        '[{"docid": "a", "score": 1, "doc": {"segment": "gzip", "extra": ' + extra + "}}]}}"
    )
    r = client.post("/v1/rerank", content=body.encode(), headers={"content-type": "application/json"})
    assert f"nested deeper than {MAX_NESTING} levels" in error(r, 422)


def test_nesting_within_the_bound_is_served(client):
    candidate = {"docid": "a", "score": 1, "doc": {"segment": "gzip compresses files.", "extra": _nested(20)}}
    r = client.post("/v1/generate", json={"request": {"query": {"text": "gzip"}, "candidates": [candidate]}})
    assert r.status_code == 200, r.text


# 8. internal errors never pose as client errors


def test_an_infinite_cc_weight_is_the_clients_422_before_any_stage(client):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": "cc(bm25=1" + "0" * 400 + ", bm25+rm3)@10 | extractive"})
    detail = error(r, 422)
    assert isinstance(detail, str) and "weight" in detail


def test_fused_scores_are_always_finite():
    inf, nan = float("inf"), float("nan")
    runs = [{"a": inf, "b": 1e308, "c": -1e308, "d": nan}, {"a": 1.0, "b": 2.0, "e": -inf}]
    for fused in (cc(runs, [1e6, 1e6]), dbsf(runs, [1e6, 0.0]), cc(runs), rrf(runs)):
        assert set(fused) == {"a", "b", "c", "d", "e"} and all(math.isfinite(v) for v in fused.values()), fused
    assert ranked(cc(runs[:1]))[0][0] == "a" and ranked(cc(runs[:1]))[-1][1] == 0.0  # +inf best; -inf, NaN worst
    for weights in ([inf, 1.0], [nan, 1.0], [-1.0, 1.0], [1e7, 1.0]):
        with pytest.raises(ValueError, match="weights must be finite"):
            cc(runs, weights)


def test_huge_weights_fuse_to_finite_scores(app):
    async def run() -> Request:
        pipeline = parse("cc(bm25=1000000, bm25+rm3=1000000)@20 | mmr@10~dbsf")
        return (await PipelineRunner(app.state.services).run(pipeline, Query(text="compress a file"))).result

    result = anyio.run(run)
    assert len(result.candidates) == 10 and all(math.isfinite(c.score) for c in result.candidates)


def test_a_stage_refusing_the_gateways_own_body_is_a_502_naming_it(app):
    """Candidates with a non-finite score serialise as ``null``: our own /v1/generate refuses that body with a
    validation 422, which is the gateway's fault, so the client gets 502 "internal error", not a 422. (Over
    HTTP, as to a remote AG service: in process the gateway hands the candidates over without JSON.)"""
    services = dataclasses.replace(app.state.services, local_generate=None)
    given = Request(
        query=Query(text="gzip"),
        candidates=[Candidate(docid="a", score=float("inf"), doc=Doc(segment="gzip compresses files."))],
    )

    async def run() -> StageError:
        with pytest.raises(StageError) as info:
            await PipelineRunner(services).run(parse("given@5 | extractive"), Query(text="gzip"), given=given)
        return info.value

    failure = anyio.run(run)
    assert failure.status == 502 and failure.stage == "generate extractive"
    assert failure.detail.startswith("internal error") and "candidates" in failure.detail


def test_meaningful_stage_4xx_still_pass_through(client):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@10 | nosuchgenerator"})
    assert "unknown generator (the name is not echoed)" in error(r, 404)["error"]
    r = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@10 | gpt-4o"})  # no OPENAI_API_KEY
    assert error(r, 422)["stage"] == "generate gpt-4o"


# 9. the body limit holds for chunked bodies


@pytest.fixture(scope="module")
def small_server(demo_settings):
    with serve_app(create_app(demo_settings.model_copy(update={"max_body_bytes": 64 * 1024}), arena=False)) as base:
        yield base


def _chunked_head(base: str, path: str) -> tuple[socket.socket, bytes]:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    return sock, head


def _response(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)  # socket.timeout (10 s) if the server waits for the rest of the body
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_chunked_body_over_the_limit_is_413_before_it_ends(small_server):
    """66 KB of a never-ending chunked body against a 64 KiB limit: the 413 comes while the body is still
    open, so the server did not wait for (or read) the rest."""
    sock, head = _chunked_head(small_server, "/v1/retrieve")
    with sock:
        sock.sendall(head + b'4\r\n{"a"\r\n')
        for _ in range(66):  # just past the limit; then the client waits, the body still open
            sock.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")
        status, body = _response(sock)
    assert status == 413 and "the limit is 65,536" in body["detail"]


def test_a_declared_length_over_the_limit_is_413_before_any_body(small_server):
    """A Content-Length of 1 GB and a few bytes sent: the 413 comes at once, the body never read or buffered
    (an oversized request must not grow the process)."""
    host, port = small_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST /v1/retrieve HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f'Content-Length: {1 << 30}\r\n\r\n{{"query": '.encode()
        )
        status, body = _response(sock)
    assert status == 413 and "request body of 1,073,741,824 bytes; the limit is 65,536" in body["detail"]


def test_chunked_and_declared_bodies_over_the_limit(small_server):
    import httpx

    def chunks():
        yield b'{"query": "gzip", "pad": "'
        for _ in range(50):
            yield b"x" * 4096
        yield b'"}'

    for path in ("/v1/retrieve", "/v1/rerank", "/v1/generate", "/rag"):
        r = httpx.post(small_server + path, content=chunks(), headers={"content-type": "application/json"})
        assert "the limit is 65,536" in error(r, 413), path
    r = httpx.post(small_server + "/v1/retrieve", content=b" " * 70_000, headers={"content-type": "application/json"})
    assert "request body of 70,000 bytes" in error(r, 413)
    small = httpx.post(
        small_server + "/v1/retrieve",
        content=iter([b'{"query": "gzip",', b' "k": 2}']),
        headers={"content-type": "application/json"},
    )  # chunked, under the limit
    assert small.status_code == 200, small.text


# 10. error bodies quote at most ~200 characters of the input


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/rag", {"topic": "gzip", "pipeline": "x" * 1_000_000}),
        ("/rag", {"topic": "gzip", "pipeline": "bm25 $" + "y" * 1_900}),
        ("/rag", {"topic": "gzip", "pipeline": "bm25@10 | " + "z" * 1_900}),
        ("/rag", {"topic": "gzip", "pipeline": {"retrieve": "bm25", "depth": "d" * 100_000, "k" * 100_000: 1}}),
        ("/v1/retrieve", {"query": "gzip", "retriever": "r" * 100_000}),
        ("/v1/retrieve", {"query": "gzip", "index": "i" * 100_000}),
        ("/v1/rerank", {"request": REQUEST, "reranker": "q" * 100_000}),
        ("/v1/rerank", {"request": REQUEST, "reranker": "mmr:" + "9" * 100_000}),
        ("/v1/generate", {"request": REQUEST, "generator": "g" * 100_000}),
        ("/v1/generate", {"request": REQUEST, "template": "t" * 100_000}),
    ],
)
def test_errors_quote_the_input_short(client, path, body):
    r = client.post(path, json=body)
    assert 400 <= r.status_code < 500 and len(r.content) < 2_000, (r.status_code, len(r.content))
    ErrorOut.model_validate(r.json())


def test_spec_errors_name_the_position_not_the_text(client):
    """The API names the problem and where (the spec is never echoed); the CLI shows the caret."""
    detail = error(client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@10 | " + "z" * 1_500 + " $"}), 422)
    assert detail == "unexpected character at position 1512", detail


# 11. the OpenAPI spec says what the API answers


def test_every_error_status_is_documented_with_the_one_error_schema(app):
    spec = app.openapi()
    for path, method in (
        ("/v1/retrieve", "post"),
        ("/v1/rerank", "post"),
        ("/v1/generate", "post"),
        ("/rag", "post"),
        ("/v1/{index}/search", "get"),
    ):
        responses = spec["paths"][path][method]["responses"]
        for status in ("400", "404", "413", "422", "502", "503", "504"):
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (path, status)
    detail = spec["components"]["schemas"]["ErrorOut"]["properties"]["detail"]
    assert {s.get("type") for s in detail["anyOf"]} == {"string", "array", "object"}


def test_string_list_and_object_details_all_match_the_schema(client):
    error(client.post("/v1/retrieve", json={"query": "gzip", "k": 0}), 422)  # a message
    assert isinstance(error(client.post("/v1/retrieve", json={"k": 3}), 422), list)  # validation errors
    assert isinstance(error(client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | nope"}), 404), dict)
    r = client.post("/v1/retrieve", content=b'{"query": ', headers={"content-type": "application/json"})
    assert error(r, 422)[0]["msg"].startswith("JSON decode error: Expecting value")


def test_an_unexpected_error_is_still_a_short_json_500(demo_settings, caplog):
    """The safety net under every handler: a bug answers JSON naming no input, and its traceback is logged."""
    app = create_app(demo_settings, arena=False)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret internals " + "x" * 5000)

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    assert r.status_code == 500 and r.headers["content-type"].startswith("application/json")
    assert r.json() == {"detail": "internal error (RuntimeError); it has been logged"}
    assert any("unexpected error on GET /boom" in rec.getMessage() and rec.exc_info for rec in caplog.records)
