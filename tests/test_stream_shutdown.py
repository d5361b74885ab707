"""SIGTERM on a real ``ragnarok serve`` (issue 35): a stream in flight ends with an ``error`` event (503, "the
server is shutting down"), a plain request in flight gets its answer when it comes within the grace and the JSON
503 when it does not, the process exits within the grace (and a small margin), and no traceback is logged. The
backends are local: the scripted streaming one (tests/sse_fakes.py), slow, and one that never answers."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import pytest
from httpx_sse import connect_sse
from servers import ragnarok_serve, serve_app
from sse_fakes import Script, streaming_openai_app
from test_api_stream import CANDIDATES
from test_network_defects import hung_backend

GRACE_S = 3.0


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_ends_streams_answers_requests_and_exits_within_the_grace(demo_settings, tmp_path, slowdown,
                                                                          workers):
    slow = streaming_openai_app(Script(pieces=[f" Word {i} [1]." for i in range(600)], each_wait_s=0.1))  # 60 s
    quick = streaming_openai_app(Script(whole_wait_s=1.0))  # answers 1 s after it is asked: within the grace
    with serve_app(slow) as slow_url, serve_app(quick) as quick_url, hung_backend() as (hung_url, accepted, _):
        urls = {"slow": slow_url + "/v1", "quick": quick_url + "/v1", "hung": hung_url}
        generators = [{"name": name, "backend": "openai", "base_url": url, "model": "fake", "max_retries": 0,
                       "timeout_s": 120} for name, url in urls.items()]
        env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir), "HF_HUB_OFFLINE": "1",
               "RAGNAROK_SHUTDOWN_GRACE_S": str(GRACE_S), "RAGNAROK_GENERATORS": json.dumps(generators)}
        log = tmp_path / "serve.log"
        started: list = []
        got: dict[str, object] = {}
        streamed: list[tuple[str, dict]] = []
        with ragnarok_serve(env, output=log, started=started, workers=workers) as base:
            def stream() -> None:
                try:
                    with httpx.Client(timeout=60) as client, connect_sse(
                            client, "POST", base + "/v1/generate",
                            json={"request": CANDIDATES, "generator": "slow", "stream": True}) as source:
                        got["stream"] = source.response
                        for sse in source.iter_sse():
                            streamed.append((sse.event, json.loads(sse.data)))
                except httpx.HTTPError as exc:
                    got["stream error"] = exc

            def plain(generator: str) -> None:
                try:
                    got[generator] = httpx.post(base + "/v1/generate", timeout=60,
                                                json={"request": CANDIDATES, "generator": generator})
                except httpx.HTTPError as exc:
                    got[generator] = exc

            calls = [threading.Thread(target=stream), threading.Thread(target=plain, args=("quick",)),
                     threading.Thread(target=plain, args=("hung",))]
            for call in calls:
                call.start()
            deadline = time.monotonic() + 60 * slowdown
            while not (any(n == "sentence" for n, _ in streamed) and quick.state.script.calls and accepted):
                assert time.monotonic() < deadline, ("the calls did not reach their backends", got, streamed)
                time.sleep(0.05)
            signalled = time.monotonic()
            started[0].send_signal(signal.SIGTERM)
            started[0].wait(60)
            exit_s = time.monotonic() - signalled
            for call in calls:
                call.join(30)
    output = log.read_text(errors="replace")
    assert started[0].returncode in (0, -signal.SIGTERM), output[-3000:]  # uvicorn raises the signal it caught
    # the stream: cut at once with an error event, after the text it had
    assert got["stream"].status_code == 200 and "delta" in [n for n, _ in streamed], (got, output[-3000:])
    assert streamed[-1] == ("error", {"stage": "generate slow", "status": 503,
                                      "detail": "the server is shutting down"}), (streamed[-3:], output[-3000:])
    # the plain requests: the answer that came within the grace, the JSON 503 for the one that could not
    assert isinstance(got["quick"], httpx.Response) and got["quick"].status_code == 200, (got, output[-3000:])
    assert got["quick"].json()["answer"], got["quick"].text
    hung = got["hung"]
    assert isinstance(hung, httpx.Response), (hung, output[-3000:])
    assert hung.status_code == 503 and hung.json() == {"detail": "the server is shutting down"}, hung.text
    assert exit_s < GRACE_S + 1.5 * slowdown, (exit_s, output[-3000:])
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output[-5000:]
