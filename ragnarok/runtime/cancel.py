"""Cooperative cancellation of CPU work, and a fair lock for the model that work shares.

The API gives each expensive request a :class:`CancelToken` and cancels it when the client disconnects, the
request's deadline passes or the server shuts down (:class:`InFlight` knows every token in use). The work
checks the token between small steps (the encoder, between batches: :func:`check`), so it stops within one
step. The token travels with the work as a context variable (:meth:`CancelToken.run`), so the rerankers keep
their ``rerank(request, k)`` signature; work run without a token is never cancelled.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class Cancelled(RuntimeError):
    """Work stopped before it finished; the message says why."""


class DeadlineExceeded(Cancelled):
    """No answer within the request's deadline (504)."""


class ClientDisconnected(Cancelled):
    """The client left before the answer (nobody reads the status)."""


class ShuttingDown(Cancelled):
    """The server is shutting down (503)."""


class CancelToken:
    """Set once, from any thread, with the error that the work then raises at its next :func:`check`; work
    that blocks where it cannot check (on a backend's socket) registers what interrupts it
    (:meth:`on_cancel`)."""

    def __init__(self) -> None:
        self._error: tuple[type[Cancelled], str] | None = None
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()

    def cancel(self, kind: type[Cancelled], message: str) -> None:
        with self._lock:
            if self._error is not None:
                return
            self._error = (kind, message)
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (from the thread that cancels) when the token is cancelled, at once when it is
        already; returns what unregisters it."""
        with self._lock:
            if self._error is None:
                ident = next(self._ids)
                self._callbacks[ident] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(ident, None)

                return unregister
        callback()
        return lambda: None

    @property
    def cancelled(self) -> bool:
        return self._error is not None

    def error(self) -> tuple[type[Cancelled], str]:
        """What the token was cancelled with (:class:`Cancelled` when it was not)."""
        return self._error or (Cancelled, "cancelled")

    def check(self) -> None:
        """Raise the error the token was cancelled with (a new exception each time), if any."""
        if self._error is not None:
            kind, message = self._error
            raise kind(message)

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` with this token as the current one (what :func:`check` looks at)."""
        reset = _current.set(self)
        try:
            return fn()
        finally:
            _current.reset(reset)


_current: ContextVar[CancelToken | None] = ContextVar("ragnarok_cancel_token", default=None)


def current() -> CancelToken | None:
    """The current work's token (None: work that is never cancelled)."""
    return _current.get()


def check() -> None:
    """Raise :class:`Cancelled` if the current work's token was cancelled (nothing when there is none)."""
    token = _current.get()
    if token is not None:
        token.check()


class InFlight:
    """The tokens of the work in progress, so that shutdown cancels all of it (and any that starts later)."""

    def __init__(self) -> None:
        self._tokens: set[CancelToken] = set()
        self._lock = threading.Lock()
        self._closing: tuple[type[Cancelled], str] | None = None
        self.closed_at: float | None = None  # time.monotonic() of the first cancel_all (the shutdown's start)

    @contextmanager
    def token(self) -> Iterator[CancelToken]:
        """A new token, cancelled with the current one (a request made in process while serving one: its
        caller's)."""
        token = CancelToken()
        with self._lock:
            if self._closing is not None:
                token.cancel(*self._closing)
            self._tokens.add(token)
        parent = _current.get()
        unlink = parent.on_cancel(lambda: token.cancel(*parent.error())) if parent is not None else None
        try:
            yield token
        finally:
            if unlink is not None:
                unlink()
            with self._lock:
                self._tokens.discard(token)

    def cancel_all(self, kind: type[Cancelled] = ShuttingDown, message: str = "the server is shutting down") -> int:
        """Cancel every token in use and every later one; returns how many were in use."""
        with self._lock:
            self._closing = (kind, message)
            self.closed_at = self.closed_at or time.monotonic()
            tokens = list(self._tokens)
        for token in tokens:
            token.cancel(kind, message)
        return len(tokens)

    @property
    def closing(self) -> bool:
        """Whether :meth:`cancel_all` was called (the server is shutting down)."""
        return self._closing is not None

    def __len__(self) -> int:
        return len(self._tokens)


async def run_watched(
    fn: Callable[[], T],
    token: CancelToken,
    *,
    timeout_s: float | None = None,
    disconnected: Callable[[], Awaitable[bool]] | None = None,
    poll_s: float = 0.1,
    limiter: anyio.CapacityLimiter | None = None,
) -> T:
    """``fn()`` in a worker thread under ``token``; the token is cancelled when ``timeout_s`` passes
    (:class:`DeadlineExceeded`: "no answer within N s") or ``disconnected()`` turns true. The thread is one of
    ``limiter``'s (work that calls a backend: that backend's share, :attr:`Guard.callers`), else of anyio's
    default limiter.

    Once the token is cancelled (by this watch or by anyone else, e.g. shutdown) its error is raised at once;
    work that checks the token stops at its next check, other work finishes in its thread unobserved.
    """
    return await _watching(
        lambda: anyio.to_thread.run_sync(token.run, fn, abandon_on_cancel=True, limiter=limiter),
        token,
        timeout_s,
        disconnected,
        poll_s,
    )


async def watched(
    work: Callable[[], Awaitable[T]],
    token: CancelToken,
    *,
    disconnected: Callable[[], Awaitable[bool]] | None = None,
    poll_s: float = 0.1,
) -> T:
    """``await work()`` with ``token`` as the current one (the worker threads it starts copy it: a backend
    call in flight registers its socket with it); the token is cancelled when ``disconnected()`` turns true.
    Once it is cancelled (by this watch or by anyone else, e.g. shutdown) the work is cancelled: what it waits
    for on the event loop (a backend's slot) at once, a backend call in a worker thread when its socket is
    shut (:func:`ragnarok.stages.generate.http.post_json`); then the token's error is raised."""

    async def under_token() -> T:
        reset = _current.set(token)  # in the work's own task: its context only
        try:
            return await work()
        finally:
            _current.reset(reset)

    return await _watching(under_token, token, None, disconnected, poll_s)


async def _watching(
    work: Callable[[], Awaitable[T]],
    token: CancelToken,
    timeout_s: float | None,
    disconnected: Callable[[], Awaitable[bool]] | None,
    poll_s: float,
) -> T:
    token.check()  # cancelled already (the server is shutting down): start nothing
    outcome: list[T] = []
    failure: list[BaseException] = []

    async def watch(scope: anyio.CancelScope) -> None:
        deadline = None if timeout_s is None else anyio.current_time() + timeout_s
        while not token.cancelled:
            left = poll_s if deadline is None else deadline - anyio.current_time()
            await anyio.sleep(max(0.0, min(poll_s, left)))
            if deadline is not None and anyio.current_time() >= deadline:
                token.cancel(DeadlineExceeded, f"no answer within {timeout_s:g} s")
            elif disconnected is not None and await disconnected():
                token.cancel(ClientDisconnected, "the client disconnected")
        scope.cancel()

    async def run(scope: anyio.CancelScope) -> None:
        try:
            outcome.append(await work())
        except Exception as exc:  # noqa: BLE001 - handed to the caller below, outside the task group
            failure.append(exc)
        scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch, group.cancel_scope)
        group.start_soon(run, group.cancel_scope)
    if outcome:
        return outcome[0]
    token.check()
    raise failure[0]


class FairLock:
    """A lock granted in arrival order (``threading.Lock`` lets the thread that releases it take it again at
    once, so a loop of batches would starve a small request waiting for one). Waiting checks the current
    cancel token, so cancelled work leaves the queue within ``poll_s``."""

    def __init__(self, poll_s: float = 0.05) -> None:
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()  # the head holds the lock
        self._poll_s = poll_s

    @contextmanager
    def hold(self) -> Iterator[None]:
        me = object()
        with self._cond:
            self._queue.append(me)
            try:
                while self._queue[0] is not me:
                    self._cond.wait(self._poll_s)
                    check()
            except BaseException:
                self._queue.remove(me)
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._queue.popleft()
                self._cond.notify_all()
