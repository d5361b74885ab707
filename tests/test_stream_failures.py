"""Failures of a streamed answer after it started, on a real uvicorn against the scripted streaming
backend (tests/sse_fakes.py): an OpenAI-style error object mid-stream (with or without ``[DONE]`` after it) and
as a whole 200 body is a 502 carrying the backend's message, scrubbed of keys; every failure after the start
(stall, a stream that just ends, an error object) is counted in ``ragnarok_backend_failures_total`` with its
cause and logged once; the ``error`` event's ``detail`` is one string, the same in one process and through
separate R and AG services."""

from __future__ import annotations

import json

import httpx
import pytest
from servers import serve_app
from test_api_stream import CANDIDATES, _generators, events, fake, script  # noqa: F401 - fixtures
from test_metrics import scrape, value

SECRET = "sk-backend-echoed-secret-0123456789"
STALL_S = 2  # `stalls`: no token for this long after the first one is an error; the first one has a minute


def _with_stalls(base: str) -> list:
    from ragnarok.stages.generate.base import GeneratorConfig

    return [
        *_generators(base),
        GeneratorConfig(
            name="stalls",
            backend="openai",
            base_url=base + "/v1",
            model="fake",
            max_retries=0,
            stall_s=STALL_S,
            timeout_s=60,
        ),
    ]


@pytest.fixture(scope="module")
def service(fake, demo_settings):
    from api.main import create_app
    from ragnarok.core.settings import Settings

    with serve_app(
        create_app(Settings(data_dir=demo_settings.data_dir, generators=_with_stalls(fake[1])), arena=False)
    ) as url:
        yield url


STREAM = {"request": CANDIDATES, "generator": "fake", "stream": True}


def failures(url: str, generator: str, cause: str) -> float:
    return value(scrape(url), "ragnarok_backend_failures_total", generator=generator, cause=cause)


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "failed" in r.getMessage() and r.levelname == "WARNING"]


@pytest.mark.parametrize("done", [True, False], ids=["then-DONE", "then-nothing"])
def test_an_error_object_mid_stream_is_an_error_event_with_the_backends_message(service, script, caplog, done):
    from ragnarok.runtime.redact import register_value

    register_value(SECRET)
    script.error_after, script.done_after_error = 2, done
    script.error_message = f"Internal error with key {SECRET}: the model is overloaded"
    before = failures(service, "fake", "server_error")
    caplog.set_level("WARNING")
    got = events(service, "/v1/generate", STREAM)
    names = [n for n, _ in got]
    assert "delta" in names and "done" not in names and names[-1] == "error", names
    error = got[-1][1]
    assert error["stage"] == "generate fake" and error["status"] == 502
    assert error["detail"].startswith("generator 'fake' failed: the backend sent an error mid-stream: ")
    assert "the model is overloaded" in error["detail"] and SECRET not in json.dumps(got)
    assert failures(service, "fake", "server_error") - before == 1
    lines = failure_lines(caplog)
    assert len(lines) == 1 and "overloaded" in lines[0] and SECRET not in lines[0], lines


def test_an_error_object_as_the_whole_answer_is_a_502_with_the_backends_message(service, script, caplog):
    from ragnarok.runtime.redact import register_value

    register_value(SECRET)
    script.error_after, script.error_message = 0, f"Internal error with key {SECRET}: the model is overloaded"
    before = failures(service, "fake", "server_error")
    caplog.set_level("WARNING")
    r = httpx.post(service + "/v1/generate", json={**STREAM, "stream": False}, timeout=30)
    assert r.status_code == 502 and r.headers["content-type"] == "application/json", r.text
    assert "the body is an error: " in r.json()["detail"]["error"] and "the model is overloaded" in r.text
    assert SECRET not in r.text
    assert failures(service, "fake", "server_error") - before == 1
    assert len(failure_lines(caplog)) == 1 and SECRET not in failure_lines(caplog)[0]


@pytest.mark.parametrize(
    "generator, fault, cause",
    [
        ("stalls", "stall_after", "timeout"),
        ("fake", "end_after", "connection"),
        ("fake", "error_after", "server_error"),
    ],
)
def test_failures_after_the_start_are_counted_and_logged(service, script, caplog, generator, fault, cause):
    setattr(script, fault, 3)
    script.stall_s = 5 * STALL_S
    before = failures(service, generator, cause)
    caplog.set_level("WARNING")
    got = events(service, "/v1/generate", {**STREAM, "generator": generator})
    assert "delta" in [n for n, _ in got] and got[-1][0] == "error", got
    assert failures(service, generator, cause) - before == 1
    lines = failure_lines(caplog)
    assert len(lines) == 1 and repr(generator) in lines[0] and cause in lines[0], lines


def test_the_error_events_detail_is_one_string_in_one_process_and_across_services(fake, demo_settings, service, script):
    """The same stall: ``/rag`` on one app, then on a gateway whose AG service is that app."""
    from api.main import create_app
    from ragnarok.core.settings import Settings

    body = {"topic": "how do I parse command line arguments", "pipeline": "bm25@5 | stalls", "stream": True}
    script.stall_after, script.stall_s = 3, 5 * STALL_S
    one = events(service, "/rag", body)[-1]
    gateway = create_app(
        Settings(data_dir=demo_settings.data_dir, generators=_with_stalls(fake[1]), generation_url=service), arena=False
    )
    with serve_app(gateway) as url:
        across = events(url, "/rag", body)[-1]
    assert one[0] == across[0] == "error"
    expected = {
        "stage": "stalls",
        "status": 504,
        "deadline": "stall",
        "detail": f"generator 'stalls' failed: no token for {STALL_S} s (stall_s)",
    }
    assert one[1] == across[1] == expected, (one, across)
