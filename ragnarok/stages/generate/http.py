"""One JSON exchange with a backend over httpx, bounded in total time, however the backend answers.

httpx's timeouts bound each network operation, not the exchange: a backend that sends one byte every two
seconds never trips a 5 s read timeout. Here connecting, sending and waiting for the status line and headers
are each bounded by the call's timeout (httpx's own); then the body is read in chunks with the deadline
checked between them, and a watchdog shuts the socket down at the deadline, so a read that blocks mid-body
returns at once. (Headers sent a byte at a time are bounded per read only: uvicorn-based servers, vLLM and
llama.cpp send them at once.) Every failure is a :class:`BackendError` saying what came back: the status with
the backend's own message, or what the body was instead of JSON (quoted, at most 200 characters, redacted).
JSON whose strings are not valid Unicode text (a lone surrogate, ``"\\ud800"``) is refused too, naming where:
such a string cannot be encoded as UTF-8, so no answer could carry it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ragnarok.runtime import cancel
from ragnarok.runtime.quoting import lone_surrogate  # noqa: F401 - re-exported (its old home)
from ragnarok.runtime.redact import quote
from ragnarok.stages.generate.base import BackendError

#: A larger answer is not an LLM's: refuse it rather than hold it in memory.
MAX_BODY_BYTES = 16 * 1024 * 1024


def retry_after_s(headers: httpx.Headers) -> float | None:
    """The wait a 429/503 asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or as an HTTP date."""
    try:
        if ms := headers.get("retry-after-ms"):
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().replace(".", "", 1).isdigit():
            return float(value)
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_message(body: bytes) -> str:
    """The backend's own error message (OpenAI ``error.message``, Cohere ``message``, ``detail``), quoted;
    else the start of the body."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return quote(text.strip())
    if isinstance(data, dict):
        error = data.get("error")
        for found in (
            error.get("message") if isinstance(error, dict) else error,
            data.get("message"),
            data.get("detail"),
        ):
            if found:
                return quote(found if isinstance(found, str) else json.dumps(found))
    return quote(text.strip())


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on this socket in another thread
    except OSError:
        pass


def _read(response: httpx.Response, deadline: float, timeout_s: float) -> bytes:
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _shutdown, (sock,)) if sock else None
    if watchdog is not None:
        watchdog.daemon = True
        watchdog.start()
    chunks, size = [], 0
    try:
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"no answer within {timeout_s:.3g} s (the body was still arriving)", timeout=True, retryable=True
                )
            if size > MAX_BODY_BYTES:
                raise BackendError(f"the answer is over {MAX_BODY_BYTES:,} bytes")
        if time.monotonic() >= deadline:  # the watchdog ended a body without a declared end
            raise BackendError(f"no answer within {timeout_s:.3g} s", timeout=True, retryable=True)
    finally:
        if watchdog is not None:
            watchdog.cancel()
    return b"".join(chunks)


def backend_client(max_concurrency: int) -> httpx.Client:
    """The client of one backend's :func:`post_json` calls: a connection per exchange (none kept alive), so
    that each one can be interrupted (:class:`_Interruptible`); an LLM answer takes far longer than a
    handshake."""
    return httpx.Client(limits=httpx.Limits(max_connections=max_concurrency + 2, max_keepalive_connections=0))


class _Interruptible:
    """The socket of one exchange, shut down when the current cancel token is cancelled (the client went
    away, the server stops): a call blocked on it, waiting for the status line as much as reading the body,
    returns at once. httpcore names the socket as it connects (its ``trace`` extension): the client must open
    a connection per exchange (no keep-alive) for every exchange to be interruptible."""

    def __init__(self) -> None:
        self.token = cancel.current()
        self._unregister: Any = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if self.token is None or event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            self.close()
            self._unregister = self.token.on_cancel(lambda: _shutdown(sock))

    def close(self) -> None:
        if self._unregister is not None:
            self._unregister()
            self._unregister = None


def post_json(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> Any:
    """POST ``body`` to ``url`` and return the JSON answer, all within ``timeout_s``; a 4xx/5xx, a body that
    is not JSON, or no answer in time raise :class:`BackendError`; the current cancel token cancelled
    meanwhile ends the exchange at once and raises its error (:class:`~ragnarok.runtime.cancel.Cancelled`)."""
    deadline = time.monotonic() + timeout_s
    where = httpx.URL(url).copy_with(query=None)
    interruptible = _Interruptible()
    try:
        # each operation (connect, send, wait for the headers) gets the whole time: it is all there is left
        with client.stream(
            "POST", url, json=body, headers=headers, timeout=timeout_s, extensions={"trace": interruptible.trace}
        ) as response:
            raw = _read(response, deadline, timeout_s)
    except httpx.TransportError as exc:
        cancel.check()  # cut because the request was cancelled: its error, never retried
        if isinstance(exc, httpx.TimeoutException) or time.monotonic() >= deadline:  # or the watchdog cut it
            raise BackendError(f"no answer within {timeout_s:.3g} s", timeout=True, retryable=True) from None
        problem = str(exc) or type(exc).__name__
        cause = (
            f"cannot reach {where}: {problem}"
            if isinstance(exc, httpx.ConnectError)
            else f"the connection to {where} broke: {problem}"
        )
        raise BackendError(cause, retryable=True) from None
    finally:
        interruptible.close()
    cancel.check()  # a body cut short by the cancellation, however it ended
    status = response.status_code
    if status >= 400:
        raise BackendError(
            f"HTTP {status}: {error_message(raw)}",
            retryable=status == 429 or status >= 500,
            retry_after=retry_after_s(response.headers),
        )
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        kind = response.headers.get("content-type", "no content-type")
        raise BackendError(
            f"HTTP {status} but the body is not JSON ({kind}): {quote(raw.decode('utf-8', errors='replace'))}"
        ) from None
    if where := lone_surrogate(data, raw):
        raise BackendError(f"HTTP {status} but the answer is not valid Unicode text: a lone surrogate in {where}")
    return data
