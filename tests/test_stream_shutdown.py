"""SIGTERM on a real ``ragnarok serve``: a stream in flight ends with an ``error`` event (503, "the
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


def _sigterm(server, calls: list[threading.Thread]) -> float:
    """SIGTERM to ``server``; the seconds until it exited (then the client threads are joined)."""
    signalled = time.monotonic()
    server.send_signal(signal.SIGTERM)
    server.wait(60)
    exit_s = time.monotonic() - signalled
    for call in calls:
        call.join(30)
    return exit_s


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_ends_streams_answers_requests_and_exits_within_the_grace(demo_settings, tmp_path, slowdown, workers):
    slow = streaming_openai_app(Script(pieces=[f" Word {i} [1]." for i in range(600)], each_wait_s=0.1))  # 60 s
    quick = streaming_openai_app(Script(whole_wait_s=1.0))  # answers 1 s after it is asked: within the grace
    with serve_app(slow) as slow_url, serve_app(quick) as quick_url, hung_backend() as (hung_url, accepted, _):
        urls = {"slow": slow_url + "/v1", "quick": quick_url + "/v1", "hung": hung_url}
        generators = [
            {"name": name, "backend": "openai", "base_url": url, "model": "fake", "max_retries": 0, "timeout_s": 120}
            for name, url in urls.items()
        ]
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "HF_HUB_OFFLINE": "1",
            "RAGNAROK_SHUTDOWN_GRACE_S": str(GRACE_S),
            "RAGNAROK_GENERATORS": json.dumps(generators),
        }
        log = tmp_path / "serve.log"
        started: list = []
        got: dict[str, object] = {}
        streamed: list[tuple[str, dict]] = []
        with ragnarok_serve(env, output=log, started=started, workers=workers) as base:

            def stream() -> None:
                try:
                    with (
                        httpx.Client(timeout=60) as client,
                        connect_sse(
                            client,
                            "POST",
                            base + "/v1/generate",
                            json={"request": CANDIDATES, "generator": "slow", "stream": True},
                        ) as source,
                    ):
                        got["stream"] = source.response
                        for sse in source.iter_sse():
                            streamed.append((sse.event, json.loads(sse.data)))
                except httpx.HTTPError as exc:
                    got["stream error"] = exc

            def plain(generator: str) -> None:
                try:
                    got[generator] = httpx.post(
                        base + "/v1/generate", timeout=60, json={"request": CANDIDATES, "generator": generator}
                    )
                except httpx.HTTPError as exc:
                    got[generator] = exc

            calls = [
                threading.Thread(target=stream),
                threading.Thread(target=plain, args=("quick",)),
                threading.Thread(target=plain, args=("hung",)),
            ]
            for call in calls:
                call.start()
            deadline = time.monotonic() + 60 * slowdown
            while not (any(n == "sentence" for n, _ in streamed) and quick.state.script.calls and accepted):
                assert time.monotonic() < deadline, ("the calls did not reach their backends", got, streamed)
                time.sleep(0.05)
            exit_s = _sigterm(started[0], calls)
    output = log.read_text(errors="replace")
    assert started[0].returncode in (0, -signal.SIGTERM), output[-3000:]  # uvicorn raises the signal it caught
    # the stream: cut at once with an error event, after the text it had
    assert got["stream"].status_code == 200 and "delta" in [n for n, _ in streamed], (got, output[-3000:])
    assert streamed[-1] == (
        "error",
        {"stage": "generate slow", "status": 503, "detail": "the server is shutting down"},
    ), (streamed[-3:], output[-3000:])
    # the plain requests: the answer that came within the grace, the JSON 503 for the one that could not
    assert isinstance(got["quick"], httpx.Response) and got["quick"].status_code == 200, (got, output[-3000:])
    assert got["quick"].json()["answer"], got["quick"].text
    hung = got["hung"]
    assert isinstance(hung, httpx.Response), (hung, output[-3000:])
    assert hung.status_code == 503 and hung.json() == {"detail": "the server is shutting down"}, hung.text
    assert exit_s < GRACE_S + 1.5 * slowdown, (exit_s, output[-3000:])
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output[-5000:]


def test_sigterm_beside_a_cpu_hog_exits_within_the_grace_plus_1s_and_audits_what_clients_saw(
    demo_settings, tmp_path, slowdown
):
    """With keys on, 3 streams and 2 plain requests in flight and one stream whose client
    left: SIGTERM beside a CPU hog; the process is gone within the grace plus 1 s, each client in flight has its
    503 (event or JSON), and the audit log says 503 for each of them and 499 for the client that left."""
    from test_stream_deadline import cpu_hogs

    from ragnarok.auth.store import AuthStore
    from ragnarok.core.settings import Settings

    db = tmp_path / "service.db"
    _, secret = AuthStore.for_settings(
        Settings(data_dir=demo_settings.data_dir, auth="keys", database_url=f"sqlite:///{db}")
    ).create("sigterm", ["generate"])
    headers = {"Authorization": f"Bearer {secret}"}
    slow = streaming_openai_app(Script(pieces=[f" Word {i} [1]." for i in range(600)], each_wait_s=0.1))
    with serve_app(slow) as slow_url, hung_backend() as (hung_url, accepted, _):
        generators = [
            {"name": name, "backend": "openai", "base_url": url, "model": "fake", "max_retries": 0, "timeout_s": 120}
            for name, url in {"slow": slow_url + "/v1", "hung": hung_url}.items()
        ]
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "HF_HUB_OFFLINE": "1",
            "RAGNAROK_SHUTDOWN_GRACE_S": str(GRACE_S),
            "RAGNAROK_GENERATORS": json.dumps(generators),
            "RAGNAROK_AUTH": "keys",
            "RAGNAROK_DATABASE_URL": f"sqlite:///{db}",
        }
        log, started, results = tmp_path / "serve.log", [], {}
        with ragnarok_serve(env, output=log, started=started) as base:

            def stream(name: str, leave: bool = False) -> None:
                events: list[str] = []
                try:
                    with (
                        httpx.Client(timeout=60) as client,
                        connect_sse(
                            client,
                            "POST",
                            base + "/v1/generate",
                            headers=headers,
                            json={"request": CANDIDATES, "generator": "slow", "stream": True},
                        ) as source,
                    ):
                        for sse in source.iter_sse():
                            events.append(sse.data if sse.event == "error" else sse.event)
                            if leave and sse.event == "sentence":
                                break  # the client hangs up mid-answer
                except httpx.HTTPError as exc:
                    events.append(repr(exc))
                results[name] = events

            def plain(name: str) -> None:
                try:
                    results[name] = httpx.post(
                        base + "/v1/generate",
                        headers=headers,
                        timeout=60,
                        json={"request": CANDIDATES, "generator": "hung"},
                    )
                except httpx.HTTPError as exc:
                    results[name] = exc

            stream("left", leave=True)
            calls = [threading.Thread(target=stream, args=(f"stream{i}",)) for i in range(3)]
            calls += [threading.Thread(target=plain, args=(f"plain{i}",)) for i in range(2)]
            for call in calls:
                call.start()
            deadline = time.monotonic() + 60 * slowdown
            while slow.state.script.calls < 4 or len(accepted) < 2:
                assert time.monotonic() < deadline, ("the calls did not reach their backends", results)
                time.sleep(0.05)
            time.sleep(0.5)  # every stream has sent some text
            with cpu_hogs(GRACE_S + 30):
                exit_s = _sigterm(started[0], calls)
    output = log.read_text(errors="replace")
    assert exit_s < GRACE_S + 1.0, (exit_s, output[-3000:])
    for i in range(3):
        assert json.loads(results[f"stream{i}"][-1])["status"] == 503, (results[f"stream{i}"][-3:], output[-3000:])
    for i in range(2):
        got = results[f"plain{i}"]
        assert isinstance(got, httpx.Response) and got.status_code == 503, (got, output[-3000:])
    rows = AuthStore.for_settings(
        Settings(data_dir=demo_settings.data_dir, auth="keys", database_url=f"sqlite:///{db}")
    ).audit_rows()
    assert sorted(r["status"] for r in rows) == [499] + [503] * 5, (rows, output[-3000:])
