"""``Server-Timing: app;dur=MS`` on every response: how long this service worked on the request.

The gateway reads it back from each stage's response (:func:`ragnarok.service.services.server_time_ms`), so a trace tells the stage's own time apart from
what the gateway and the HTTP hop around it cost (bench/bench_gateway.py).
"""

from __future__ import annotations

import time
from typing import Any


class ServerTiming:
    """Pure ASGI middleware: time from the request's arrival to the response's first message."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed_send(message: dict) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - start) * 1000
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"server-timing", f"app;dur={ms:.3f}".encode())],
                }
            await send(message)

        await self.app(scope, receive, timed_send)
