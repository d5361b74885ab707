"""Operations: GET /metrics moves with traffic, X-Request-ID reaches every stage call and log line,
JSON log lines parse; /metrics needs the admin scope with keys; multiprocess mode adds up every process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fakes import flaky_openai_app
from fastapi import FastAPI, Request
from prometheus_client.parser import text_string_to_metric_families
from servers import serve_app

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = [
    "ragnarok_http_requests",
    "ragnarok_http_request_duration_seconds",
    "ragnarok_stage_duration_seconds",
    "ragnarok_stage_failures",
    "ragnarok_backend_calls",
    "ragnarok_backend_failures",
    "ragnarok_backend_tokens",
    "ragnarok_slot_wait_seconds",
    "ragnarok_dense_build_segments",
    "ragnarok_arena_battles",
    "ragnarok_arena_votes",
    "ragnarok_cache_lookups",
]


def scrape(base: str, **kwargs) -> dict[tuple[str, tuple], float]:
    """Every sample of GET /metrics: (name, sorted labels) -> value."""
    r = httpx.get(base + "/metrics", timeout=30, **kwargs)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def backend():
    with serve_app(flaky_openai_app()) as base:
        yield base + "/v1"


@pytest.fixture(scope="module")
def service(demo_settings, backend):
    """The whole API on a real uvicorn, the demo index, an OpenAI-compatible fake generator and a failing one."""
    from api.main import create_app
    from ragnarok.stages.generate.base import GeneratorConfig

    settings = demo_settings.model_copy(
        update={
            "generators": [
                GeneratorConfig(name="fake", backend="openai", base_url=backend, model="ok", max_retries=0),
                GeneratorConfig(name="broken", backend="openai", base_url=backend, model="down-500", max_retries=0),
            ]
        }
    )
    with serve_app(create_app(settings, arena=False)) as base:
        yield base


def test_metric_families_move_with_a_rag_request(service):
    before = scrape(service)
    r = httpx.post(
        service + "/rag", json={"topic": "compress a file with gzip", "pipeline": "bm25@10 | fake"}, timeout=120
    )
    assert r.status_code == 200, r.text
    text = httpx.get(service + "/metrics", timeout=30).text
    for family in FAMILIES:
        assert f"# TYPE {family}" in text, family
    after = scrape(service)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("ragnarok_http_requests_total", method="POST", route="/rag", status="200") == 1
    # the gateway's stage calls (in process) are not HTTP requests: they are stages
    assert moved("ragnarok_http_requests_total", method="POST", route="/v1/retrieve", status="200") == 0
    assert moved("ragnarok_http_requests_total", method="POST", route="/v1/generate", status="200") == 0
    assert moved("ragnarok_http_request_duration_seconds_count", method="POST", route="/v1/retrieve") == 0
    assert moved("ragnarok_http_request_duration_seconds_count", method="POST", route="/rag") == 1
    assert moved("ragnarok_stage_duration_seconds_count", stage="retrieve") == 1
    assert moved("ragnarok_stage_duration_seconds_count", stage="generate") == 1
    assert moved("ragnarok_stage_duration_seconds_sum", stage="generate") > 0
    assert moved("ragnarok_backend_calls_total", generator="fake") == 1
    assert moved("ragnarok_backend_tokens_total", generator="fake", kind="prompt") == 10  # the fake's usage
    assert moved("ragnarok_backend_tokens_total", generator="fake", kind="completion") == 12
    assert moved("ragnarok_slot_wait_seconds_count", generator="fake") == 1
    looked_up = moved("ragnarok_cache_lookups_total", cache="segment_json", result="hit") + moved(
        "ragnarok_cache_lookups_total", cache="segment_json", result="miss"
    )
    assert looked_up == 10  # one lookup per hit of bm25@10


def test_http_requests_count_what_was_sent_and_stages_count_every_stage_call(service):
    """N real requests to /v1/retrieve and N /rag (plain and streamed): N each in ragnarok_http_requests_total
    (the /rag's stage calls, made in process, are not requests), and every /rag's retrieve and generate stage
    in ragnarok_stage_duration_seconds, the streamed /rag's generate too."""
    before = scrape(service)
    n = 3
    with httpx.Client(base_url=service, timeout=120) as client:
        for _ in range(n):
            r = client.post("/v1/retrieve", json={"query": "gzip", "retriever": "bm25", "k": 5})
            assert r.status_code == 200, r.text
        for i in range(n):
            body = {"topic": "compress a file with gzip", "pipeline": "bm25@5 | fake", "stream": i > 0}
            r = client.post("/rag", json=body)
            assert r.status_code == 200, r.text
            assert i == 0 or "event: done" in r.text
    after = scrape(service)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("ragnarok_http_requests_total", method="POST", route="/v1/retrieve", status="200") == n
    assert moved("ragnarok_http_requests_total", method="POST", route="/rag", status="200") == n
    assert moved("ragnarok_http_requests_total", method="POST", route="/v1/generate", status="200") == 0
    assert moved("ragnarok_stage_duration_seconds_count", stage="retrieve") == n
    assert moved("ragnarok_stage_duration_seconds_count", stage="generate") == n  # 2 of them streamed


def test_failures_are_counted_by_cause_and_stage(service):
    before = scrape(service)
    r = httpx.post(
        service + "/rag", json={"topic": "compress a file with gzip", "pipeline": "bm25@5 | broken"}, timeout=120
    )
    assert r.status_code == 502, r.text
    after = scrape(service)
    assert (
        value(after, "ragnarok_backend_failures_total", generator="broken", cause="server_error")
        - value(before, "ragnarok_backend_failures_total", generator="broken", cause="server_error")
        == 1
    )
    assert (
        value(after, "ragnarok_stage_failures_total", stage="generate", status="502")
        - value(before, "ragnarok_stage_failures_total", stage="generate", status="502")
        == 1
    )
    assert (
        value(after, "ragnarok_http_requests_total", method="POST", route="/rag", status="502")
        - value(before, "ragnarok_http_requests_total", method="POST", route="/rag", status="502")
        == 1
    )
    r = httpx.post(
        service + "/rag",
        json={"topic": "compress a file with gzip", "pipeline": "bm25@5 | broken", "stream": True},
        timeout=120,
    )
    # a streamed /rag's failed generate stage (answered 502 before its first event) is counted too
    assert r.status_code == 502 or "event: error" in r.text, r.text
    streamed = scrape(service)
    assert (
        value(streamed, "ragnarok_stage_failures_total", stage="generate", status="502")
        - value(after, "ragnarok_stage_failures_total", stage="generate", status="502")
        == 1
    )


@pytest.fixture
def json_log():
    from ragnarok.runtime import logs

    stream = io.StringIO()
    handler = logs.configure("json", "info", stream)
    try:
        yield stream
    finally:
        logs.unconfigure(handler)


def test_the_request_id_reaches_every_stage_call_and_json_log_line(service, json_log):
    rid = "team-a:run-7/topic-3"
    r = httpx.post(
        service + "/rag",
        json={"topic": "compress a file with gzip", "pipeline": "bm25@10 | fake", "trace": True},
        headers={"X-Request-ID": rid},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == rid and r.json()["request_id"] == rid
    deadline = time.monotonic() + 10  # the access line of /rag is written once its answer has gone out
    while '"route": "/rag", "stage": null' not in json_log.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]  # every line is one JSON object
    assert lines and all(
        {"time", "level", "logger", "message", "request_id", "route", "stage", "latency_ms", "status"} <= set(line)
        for line in lines
    )
    access = {
        (line["route"], line["stage"]): line
        for line in lines
        if line["logger"] == "ragnarok.access" and line["request_id"] == rid
    }
    assert set(access) >= {("/rag", None), ("/v1/retrieve", "retrieve bm25"), ("/v1/generate", "generate fake")}
    assert all(line["status"] == 200 and line["latency_ms"] > 0 and line["level"] == "INFO" for line in access.values())


def test_request_ids_made_when_missing_or_unsafe(service):
    made = httpx.get(service + "/healthz").headers["x-request-id"]
    assert len(made) == 32 and int(made, 16) >= 0
    unsafe = httpx.get(service + "/healthz", headers={"X-Request-ID": 'x" injected=1 ' + "a" * 10})
    assert unsafe.headers["x-request-id"] != made and " " not in unsafe.headers["x-request-id"]
    assert len({httpx.get(service + "/healthz").headers["x-request-id"] for _ in range(3)}) == 3


def test_invalid_request_ids_do_not_flood_the_log(service, json_log):
    """Invalid X-Request-IDs: one WARNING in the process at most, never the header's value; DEBUG after."""
    for i in range(5):
        r = httpx.get(service + "/healthz", headers={"X-Request-ID": f"bad id {i}"})
        assert r.status_code == 200 and len(r.headers["x-request-id"]) == 32
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    warnings = [line for line in lines if line["level"] == "WARNING"]
    assert len(warnings) <= 1 and not any("bad id" in line["message"] for line in lines), warnings
    assert not any(line["logger"] == "asgi_correlation_id" for line in lines)


def test_a_remote_stage_service_gets_the_request_id_and_the_stage(demo_settings, backend):
    """RAGNAROK_RETRIEVAL_URL: the gateway's stage call to another service carries X-Request-ID and
    Ragnarok-Stage; a text log line names both."""
    from api.main import create_app
    from ragnarok.runtime import logs
    from ragnarok.stages.generate.base import GeneratorConfig

    seen: list[dict[str, str]] = []
    remote = FastAPI()

    @remote.get("/healthz")
    def health() -> dict:
        return {"status": "ok"}

    @remote.post("/v1/retrieve")
    async def retrieve(request: Request) -> dict:
        seen.append(dict(request.headers))
        return {
            "query": {"text": "gzip", "qid": ""},
            "candidates": [
                {"docid": "stdlib.gzip#0_0", "score": 1.0, "doc": {"segment": "The gzip module compresses files."}}
            ],
        }

    with serve_app(remote) as r_url:
        settings = demo_settings.model_copy(
            update={
                "retrieval_url": r_url,
                "generators": [
                    GeneratorConfig(name="fake", backend="openai", base_url=backend, model="ok", max_retries=0)
                ],
            }
        )
        with serve_app(create_app(settings, arena=False)) as gateway:
            handler = logs.configure("text", "info", text := io.StringIO())
            try:
                r = httpx.post(
                    gateway + "/rag",
                    json={"topic": "gzip", "pipeline": "bm25@10 | fake"},
                    headers={"X-Request-ID": "rid-remote-1"},
                    timeout=120,
                )
            finally:
                logs.unconfigure(handler)
    assert r.status_code == 200, r.text
    assert seen and seen[0]["x-request-id"] == "rid-remote-1" and seen[0]["ragnarok-stage"] == "retrieve bm25"
    assert any("[rid-remote-1 generate fake] POST /v1/generate 200" in line for line in text.getvalue().splitlines())


def test_metrics_need_the_admin_scope_with_keys(demo_settings, tmp_path):
    from api.main import create_app
    from ragnarok.auth.store import AuthStore

    settings = demo_settings.model_copy(update={"auth": "keys", "database_url": f"sqlite:///{tmp_path / 'k.db'}"})
    store = AuthStore.for_settings(settings)
    _, user = store.create("user", ["retrieve", "generate"])
    _, admin = store.create("ops", ["admin"])
    with serve_app(create_app(settings, arena=False)) as base:
        assert httpx.get(base + "/metrics").status_code == 401
        assert httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {user}"}).status_code == 403
        assert httpx.get(base + "/v1/demo/search", params={"query": "gzip"}).status_code == 401
        assert httpx.get(base + "/no/such/page", headers={"Authorization": f"Bearer {user}"}).status_code == 404
        samples = scrape(base, headers={"Authorization": f"Bearer {admin}"})
    # answered before routing (401) or by no route (404): still counted by template, never by raw path
    assert value(samples, "ragnarok_http_requests_total", method="GET", route="/metrics", status="401") >= 1
    assert value(samples, "ragnarok_http_requests_total", method="GET", route="/v1/{index}/search", status="401") >= 1
    assert value(samples, "ragnarok_http_requests_total", method="GET", route="unmatched", status="404") >= 1
    assert not any("/no/such/page" in str(labels) or "/v1/demo/search" in str(labels) for _, labels in samples)


MULTIPROCESS = """
import sys
from fastapi.testclient import TestClient
from api.main import create_app
from ragnarok.core.settings import Settings
client = TestClient(create_app(Settings(data_dir=sys.argv[1]), arena=False))
assert client.get("/healthz").status_code == 200
print(client.get("/metrics").text)
"""


def test_multiprocess_mode_adds_up_every_process(tmp_path):
    """PROMETHEUS_MULTIPROC_DIR (several workers): /metrics in one process counts the others' requests too."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}
    (tmp_path / "prom").mkdir()
    other = "from ragnarok.runtime import metrics; metrics.REQUESTS.labels('GET', '/healthz', '200').inc(3)"
    subprocess.run([sys.executable, "-c", other], env=env, cwd=ROOT, check=True, timeout=120)
    out = subprocess.run(
        [sys.executable, "-c", MULTIPROCESS, str(tmp_path / "data")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(out.stdout)
        for s in family.samples
    }
    assert value(samples, "ragnarok_http_requests_total", method="GET", route="/healthz", status="200") == 4


def test_dense_builds_and_the_arena_move_their_families(tmp_path):
    """The dense build's progress and an arena battle and vote (a real SQLite vote log), without the API."""
    import asyncio

    from ragnarok.arena.pool import identify
    from ragnarok.core.settings import Settings
    from ragnarok.runtime import metrics
    from ragnarok.stages.retrieve.building import DenseBuild
    from webui.arena import Arena
    from webui.client import PaneResult

    DenseBuild(tmp_path / "team-index", "minilm")._progress(64, 640)
    assert metrics.DENSE_BUILD.labels("team-index", "minilm", "done")._value.get() == 64
    assert metrics.DENSE_BUILD.labels("team-index", "minilm", "total")._value.get() == 640

    battles = metrics.ARENA_BATTLES.labels("blinded", "votable")._value.get()
    votes = metrics.ARENA_VOTES.labels("a")._value.get()
    arena = Arena(Settings(data_dir=tmp_path / "data"), client=None)  # type: ignore[arg-type]
    answer = {
        "topic_id": "t1",
        "topic": "gzip",
        "references": ["d1"],
        "response_length": 3,
        "answer": [{"text": "Use gzip.", "citations": [0]}],
    }
    a, b = identify("bm25@20 | extractive"), identify("bm25+rm3@20 | extractive")
    view = asyncio.run(
        arena._finish("blinded", a, b, "gzip", "t1", "s1", PaneResult(answer), PaneResult(answer), (1.0, 2.0))
    )
    assert view.votable
    assert arena.vote(view.battle_id, "a", "s1", "127.0.0.1").voted
    assert metrics.ARENA_BATTLES.labels("blinded", "votable")._value.get() == battles + 1
    assert metrics.ARENA_VOTES.labels("a")._value.get() == votes + 1


def test_backend_failure_causes_are_a_fixed_vocabulary():
    from ragnarok.runtime.metrics import failure_cause

    assert failure_cause("no answer within 5 s", timeout=True, retryable=True) == "timeout"
    assert failure_cause("busy: no slot within 1 s (4 calls in flight)") == "busy"
    assert failure_cause("HTTP 429: slow down", retryable=True) == "rate_limited"
    assert failure_cause("HTTP 503: overloaded", retryable=True) == "server_error"
    assert failure_cause("HTTP 401: bad key") == "client_error"
    assert failure_cause("HTTP 200 but not a chat completion (choices: missing)") == "bad_answer"
    assert failure_cause("cannot connect to http://127.0.0.1:9/v1: refused", retryable=True) == "connection"
    assert failure_cause("the model's answer is empty") == "bad_answer"


@pytest.mark.slow
def test_serve_with_two_workers_adds_up_their_metrics(demo_settings, tmp_path):
    """``ragnarok serve --workers 2``: both workers answer on one port, and /metrics (whichever worker answers
    it) counts every request, both workers' (prometheus-client's multiprocess mode)."""
    from concurrent.futures import ThreadPoolExecutor

    from servers import ragnarok_serve

    prom = tmp_path / "prom"
    prom.mkdir()
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir), "PROMETHEUS_MULTIPROC_DIR": str(prom)}
    with ragnarok_serve(env, output=tmp_path / "serve.log", workers=2) as base:

        def burst(_: int) -> int:
            with httpx.Client(base_url=base, timeout=60) as client:  # one connection per client
                return sum(client.get("/healthz").status_code == 200 for _ in range(10))

        pids: set[str] = set()
        sent = 0
        for _ in range(10):  # until both workers have answered some (the kernel picks the worker per connection)
            with ThreadPoolExecutor(8) as pool:
                sent += sum(pool.map(burst, range(8)))
            pids = {p.stem.rsplit("_", 1)[1] for p in prom.glob("counter_*.db")}
            if len(pids) >= 2:
                break
        assert len(pids) == 2, f"one worker answered every request ({pids})"
        counts = [
            value(scrape(base), "ragnarok_http_requests_total", method="GET", route="/healthz", status="200")
            for _ in range(6)
        ]
    assert min(counts) >= sent  # every scrape, whichever worker answered it, counts both workers' requests
