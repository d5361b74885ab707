"""Streamed answers over HTTP: ``text/event-stream`` (Server-Sent Events) for ``"stream": true``.

:func:`primed` pulls a stream up to its first piece of answer (a ``delta``, a ``sentence`` or ``done``) before
anything is sent, so that a request that fails before then (an unknown generator, a backend that refuses, no
first token in time) gets the usual JSON error status, not a 200 stream. Afterwards a failure is an ``error``
event (``stage``, ``status``, ``detail``) and the stream ends.

:class:`EventStream` listens for the client going away while it streams (whatever ASGI version the server
speaks) and then cancels the stream within a moment: the stream's generators are closed, and with them the
backend's HTTP stream or the embedded model's generation, and the backend's slot is freed. When the server
starts shutting down (SIGTERM) a stream in flight ends at once with an ``error`` event (503, "the server is
shutting down"), so that the client knows the answer was cut, and the server can leave within its grace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from api.shutdown import MESSAGE, shutting_down
from ragnarok.core.meter import CallNotRecorded
from ragnarok.runtime.cancel import ShuttingDown
from ragnarok.service.gateway import StageError
from ragnarok.stages.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.stages.generate.streaming import StreamEvent

log = logging.getLogger(__name__)
ANSWER_EVENTS = frozenset({"delta", "sentence", "done"})
#: The scope's key for a stream's outcome (see :meth:`EventStream.__call__`).
OUTCOME = "ragnarok.stream_outcome"
#: The status of a request that ended without an answer (nginx's "client closed request").
CLIENT_CLOSED = 499
#: How often a stream looks whether the server is shutting down (it then ends with an ``error`` event, 503).
SHUTDOWN_POLL_S = 0.1


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
    """What a failure after the stream started becomes: its stage, the status the JSON error would have had,
    and its message as one string (:func:`api.errors.error_detail`: scrubbed of server paths, URLs and keys),
    the same whether the AG service runs in this process or behind ``RAGNAROK_GENERATION_URL``; a stream's
    deadline (``first_token``, ``stall``, ``total``) also as ``deadline``."""
    from api.errors import error_detail  # noqa: PLC0415 - api.errors imports the gateway, which streams

    status, detail = error_detail(exc)
    data = {"stage": stage, "status": status, "detail": message_of(detail)}
    if deadline := getattr(exc, "deadline", None):
        data["deadline"] = deadline
    return encode("error", data)


def message_of(detail: Any) -> str:
    """An error's detail as one string: a generator's ``message``, a stage's ``error``, else the JSON text."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict):
        for key in ("message", "error"):
            if detail.get(key):
                return message_of(detail[key])
    return json.dumps(detail, ensure_ascii=False)


def body(
    head: list[StreamEvent],
    rest: AsyncIterator[StreamEvent],
    render: Callable[[StreamEvent], bytes],
    stage: Callable[[], str],
) -> EventBody:
    """The wire bytes of ``head`` then ``rest``; a failure of ``rest`` is one ``error`` event naming
    ``stage()`` (the stage running then), and so is :meth:`EventBody.stop` (the server shutting down)."""
    return EventBody(head, rest, render, stage)


class EventBody:
    """A stream's bytes (see :func:`body`); :meth:`stop` ends it between two events with an ``error`` event."""

    def __init__(
        self,
        head: list[StreamEvent],
        rest: AsyncIterator[StreamEvent],
        render: Callable[[StreamEvent], bytes],
        stage: Callable[[], str],
    ):
        self._rest = rest
        self._stopped: Exception | None = None
        self.status: int | None = None  # the status of its error event, when it ended with one
        self._step: anyio.CancelScope | None = None
        self._bytes = self._render(head, render, stage)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._bytes

    async def aclose(self) -> None:
        await self._bytes.aclose()

    def stop(self, reason: Exception) -> None:
        """End the stream with ``reason`` as its ``error`` event: the wait for the next event is cancelled (and
        with it the backend's stream), or, while an event is being sent, the stream ends after it."""
        self._stopped = reason
        if self._step is not None:
            self._step.cancel()

    async def _next(self) -> StreamEvent:
        if self._stopped is None:
            try:
                with anyio.CancelScope() as self._step:
                    return await self._rest.__anext__()
            finally:
                self._step = None
        raise self._stopped  # type: ignore[misc] # stopped before or while waiting

    async def _render(
        self, head: list[StreamEvent], render: Callable[[StreamEvent], bytes], stage: Callable[[], str]
    ) -> AsyncIterator[bytes]:
        try:
            for event in head:
                yield render(event)
            while True:
                try:
                    event = await self._next()
                except StopAsyncIteration:
                    break
                yield render(event)
        except Exception as exc:  # noqa: BLE001 - any failure after the 200 is an event, logged once
            if not isinstance(
                exc, GenerationError | GeneratorUnavailable | StageError | ShuttingDown | CallNotRecorded
            ):
                log.exception("a streamed answer failed in stage %s", stage())  # (the others are logged)
            from api.errors import error_detail  # noqa: PLC0415 - (as in error_event)

            self.status = error_detail(exc)[0]
            yield error_event(stage(), exc)
        finally:
            with anyio.CancelScope(shield=True):
                await self._rest.aclose()  # type: ignore[attr-defined] # an async generator


class EventStream(StreamingResponse):
    """``text/event-stream`` that stops as soon as the client disconnects (see the module docstring)."""

    def __init__(self, content: AsyncIterable[bytes], headers: dict[str, str] | None = None):
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = False
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                nonlocal sent
                try:
                    await self.stream_response(send)
                    sent = True
                except OSError:
                    pass  # the client went away mid-send
                group.cancel_scope.cancel()

            async def watch_shutdown() -> None:  # the server is shutting down: the stream ends at once
                while not shutting_down(scope):
                    await anyio.sleep(SHUTDOWN_POLL_S)
                if isinstance(self.body_iterator, EventBody):
                    self.body_iterator.stop(ShuttingDown(MESSAGE))

            group.start_soon(stream)
            group.start_soon(watch_shutdown)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()
        close = getattr(self.body_iterator, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()
        # what the client saw, for the audit log and the access line (api/auth.py): the status of the error event
        # that ended the stream, 499 when the client left before the end, else the 200 of its start
        failed = getattr(self.body_iterator, "status", None)
        if failed is not None or not sent:
            scope[OUTCOME] = failed if failed is not None else CLIENT_CLOSED
