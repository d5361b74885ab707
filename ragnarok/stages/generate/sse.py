"""A backend's streamed answer: ``POST`` with ``stream: true``, then its Server-Sent Events (httpx-sse).

One stream holds one of the backend's slots (:meth:`Guard.slot`) until it is closed, and counts each attempt in
the request's spend (:meth:`Guard.count_attempt`). A 429, a 5xx, a timeout or a connection error before the
first event is retried as a non-streamed call is (the backend's Retry-After, else an exponential backoff, at
most ``max_retries`` times); after the first event a failure ends the stream (the caller sends an ``error``
event). The time the stream may take is bounded by the caller (:func:`~ragnarok.stages.generate.streaming.deadlined`),
which closes this generator, and so the HTTP stream, when a deadline passes or the client goes away.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from httpx_sse import SSEError, aconnect_sse

from ragnarok.runtime import metrics
from ragnarok.stages.generate.base import MIN_ATTEMPT_S, BackendError, GenerationError, Guard
from ragnarok.stages.generate.http import MAX_BODY_BYTES, error_message, lone_surrogate, retry_after_s

log = logging.getLogger(__name__)
#: Once a stream has sent this many bytes of events, it is no LLM answer: it is cut.
MAX_STREAM_BYTES = MAX_BODY_BYTES


async def _error_of(response: httpx.Response) -> BackendError:
    raw = b""
    async for chunk in response.aiter_bytes():
        raw += chunk
        if len(raw) > 64 * 1024:
            break
    status = response.status_code
    return BackendError(
        f"HTTP {status}: {error_message(raw)}",
        retryable=status == 429 or status >= 500,
        retry_after=retry_after_s(response.headers),
    )


async def _whole(response: httpx.Response) -> Any:
    """The JSON answer of a server that does not stream (it ignored ``stream: true``)."""
    raw = b""
    async for chunk in response.aiter_bytes():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BackendError(f"the answer is over {MAX_BODY_BYTES:,} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise BackendError(f"HTTP 200 but the body is not JSON: {raw[:200]!r}") from None
    if found := lone_surrogate(data, raw):
        raise BackendError(f"HTTP 200 but the answer is not valid Unicode text: a lone surrogate in {found}")
    return data


async def _attempt(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[tuple[str, Any]]:
    """One attempt: ``(event, data)`` pairs, ``data`` parsed JSON (or the raw text ``[DONE]``); a server that
    answers JSON instead of a stream gives one pair, ``("whole", its answer)``."""
    where = httpx.URL(url).copy_with(query=None)
    size = 0
    try:
        async with aconnect_sse(client, "POST", url, json=body, headers=headers) as source:
            if source.response.status_code >= 400:
                raise await _error_of(source.response)
            if source.response.headers.get("content-type", "").startswith("application/json"):
                yield "whole", await _whole(source.response)  # a server that ignored `stream`: its one answer
                return
            async for event in source.aiter_sse():
                size += len(event.data)
                if size > MAX_STREAM_BYTES:
                    raise BackendError(f"the streamed answer is over {MAX_STREAM_BYTES:,} bytes")
                if event.data.strip() == "[DONE]":
                    yield event.event, "[DONE]"
                    return
                if not event.data.strip():
                    continue
                try:
                    data = json.loads(event.data)
                except (ValueError, RecursionError):
                    raise BackendError(f"a streamed event is not JSON: {event.data[:200]!r}") from None
                if found := lone_surrogate(data, event.data.encode("utf-8", "surrogatepass")):
                    raise BackendError(f"a streamed event is not valid Unicode text: a lone surrogate in {found}")
                yield event.event, data
    except SSEError as exc:  # a 200 that is no event stream
        raise BackendError(f"HTTP 200 but not an event stream: {exc}") from None
    except httpx.TimeoutException:
        raise BackendError(f"{where} did not answer in time", timeout=True, retryable=True) from None
    except httpx.TransportError as exc:
        problem = str(exc) or type(exc).__name__
        cause = (
            f"cannot reach {where}: {problem}"
            if isinstance(exc, httpx.ConnectError)
            else f"the connection to {where} broke: {problem}"
        )
        raise BackendError(cause, retryable=True) from None


async def stream_events(
    guard: Guard,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    connect_s: float,
    first_by: float | None = None,
) -> AsyncIterator[tuple[str, Any]]:
    """The backend's events, retried before the first one (see the module docstring); a failure is a
    :class:`GenerationError` naming the backend. ``first_by`` (a ``time.monotonic()``): when the first event
    is due; no attempt starts with less than ``MIN_ATTEMPT_S`` left of it (nor the wait for a slot)."""
    timeout = httpx.Timeout(connect_s, read=None)  # reads are bounded by the caller's deadlines
    async with guard.slot(first_by), httpx.AsyncClient(timeout=timeout) as client:
        attempt = 0
        while True:
            attempt += 1
            started = False
            if attempt > 1 and first_by is not None and first_by - time.monotonic() < MIN_ATTEMPT_S:
                raise GenerationError(guard.name, f"no first token in time ({attempt - 1} attempts)", timeout=True)
            await guard.acount_attempt()
            try:
                async for item in _attempt(client, url, body, headers):
                    started = True
                    yield item
                return
            except BackendError as exc:
                if started or not exc.retryable or attempt > guard.max_retries:  # counted once, after retries
                    cause = exc.kind or metrics.failure_cause(exc.cause, exc.timeout, exc.retryable)
                    metrics.backend_failure(guard.name, cause)
                    log.warning(
                        "generator %r: the stream failed (%s, attempt %d): %s", guard.name, cause, attempt, exc.cause
                    )
                    suffix = f" ({attempt} attempts)" if attempt > 1 else ""
                    error = GenerationError(guard.name, exc.cause + suffix, exc.timeout)
                    error.reported = True  # type: ignore[attr-defined] # (streaming.reported: not twice)
                    raise error from None
                wait = (
                    exc.retry_after if exc.retry_after is not None else min(8.0, guard.backoff_s * 2 ** (attempt - 1))
                )
                await anyio.sleep(wait)
