"""Running real HTTP servers on free loopback ports inside the test session."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_app(app, health_path: str = "/healthz") -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 in a thread; yields its base URL; stops it on exit."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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
def llama_cpp_server(model_path: str, n_ctx: int = 4096) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields its ``/v1`` base URL."""
    import subprocess
    import sys
    import tempfile

    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2", "--model_alias", "smollm2"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"llama.cpp server exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama.cpp server did not start in 120 s")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def ragnarok_serve(env: dict[str, str], output: Path | None = None, cwd: Path | None = None,
                   start_timeout_s: float = 120) -> Iterator[str]:
    """``ragnarok serve --no-dense`` in its own process on a free loopback port, with ``env`` as its whole
    environment; its output goes to ``output`` (default: discarded). Yields the base URL once ``/healthz``
    answers; stops the server on exit."""
    import subprocess
    import sys

    port = free_port()
    out = open(output, "wb") if output else subprocess.DEVNULL  # noqa: SIM115 - closed below
    server = subprocess.Popen([sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--port", str(port)],
                              env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
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
