"""Requests still in flight when the server stops get the JSON 503 ``{"detail": "the server is shutting down"}``.

uvicorn would otherwise answer a cancelled request with a plain-text ``Internal Server Error``.
:class:`ShutdownAnswer` runs each request's work in a task of its own and waits for it shielded, so a request
cancelled during shutdown answers the 503 at once, even while its work waits for a worker thread, and the
work is cancelled. Other cancellations reach the work as before.

Design notes: docs/internals/service-api.md.
"""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar
from typing import Any

import anyio

from ragnarok.runtime.cancel import ShuttingDown

MESSAGE = "the server is shutting down"
_serving: ContextVar[bool] = ContextVar("ragnarok_serving_a_request", default=False)


def _ignore_outcome(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "exception was never retrieved" for work nobody waits for any more


def shutting_down(scope: dict) -> bool:
    """Whether the app serving ``scope`` is shutting down (SIGTERM: ``InFlight.cancel_all`` was called)."""
    inflight = getattr(getattr(scope.get("app"), "state", None), "inflight", None)
    return bool(getattr(inflight, "closing", False))


class ShutdownAnswer:
    """Pure ASGI middleware (see the module's docstring)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _serving.get():
            await self.app(scope, receive, send)
            return
        started = answered = False

        async def watched_send(message: dict) -> None:
            nonlocal started
            if answered:  # the 503 went out instead
                raise ShuttingDown(MESSAGE)
            started = started or message["type"] == "http.response.start"
            await send(message)

        reset = _serving.set(True)
        try:
            work = asyncio.ensure_future(self.app(scope, receive, watched_send))  # in a copy of this context
        finally:
            _serving.reset(reset)
        try:
            await asyncio.shield(work)
            return
        except asyncio.CancelledError:
            if not shutting_down(scope):
                work.cancel()
                with anyio.CancelScope(shield=True):  # as before: the work ends, then the cancellation goes on
                    await asyncio.wait([work])
                raise
            if work.done() and not work.cancelled():  # it ended as the cancellation came: its outcome stands
                _uncancel()
                work.result()
                return
            work.add_done_callback(_ignore_outcome)
            work.cancel()
            if started:
                raise
        answered = True
        body = json.dumps({"detail": MESSAGE}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        _uncancel()  # answered: the request ends normally


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
