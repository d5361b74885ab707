"""Running real HTTP servers on free loopback ports inside the test session."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

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
