"""CPU reranking is bounded, with the real packaged MiniLM over real HTTP: the work a
request may ask for (413 before anything is encoded), one batch at a time in arrival order (a small rerank is
not stuck behind a large one), cancellation on client disconnect and deadline (504), and `ragnarok serve`
leaving promptly on SIGTERM with work in flight."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx
import pytest
from servers import free_port, serve_app

from api.main import create_app
from ragnarok.core.settings import Settings
from ragnarok.runtime.cancel import CancelToken, DeadlineExceeded, FairLock, run_watched
from ragnarok.stages.retrieve.dense import Encoder, shared_encoder

# ~1.3 KB: more than MiniLM's 256 tokens, so every candidate costs a full-length encoding
TEXT = "The gzip module provides a simple interface to compress and decompress files like GNU gzip. " * 14


def rerank_body(n: int, reranker: str = "embedding", text: str = TEXT) -> dict:
    candidates = [
        {"docid": f"d{i}", "score": float(n - i), "doc": {"title": f"t{i}", "segment": f"{i} {text}"}} for i in range(n)
    ]
    return {
        "request": {"query": {"text": "compress a file", "qid": "q1"}, "candidates": candidates},
        "reranker": reranker,
        "k": 5,
    }


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    """The process's MiniLM encoder, loaded once (the servers below run in this process and share it)."""
    shared = shared_encoder("minilm")
    shared.encode(["warm up"])
    return shared


@contextmanager
def api(tmp_path, **settings) -> Iterator[tuple[str, object]]:
    app = create_app(Settings(data_dir=tmp_path, **settings), arena=False)
    with serve_app(app) as base:
        yield base, app


def wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def settled(encoder: Encoder, quiet_s: float = 1.5) -> int:
    """The encoder's batch count once it has not moved for ``quiet_s`` (the batch in progress may finish)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        seen = encoder.batches
        time.sleep(quiet_s)
        if encoder.batches == seen:
            return seen
    raise AssertionError("the encoder never stopped")


def in_background(base: str, body: dict, timeout_s: float = 120.0) -> tuple[threading.Thread, dict]:
    """POST /v1/rerank in a thread; the dict gets the response (or the client's exception) and its time."""
    got: dict = {}

    def call() -> None:
        start = time.monotonic()
        try:
            got["response"] = httpx.post(f"{base}/v1/rerank", json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            got["error"] = exc
        got["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, got


def test_over_the_limits_is_a_413_before_any_encoding(tmp_path, encoder):
    with api(tmp_path, cpu_rerank_max_candidates=40, cpu_rerank_max_chars=30_000) as (base, _):
        before = encoder.batches
        for reranker in ("embedding", "mmr:0.5"):
            r = httpx.post(f"{base}/v1/rerank", json=rerank_body(41, reranker, "short"), timeout=30)
            assert r.status_code == 413, r.text
            detail = r.json()["detail"]
            assert "at most 40" in detail and "RAGNAROK_CPU_RERANK_MAX_CANDIDATES" in detail
            r = httpx.post(f"{base}/v1/rerank", json=rerank_body(25, reranker), timeout=30)  # 25 x 1.3 KB
            assert r.status_code == 413, r.text
            detail = r.json()["detail"]
            assert "at most 30,000" in detail and "RAGNAROK_CPU_RERANK_MAX_CHARS" in detail
        assert encoder.batches == before  # refused before anything was encoded
        r = httpx.post(f"{base}/v1/rerank", json=rerank_body(20), timeout=60)
        assert r.status_code == 200 and len(r.json()["candidates"]) == 5
        assert encoder.batches > before
    with api(tmp_path) as (base, _):  # the defaults refuse 1,000 contexts of 3 KB at once
        before, start = encoder.batches, time.monotonic()
        r = httpx.post(f"{base}/v1/rerank", json=rerank_body(1000, text="x" * 3000), timeout=60)
        assert r.status_code == 413 and "2,000,000" in r.json()["detail"], r.text
        assert encoder.batches == before and time.monotonic() - start < 10


def test_a_small_rerank_is_not_stuck_behind_a_large_one(tmp_path, encoder, slowdown):
    """Measured against the large rerank in the same run, not the clock (a busy machine is slow either way): while
    the small one waited, the large one encoded a batch or two, not the rest of its 38."""
    with api(tmp_path) as (base, app):
        start = encoder.batches
        large, got = in_background(base, rerank_body(600), timeout_s=120 * slowdown)  # 38 batches
        wait_for(lambda: encoder.batches >= start + 2, 30 * slowdown)
        t, before = time.monotonic(), encoder.batches
        r = httpx.post(f"{base}/v1/rerank", json=rerank_body(1), timeout=60 * slowdown)
        small_s, during = time.monotonic() - t, encoder.batches - before - 1  # the large one's, not its own
        assert r.status_code == 200 and [c["docid"] for c in r.json()["candidates"]] == ["d0"]
        assert "response" not in got and encoder.batches < start + 30, "the large rerank is still running"
        assert during <= 6, f"the small rerank waited for {during} batches of the large one"
        print(
            f"\nsmall rerank: {small_s:.2f} s while a 600-candidate rerank ran ({during} of its batches meanwhile, "
            f"{encoder.batches - start} of 38 done; slowdown {slowdown:.1f})"
        )
        assert app.state.inflight.cancel_all() == 1  # what SIGTERM does: the large one stops within a batch
        large.join(timeout=15)
        assert got["response"].status_code == 503 and "shutting down" in got["response"].json()["detail"]


def test_client_disconnect_stops_the_work(tmp_path, encoder, slowdown):
    """The client leaves once the work has begun (not after a fixed time, which a busy machine may spend before
    the first batch): the encoder stops within a batch or two of it, not after the rest of the 38."""
    with api(tmp_path) as (base, app):
        start = encoder.batches
        body = json.dumps(rerank_body(600)).encode()
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/rerank HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: "
                b"application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            wait_for(lambda: encoder.batches >= start + 2, 60 * slowdown)
            left = encoder.batches
        wait_for(lambda: len(app.state.inflight) == 0, timeout_s=10 * slowdown)
        after = settled(encoder, 1.5 * slowdown) - left
        assert after <= 3, f"the encoder kept working for a client that left ({after} batches after it left)"


def test_the_deadline_answers_504(tmp_path, encoder):
    with api(tmp_path, cpu_rerank_timeout_s=2) as (base, app):
        start = encoder.batches
        t = time.monotonic()
        r = httpx.post(f"{base}/v1/rerank", json=rerank_body(600), timeout=60)
        assert r.status_code == 504 and r.json()["detail"] == "no answer within 2 s", r.text
        assert time.monotonic() - t < 6
        wait_for(lambda: len(app.state.inflight) == 0, timeout_s=10)
        assert settled(encoder) - start < 30  # of 38: the work stopped too


def test_the_model_is_granted_in_arrival_order():
    """A thread that releases the lock and asks again at once queues behind the thread already waiting."""
    lock, order = FairLock(), []
    first_holds, second_waits = threading.Event(), threading.Event()

    def first() -> None:
        with lock.hold():
            first_holds.set()
            second_waits.wait(5)
            time.sleep(0.1)  # the second thread is in the queue now
        with lock.hold():
            order.append("first again")

    def second() -> None:
        first_holds.wait(5)
        second_waits.set()
        with lock.hold():
            order.append("second")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert order == ["second", "first again"]


def test_cancelled_work_leaves_the_lock_queue():
    lock, token = FairLock(), CancelToken()
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock.hold():
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(5)
    token.cancel(DeadlineExceeded, "no answer within 1 s")

    def waiter() -> None:
        with lock.hold():
            pass

    t = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        token.run(waiter)
    assert time.monotonic() - t < 1
    release.set()
    thread.join(5)
    with lock.hold():  # nobody is left in the queue
        pass


def test_run_watched_returns_results_and_raises_errors():
    async def main() -> None:
        assert await run_watched(lambda: 42, CancelToken(), timeout_s=5) == 42
        with pytest.raises(ZeroDivisionError):
            await run_watched(lambda: 1 / 0, CancelToken(), timeout_s=5)
        t = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="no answer within 0.2 s"):
            await run_watched(lambda: time.sleep(2), CancelToken(), timeout_s=0.2)
        assert time.monotonic() - t < 1.5  # answered at the deadline, not when the work ended

    anyio.run(main)


@pytest.mark.slow
def test_serve_stops_promptly_on_sigterm_with_work_in_flight(demo_settings, tmp_path):
    """The real `ragnarok serve`, with the JVM started by a retrieval, a rerank of ~40 s in flight and a
    retrieval whose thread is blocked for two minutes (an Anserini REST server that never answers)."""
    port = free_port()
    hung = socket.create_server(("127.0.0.1", 0))  # accepts connections (the backlog), never answers
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "RAGNAROK_SHUTDOWN_GRACE_S": "3",
        "RAGNAROK_REMOTE_TIMEOUT_S": "120",
        "RAGNAROK_INDEXES": json.dumps({"hung": f"http://127.0.0.1:{hung.getsockname()[1]}/v1/hung"}),
    }
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "ragnarok serve did not start"
            time.sleep(0.2)
        assert httpx.post(f"{base}/v1/retrieve", json={"query": "gzip", "k": 3}, timeout=120).status_code == 200
        rerank, got = in_background(base, rerank_body(1000))  # within the default limits: ~40 s of work
        blocked = threading.Thread(
            target=lambda: httpx.post(f"{base}/v1/retrieve", timeout=150, json={"query": "gzip", "index": "hung"}),
            daemon=True,
        )
        blocked.start()
        time.sleep(4)  # the model loads and the work starts
        t = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        exit_s = time.monotonic() - t
        rerank.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        hung.close()
    print(f"\nragnarok serve exited {exit_s:.2f} s after SIGTERM (rc {proc.returncode})")
    assert exit_s < 10, f"ragnarok serve took {exit_s:.1f} s to stop"  # 3 s of grace, 2 s of margin
    assert proc.returncode in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
    assert got["response"].status_code == 503, got  # answered, not cut off mid-request
    assert got["response"].json()["detail"] == "the server is shutting down"
