"""Streamed answers over HTTP: ``"stream": true`` on ``POST /v1/generate`` and ``POST /rag``, on a real
uvicorn against a local OpenAI-compatible server that streams from a script (tests/sse_fakes.py) and counts
what it sent: the event sequence, ``done`` byte for byte the non-streamed body (then its ``spend``),
deadlines, failures before and after the first byte, a client that goes away, the gateway streaming across
HTTP, keys and spend."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from httpx_sse import connect_sse
from servers import serve_app
from sse_fakes import Script, streaming_openai_app

CANDIDATES = {
    "query": {"text": "how do I parse command line arguments", "qid": "q1"},
    "candidates": [
        {
            "docid": "argparse#0",
            "score": 2.0,
            "doc": {
                "segment": "The argparse module makes it easy to write user-friendly command-line interfaces. "
                "It parses the arguments defined in sys.argv."
            },
        },
        {
            "docid": "getopt#0",
            "score": 1.0,
            "doc": {
                "segment": "The getopt module is a parser for command line options whose API is designed to "
                "be familiar to users of the C getopt function. argparse generates help and usage "
                "messages."
            },
        },
    ],
}


@pytest.fixture(scope="module")
def fake():
    app = streaming_openai_app()
    with serve_app(app) as base:
        yield app, base


def _generators(base: str) -> list:
    from ragnarok.stages.generate.base import GeneratorConfig

    def llm(name: str, **extra) -> GeneratorConfig:
        return GeneratorConfig(name=name, backend="openai", base_url=base + "/v1", model="fake", max_retries=0, **extra)

    return [
        llm("fake"),
        llm("quick", first_token_s=0.5, stall_s=0.5, timeout_s=20),
        llm("counted", max_concurrency=1, slot_wait_s=2),
    ]


@pytest.fixture(scope="module")
def service(fake, demo_settings):
    from api.main import create_app
    from ragnarok.core.settings import Settings

    _, base = fake
    settings = Settings(data_dir=demo_settings.data_dir, generators=_generators(base))
    with serve_app(create_app(settings, arena=False)) as url:
        yield url


@pytest.fixture
def script(fake):
    app, _ = fake
    app.state.script = Script()
    app.state.sent = 0
    app.state.disconnected.clear()
    return app.state.script


def events(url: str, path: str, body: dict, **kwargs) -> list[tuple[str, object]]:
    """The stream's events, JSON parsed; ``done``'s data as sent, less its ``spend`` (see :func:`unspent`)."""
    out = []
    with httpx.Client(timeout=60) as client, connect_sse(client, "POST", url + path, json=body, **kwargs) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        for sse in source.iter_sse():
            out.append((sse.event, unspent(sse.data) if sse.event == "done" else json.loads(sse.data)))
    return out


def unspent(done: str) -> str:
    """``done``'s data without the ``spend`` object it ends with: the very body of the plain request."""
    spend = r'"spend":\{"backend_calls":\d+,"prompt_tokens":\d+,"completion_tokens":\d+\}'
    found = re.fullmatch(r"(\{.*)," + spend + r"\}", done, re.S)
    assert found, done[-300:]
    return found.group(1) + "}"


def test_generate_streams_and_done_is_the_plain_body(service, script):
    body = {"request": CANDIDATES, "generator": "fake", "notes": True}
    plain = httpx.post(service + "/v1/generate", json=body, timeout=60)
    assert plain.status_code == 200
    got = events(service, "/v1/generate", {**body, "stream": True})
    names = [name for name, _ in got]
    assert names[0] == "references" and names[-1] == "done"
    assert got[0][1] == {"docids": ["argparse#0", "getopt#0"]}
    assert names.count("delta") >= len(script.pieces)  # text as it is written, piece by piece
    assert "".join(d["text"] for n, d in got if n == "delta") == script.text
    assert got[-1][1] == plain.text  # byte for byte
    answer = json.loads(plain.text)
    sentences = [(d["text"], d["citations"]) for n, d in got if n == "sentence"]
    assert sentences == [(s["text"], s["citations"]) for s in answer["answer"]]
    assert [d["index"] for n, d in got if n == "sentence"] == list(range(len(answer["answer"])))
    first = next(d for n, d in got if n == "sentence")
    assert first["docids"] == [answer["references"][i] for i in first["citations"]] == ["argparse#0"]
    # each sentence is sent once complete: before the deltas of the sentences after it
    second_sentence = names.index("sentence", names.index("sentence") + 1)
    assert names.index("sentence") < second_sentence < len(names) - 1


def test_rag_streams_stages_then_the_answer(service, script):
    body = {"topic": "how do I parse command line arguments in python", "pipeline": "bm25@20 | fake", "segments": True}
    plain = httpx.post(service + "/rag", json=body, timeout=120)
    assert plain.status_code == 200
    got = events(service, "/rag", {**body, "stream": True})
    names = [n for n, _ in got]
    assert names[0] == "stage" and got[0][1]["stage"] == "bm25" and got[0][1]["k_in"] == 0
    assert got[0][1]["k_out"] == 20 and got[0][1]["latency_ms"] > 0
    assert names.index("references") < names.index("delta") < names.index("sentence")
    assert names[-2:] == ["stage", "done"] and got[-2][1]["stage"] == "fake" and got[-2][1]["k_in"] == 20
    assert got[-1][1] == plain.text


def test_extractive_streams_its_sentences_at_once(service):
    body = {"topic": "how do I parse command line arguments in python", "pipeline": "bm25@20 | extractive"}
    plain = httpx.post(service + "/rag", json=body, timeout=120)
    got = events(service, "/rag", {**body, "stream": True})
    assert got[-1][1] == plain.text
    assert len([n for n, _ in got if n == "sentence"]) == len(json.loads(plain.text)["answer"])


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/generate", {"request": CANDIDATES, "generator": "fake"}),
        ("/rag", {"topic": "argparse", "pipeline": "bm25@20 | fake"}),
    ],
)
@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_stream_must_be_a_boolean(service, path, body, value):
    response = httpx.post(service + path, json={**body, "stream": value}, timeout=30)
    assert response.status_code == 422 and "stream" in response.text


def test_a_failure_before_the_first_token_is_a_json_error(service, script):
    script.first_wait_s = 3  # over `quick`'s first_token_s (0.5 s)
    response = httpx.post(
        service + "/v1/generate", json={"request": CANDIDATES, "generator": "quick", "stream": True}, timeout=30
    )
    assert response.status_code == 504 and response.headers["content-type"] == "application/json"
    detail = response.json()["detail"]
    assert detail["generator"] == "quick" and detail["deadline"] == "first_token"
    assert detail["error"] == "no first token within 0.5 s (first_token_s)"
    unknown = httpx.post(
        service + "/rag", json={"topic": "argparse", "pipeline": "bm25@20 | nosuch", "stream": True}, timeout=30
    )
    assert unknown.status_code == 404 and unknown.headers["content-type"] == "application/json"


def test_a_stall_after_the_start_is_an_error_event_naming_the_stage(service, script):
    script.stall_after = 3  # three pieces, then 5 s of silence: over `quick`'s stall_s (0.5 s)
    got = events(
        service,
        "/rag",
        {"topic": "how do I parse command line arguments", "pipeline": "bm25@5 | quick", "stream": True},
    )
    names = [n for n, _ in got]
    assert names[0] == "stage" and "delta" in names and names[-1] == "error"
    error = got[-1][1]
    assert error["stage"] == "quick" and error["status"] == 504 and error["deadline"] == "stall"
    assert error["detail"] == "generator 'quick' failed: no token for 0.5 s (stall_s)"


def test_a_backend_that_breaks_mid_stream_ends_it_with_an_error_event(service, script):
    script.break_after = 2
    got = events(service, "/v1/generate", {"request": CANDIDATES, "generator": "fake", "stream": True})
    assert [n for n, _ in got][-1] == "error" and "delta" in [n for n, _ in got]
    assert got[-1][1]["stage"] == "generate fake" and got[-1][1]["status"] == 502
    assert got[-1][1]["detail"].startswith("generator 'fake' failed: the connection to")


def test_garbage_mid_stream_is_an_error_event(service, script):
    script.garbage_after = 1
    got = events(service, "/v1/generate", {"request": CANDIDATES, "generator": "fake", "stream": True})
    assert got[-1][0] == "error" and "not JSON" in json.dumps(got[-1][1])


def test_a_client_that_goes_away_stops_the_backend_and_frees_its_slot(fake, service, script):
    app, _ = fake
    script.pieces = [f" word{i}." for i in range(200)]
    script.each_wait_s = 0.05  # 10 s in all
    body = {"request": CANDIDATES, "generator": "counted", "stream": True}
    with httpx.Client(timeout=30) as client, connect_sse(client, "POST", service + "/v1/generate", json=body) as source:
        seen = 0
        for sse in source.iter_sse():
            seen += sse.event == "delta"
            if seen >= 5:
                break
        left_at = time.monotonic()
    # the client is gone: within a second the fake backend is hung up on, and sends nothing more
    assert app.state.disconnected.wait(max(0.0, left_at + 1.0 - time.monotonic()))
    stopped_at = app.state.sent
    time.sleep(0.5)
    assert app.state.sent == stopped_at < 60, f"the backend sent {app.state.sent} of 200 pieces"
    # the generator's only slot is free again: the next request is answered at once, not 504 busy
    script.pieces, script.each_wait_s = ["Done [1]."], 0.0
    again = httpx.post(service + "/v1/generate", json={**body, "stream": False}, timeout=30)
    assert again.status_code == 200


def test_the_gateway_streams_across_http(fake, demo_settings, script):
    """The gateway with RAGNAROK_GENERATION_URL on another server: the AG service's events pass through as
    they come, not once the answer is complete."""
    from api.main import create_app
    from ragnarok.core.settings import Settings

    _, base = fake
    ag = create_app(Settings(data_dir=demo_settings.data_dir, generators=_generators(base)), arena=False)
    script.each_wait_s = 0.4
    with serve_app(ag) as ag_url:
        gateway = create_app(
            Settings(data_dir=demo_settings.data_dir, generators=_generators(base), generation_url=ag_url), arena=False
        )
        with serve_app(gateway) as url:
            body = {"topic": "how do I parse command line arguments", "pipeline": "bm25@20 | fake"}
            script.each_wait_s = 0.0
            plain = httpx.post(url + "/rag", json=body, timeout=60).text
            script.each_wait_s = 0.4
            arrivals = []
            start = time.monotonic()
            with (
                httpx.Client(timeout=60) as client,
                connect_sse(client, "POST", url + "/rag", json={**body, "stream": True}) as source,
            ):
                for sse in source.iter_sse():
                    arrivals.append((sse.event, time.monotonic() - start, sse.data))
    deltas = [t for name, t, _ in arrivals if name == "delta"]
    assert len(deltas) >= len(script.pieces)
    assert deltas[-1] - deltas[0] > 1.5  # 0.4 s between pieces: they arrived one by one
    assert arrivals[-1][0] == "done" and unspent(arrivals[-1][2]) == plain


def test_a_streamed_answer_is_paid_for_with_a_key(fake, demo_settings, tmp_path, script):
    """With keys: the stream is reserved like the answer it replaces and its spend is recorded when it ends."""
    from api.main import create_app
    from ragnarok.auth.store import AuthStore
    from ragnarok.core.settings import Settings

    _, base = fake
    settings = Settings(
        data_dir=demo_settings.data_dir,
        generators=_generators(base),
        auth="keys",
        database_url=f"sqlite:///{tmp_path / 'keys.db'}",
    )
    store = AuthStore.for_settings(settings)
    _, secret = store.create("streamer", ["generate"], budget_calls=1)
    headers = {"Authorization": f"Bearer {secret}"}
    body = {"request": CANDIDATES, "generator": "fake", "stream": True}
    with serve_app(create_app(settings, arena=False)) as url:
        assert httpx.post(url + "/v1/generate", json=body, timeout=30).status_code == 401
        got = events(url, "/v1/generate", body, headers=headers)
        assert got[-1][0] == "done"
        again = httpx.post(url + "/v1/generate", json=body, headers=headers, timeout=30)
        assert again.status_code == 429 and again.headers["content-type"] == "application/json"
    owner = f"key:{store.find('streamer').id}"
    assert [(u["calls"], u["tokens"]) for u in store.usage(owner)] == [(1, 10 + len(script.pieces))]


def test_a_server_that_does_not_stream_is_answered_whole(demo_settings):
    """An OpenAI-compatible server that ignores ``stream`` and answers one chat completion: the stream is that
    answer, its sentences at once, and ``done`` the plain body."""
    from fastapi import FastAPI

    from api.main import create_app
    from ragnarok.core.settings import Settings
    from ragnarok.stages.generate.base import GeneratorConfig

    plain_server = FastAPI()

    @plain_server.get("/healthz")
    def health() -> dict:
        return {}

    @plain_server.post("/v1/chat/completions")
    def chat() -> dict:
        return {"choices": [{"message": {"content": "Use argparse [1]. Or getopt [2]."}, "finish_reason": "stop"}]}

    with serve_app(plain_server) as base:
        settings = Settings(
            data_dir=demo_settings.data_dir,
            generators=[
                GeneratorConfig(name="plain", backend="openai", base_url=base + "/v1", model="m", max_retries=0)
            ],
        )
        with serve_app(create_app(settings, arena=False)) as url:
            body = {"request": CANDIDATES, "generator": "plain"}
            plain = httpx.post(url + "/v1/generate", json=body, timeout=30).text
            got = events(url, "/v1/generate", {**body, "stream": True})
    assert [n for n, _ in got] == ["references", "delta", "sentence", "sentence", "done"]
    assert got[-1][1] == plain
