"""Streamed answers over HTTP: ``text/event-stream`` (Server-Sent Events) for ``"stream": true``.

:func:`primed` pulls a stream up to its first piece of answer (a ``delta``, a ``sentence`` or ``done``) before
anything is sent, so that a request that fails before then (an unknown generator, a backend that refuses, no
first token in time) gets the usual JSON error status, not a 200 stream. Afterwards a failure is an ``error``
event (``stage``, ``status``, ``detail``) and the stream ends.

:class:`EventStream` listens for the client going away while it streams (whatever ASGI version the server
speaks) and then cancels the stream within a moment: the stream's generators are closed, and with them the
backend's HTTP stream or the embedded model's generation, and the backend's slot is freed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ragnarok.gateway import StageError
from ragnarok.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.generate.streaming import StreamEvent

log = logging.getLogger(__name__)
ANSWER_EVENTS = frozenset({"delta", "sentence", "done"})


def encode(event: str, data: Any) -> bytes:
    """One event in the SSE wire format (``data`` JSON on one line; a string is sent as it is)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"event: {event}\ndata: {payload}\n\n".encode()


async def primed(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    """The events up to and with the first piece of answer; an error before it is raised here."""
    head: list[StreamEvent] = []
    async for event in events:
        head.append(event)
        if event.event in ANSWER_EVENTS:
            break
    return head


def error_event(stage: str, exc: BaseException) -> bytes:
    """What a failure after the stream started becomes: its stage, the status and detail the JSON error would
    have had (:func:`api.errors.error_detail`: scrubbed of server paths, URLs and keys)."""
    from api.errors import error_detail  # noqa: PLC0415 - api.errors imports the gateway, which streams

    status, detail = error_detail(exc)
    return encode("error", {"stage": stage, "status": status, "detail": detail})


async def body(head: list[StreamEvent], rest: AsyncIterator[StreamEvent], render: Callable[[StreamEvent], bytes],
               stage: Callable[[], str]) -> AsyncIterator[bytes]:
    """The wire bytes of ``head`` then ``rest``; a failure of ``rest`` is one ``error`` event naming
    ``stage()`` (the stage running then)."""
    try:
        for event in head:
            yield render(event)
        async for event in rest:
            yield render(event)
    except Exception as exc:  # noqa: BLE001 - any failure after the 200 is an event, logged once
        if not isinstance(exc, GenerationError | GeneratorUnavailable | StageError):
            log.exception("a streamed answer failed in stage %s", stage())
        yield error_event(stage(), exc)
    finally:
        close = getattr(rest, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


class EventStream(StreamingResponse):
    """``text/event-stream`` that stops as soon as the client disconnects (see the module docstring)."""

    def __init__(self, content: AsyncIterator[bytes], headers: dict[str, str] | None = None):
        super().__init__(content, media_type="text/event-stream",
                         headers={"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:
            async def stream() -> None:
                try:
                    await self.stream_response(send)
                except OSError:
                    pass  # the client went away mid-send
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()
        close = getattr(self.body_iterator, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()
