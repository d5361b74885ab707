"""Running real HTTP servers on free loopback ports inside the test session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from ragnarok.runtime.netaddr import free_port  # the tests' free loopback port


@contextmanager
def serve_app(app, health_path: str = "/healthz") -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 in a thread; yields its base URL; stops it on exit."""
    port = free_port()
    # as `ragnarok serve`: uvicorn believes no X-Forwarded-For (the app does, from its trusted proxies only)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", proxy_headers=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + health_path, timeout=1).status_code < 500:
                break
        except httpx.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError(f"server on {base} did not start")
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def process_server(
    argv: list[str], ready_url: str, name: str, start_timeout_s: float, env: dict[str, str] | None = None
) -> Iterator[None]:
    """A server in its own process, ready once ``ready_url`` answers 200 (its output kept to say why it did not
    start); stopped on exit."""
    import subprocess
    import tempfile

    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"{name} exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start in {start_timeout_s:.0f} s")
            time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def llama_cpp_server(model_path: str, n_ctx: int = 4096) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields its ``/v1`` base URL."""
    import sys

    from speed import scaled  # noqa: PLC0415

    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model_path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        "2",
        "--model_alias",
        "smollm2",
    ]
    # scaled: 120 s on an idle machine, a busy one gets longer (tests/speed.py)
    with process_server(argv, base + "/models", "llama.cpp server", scaled(120)):
        yield base


def wait_until_idle(pid: int, cpu_share: float = 0.05, quiet_s: float = 2.0, timeout_s: float = 300) -> float:
    """Wait until process ``pid`` has used under ``cpu_share`` of a core for ``quiet_s`` seconds (``ragnarok
    serve`` warms the arena up after it starts: each generator answers once, SmolLM2 included), at most
    ``timeout_s``; returns the seconds waited. For benchmarks, so that start-up work is not timed."""

    def cpu_s() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        before = cpu_s()
        time.sleep(quiet_s)
        if cpu_s() - before < cpu_share * quiet_s:
            break
    return time.monotonic() - start


@contextmanager
def ragnarok_serve(
    env: dict[str, str],
    output: Path | None = None,
    cwd: Path | None = None,
    start_timeout_s: float = 120,
    dense: bool = False,
    started: list | None = None,
    workers: int = 1,
    prefix: list[str] | None = None,
) -> Iterator[str]:
    """``ragnarok serve --no-dense`` (``dense``: without ``--no-dense``, so the demo's dense index builds in the
    background) in its own process on a free loopback port, with ``env`` as its whole environment; its output
    goes to ``output`` (default: discarded); ``workers`` > 1 passes ``--workers``; ``prefix`` runs it under
    another command (``strace ...``). Yields the base URL once ``/healthz`` answers (``started`` gets the
    ``Popen``, for tests that signal it); stops the server on exit."""
    import subprocess
    import sys

    port = free_port()
    out = open(output, "wb") if output else subprocess.DEVNULL  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            *(prefix or []),
            sys.executable,
            "-m",
            "ragnarok.cli",
            "serve",
            *([] if dense else ["--no-dense"]),
            "--port",
            str(port),
            *(["--workers", str(workers)] if workers > 1 else []),
        ],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=cwd,
    )
    if started is not None:
        started.append(server)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited ({server.returncode})" + (f"; see {output}" if output else ""))
            try:
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start" + (f"; see {output}" if output else ""))
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if output:
            out.close()


_HUB_SCRIPT = """
import json, sys
from fastapi.testclient import TestClient
from api.main import create_app
from ragnarok.core.settings import Settings
c = TestClient(create_app(Settings(data_dir=sys.argv[1]), arena=False), raise_server_exceptions=False)
req = {"query": {"text": "gzip"}, "candidates": [{"docid": "a", "score": 1, "doc": {"segment": "gzip"}}]}
rs = [c.post("/v1/rerank", json={"request": req, "reranker": r, "k": 1}) for r in sys.argv[2:]]
print(json.dumps([r.text for r in rs]))
print(json.dumps([r.status_code for r in rs]))
"""


def rerank_behind_a_counting_hub(
    rerankers: list[str], tmp: Path, timeout_s: float = 300, bodies: list[str] | None = None
) -> tuple[list[int], list[str]]:
    """``POST /v1/rerank`` with each of ``rerankers``, in a fresh process that is online as far as it knows but
    whose model hub (``HF_ENDPOINT``, empty ``HF_HOME``) is a local server counting requests: the statuses
    and the paths the hub was asked for (``bodies``, when given, gets the response bodies)."""
    import json
    import os
    import subprocess
    import sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Hub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args: object) -> None:
            pass

    hub = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{hub.server_port}",
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_HOME": str(tmp / "hf"),
    }
    env.pop("HF_HUB_CACHE", None)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _HUB_SCRIPT, str(tmp / "data"), *rerankers],
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    finally:
        hub.shutdown()
        hub.server_close()
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    if bodies is not None:
        bodies.extend(json.loads(lines[-2]))
    return json.loads(lines[-1]), hits


class RedisServer:
    """A redis-server (Debian's package) on a fixed loopback port, without persistence: :meth:`start`,
    :meth:`stop` (its counts are gone with it), :meth:`pause` and :meth:`resume` (SIGSTOP/SIGCONT: a Redis
    that accepts connections and never answers)."""

    def __init__(self, exe: str, workdir: Path, port: int | None = None):
        self.exe, self.workdir, self.port = exe, workdir, port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30) -> None:
        import redis

        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited with {self.proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)


@contextmanager
def redis_server(workdir: Path) -> Iterator[RedisServer]:
    """A started :class:`RedisServer`, stopped at the end."""
    exe = shutil.which("redis-server")
    assert exe is not None, "redis-server is missing (apt-get install -y redis-server)"
    server = RedisServer(exe, workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def anserini_rest_server(env: dict[str, str] | None = None, start_timeout_s: float = 60) -> Iterator[str]:
    """Anserini's own REST server (``io.anserini.api.RestServer``, in the fatjar pyserini ships) on a free loopback
    port, as its docs start it; yields its base URL; stopped on exit. ``env``: added to this environment (e.g.
    ``ANSERINI_INDEX_CACHE``, where it finds prebuilt indexes by name)."""
    from ragnarok.core.java import anserini_jar, find_java

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [
        str(find_java().java),
        "-cp",
        str(anserini_jar()),
        "io.anserini.api.RestServer",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with process_server(
        argv, base + "/openapi.yaml", "Anserini's RestServer", start_timeout_s, {**os.environ, **(env or {})}
    ):
        yield base
