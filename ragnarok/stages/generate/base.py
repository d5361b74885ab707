"""What every generator backend shares: its configuration, its errors, and a :class:`Guard` that bounds each
backend in concurrency and in time.

Each backend has its own deadlines (per attempt, per request, for a slot) and its own worker threads, so a
backend that hangs holds only its own threads, and every other backend, route and ``/healthz`` keeps theirs.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from ragnarok.core.generator_config import Backend, GeneratorConfig  # noqa: F401 - re-exported (its old home)
from ragnarok.core.meter import calling, take_call
from ragnarok.runtime import cancel, metrics
from ragnarok.runtime.redact import redact, register_env, register_value
from ragnarok.stages.generate.within import NotInTime, within

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Less time than this left before the deadline is not worth another attempt.
MIN_ATTEMPT_S = 0.05
#: One backend's calls in flight, and the worker threads they hold, at most, whatever its ``max_concurrency``.
MAX_BACKEND_THREADS = 64


class GenerationError(RuntimeError):
    """A backend failed: the API answers 502 (or 504 when ``timeout``), naming backend and cause.
    The cause is redacted here: no configured key value survives into a message, an answer or a log."""

    def __init__(self, generator: str, cause: str, timeout: bool = False, kind: str | None = None):
        self.generator, self.cause, self.timeout = generator, redact(cause), timeout
        self.kind = kind  # its cause in ragnarok_backend_failures, when its message does not say it
        super().__init__(f"generator {generator!r} failed: {self.cause}")


class GeneratorUnavailable(RuntimeError):
    """A generator that cannot run here now (no key, no model file): 422 naming what is missing."""


class BackendError(RuntimeError):
    """One failed attempt: ``cause`` says what came back (quoted, redacted); ``retryable`` for 429, 5xx,
    timeouts and connection errors; ``retry_after`` the seconds the backend asked us to wait, if it did."""

    def __init__(
        self,
        cause: str,
        *,
        timeout: bool = False,
        retryable: bool = False,
        retry_after: float | None = None,
        kind: str | None = None,
    ):
        self.cause, self.timeout, self.retryable = redact(cause), timeout, retryable
        self.retry_after = retry_after
        self.kind = kind  # its cause in ragnarok_backend_failures, when its message does not say it
        super().__init__(self.cause)


@dataclass(frozen=True)
class Budget:
    """The time one request has: a monotonic ``deadline`` ``total_s`` after it started, and the guards whose
    slot the request already holds (taken by :meth:`Guard.reserved` before its worker thread started)."""

    deadline: float
    total_s: float
    held: frozenset[int] = frozenset()

    def left(self) -> float:
        return self.deadline - time.monotonic()


_budget: ContextVar[Budget | None] = ContextVar("ragnarok_generation_budget", default=None)


@dataclass
class Guard:
    """Bounded concurrency, deadlines and retries for one backend (see the module's docstring).

    A failure is logged once here (backend, cause, attempts, latency) and raised as :class:`GenerationError`.
    """

    name: str
    max_concurrency: int = 4
    max_retries: int = 2
    timeout_s: float = 60.0
    deadline_s: float | None = None
    slot_wait_s: float | None = None
    backoff_s: float = 0.5
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)
    slots: int = field(init=False)
    threads: anyio.CapacityLimiter = field(init=False, repr=False)
    callers: anyio.CapacityLimiter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.slots = max(1, min(self.max_concurrency, MAX_BACKEND_THREADS))
        self._slots = threading.BoundedSemaphore(self.slots)
        # as many threads as slots: a request that holds a slot never waits for its thread (see the docstring)
        self.threads = anyio.CapacityLimiter(self.slots)
        self.callers = anyio.CapacityLimiter(self.slots)
        if self.deadline_s is None:
            self.deadline_s = self.timeout_s * (self.max_retries + 1)
        if self.slot_wait_s is None:
            self.slot_wait_s = self.timeout_s

    @classmethod
    def of(cls, config: GeneratorConfig, **overrides: Any) -> Guard:
        values = {
            "max_concurrency": config.max_concurrency,
            "max_retries": config.max_retries,
            "timeout_s": config.timeout_s,
            "deadline_s": config.deadline_s,
            "slot_wait_s": config.slot_wait_s,
        }
        return cls(config.name, **{**values, **overrides})

    def budget(self) -> Budget:
        """The current request's budget, or a new one of ``deadline_s`` starting now."""
        assert self.deadline_s is not None
        return _budget.get() or Budget(time.monotonic() + self.deadline_s, self.deadline_s)

    def _busy(self, waited: float, start: float) -> GenerationError:
        cause = f"busy: no slot within {waited:.3g} s ({self.slots} calls in flight)"
        metrics.backend_failure(self.name, "busy")
        log.warning("generator %r: %s (after %.0f ms)", self.name, cause, (time.monotonic() - start) * 1000)
        return GenerationError(self.name, cause, timeout=True)

    def _slot_wait(self, budget: Budget) -> float:
        assert self.slot_wait_s is not None
        return max(0.0, min(self.slot_wait_s, budget.left()))

    async def _take_slot(self, budget: Budget) -> None:
        """One of the slots, polled on the event loop (no thread waits on the threading semaphore shared with
        the synchronous callers); the "busy" :class:`GenerationError` when none frees in time."""
        start, wait = time.monotonic(), self._slot_wait(budget)
        delay = 0.005
        while not self._slots.acquire(blocking=False):
            if time.monotonic() - start >= wait:
                raise self._busy(wait, start)
            await anyio.sleep(min(delay, max(0.0, start + wait - time.monotonic())))
            delay = min(delay * 2, 0.05)
        metrics.slot_wait(self.name, time.monotonic() - start)

    @asynccontextmanager
    async def slot(self, first_by: float | None = None) -> AsyncIterator[None]:
        """One of the backend's slots for a stream, taken without a thread (as :meth:`reserved` takes it)
        and held until the stream is closed; no budget context (a stream has its own deadlines). ``first_by``
        (a ``time.monotonic()``) is when the stream's first token is due: the wait for the slot ends then, and
        a slot taken with less than ``MIN_ATTEMPT_S`` left is given back unused (the "no answer within" error),
        so a stream past its deadline never calls the backend."""
        budget = self.budget() if first_by is None else Budget(first_by, self.timeout_s)
        await self._take_slot(budget)
        if budget.left() < MIN_ATTEMPT_S:
            self._slots.release()
            metrics.backend_failure(self.name, "timeout")
            raise GenerationError(
                self.name,
                f"busy: the first token was due before a slot freed ({self.slots} calls in flight)",
                timeout=True,
            )
        try:
            yield
        finally:
            self._slots.release()

    def count_attempt(self) -> None:
        """One backend call, counted as :meth:`call` counts each attempt (the request's spend; with a budget,
        written into its reservation first: a database call)."""
        take_call(self.name)
        metrics.backend_call(self.name)

    async def acount_attempt(self) -> None:
        """:meth:`count_attempt` from the event loop (a stream's): in a worker thread, so that a slow database
        never holds the loop; cancelled with the stream."""
        await anyio.to_thread.run_sync(self.count_attempt, abandon_on_cancel=True)

    @asynccontextmanager
    async def reserved(self) -> AsyncIterator[Budget]:
        """Start the request's budget and take a slot without holding a thread; inside, the calls this request
        makes through the guard (in worker threads too: they copy the context) use both. Raises the "busy"
        :class:`GenerationError` when no slot frees in time."""
        budget = self.budget()
        await self._take_slot(budget)
        token = _budget.set(replace(budget, held=budget.held | {id(self)}))
        try:
            yield budget
        finally:
            _budget.reset(token)
            self._slots.release()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a slot taken here without a thread (:meth:`reserved`'s), then in one of this backend's
        own worker threads (:attr:`threads`): never one of anyio's default limiter. The whole of it, the wait for
        the slot, every attempt and what ``fn`` does with the answer (post-processing), ends within the
        request's deadline, however slowly the thread runs: then the "no answer within N s"
        :class:`GenerationError` is raised at once, and the thread, left to end on its own (its attempts are
        bounded by the same deadline), keeps the slot until it does (:func:`~ragnarok.stages.generate.within.within`)."""
        budget = self.budget()
        await self._take_slot(budget)
        token = _budget.set(replace(budget, held=budget.held | {id(self)}))  # copied into the thread's context
        start = time.monotonic()
        try:
            return await within(lambda: fn(*args), budget.left(), self.threads, self._slots.release)
        except NotInTime:
            cause = f"no answer within {budget.total_s:g} s"
            metrics.backend_failure(self.name, "timeout")
            log.warning("generator %r failed after %.0f ms: %s", self.name, (time.monotonic() - start) * 1000, cause)
            raise GenerationError(self.name, cause, timeout=True) from None
        finally:
            _budget.reset(token)

    def call(self, attempt: Callable[[float], T]) -> T:
        """``attempt(timeout_s)`` in a slot, retried while it fails with a retryable :class:`BackendError`,
        retries are left and the deadline leaves time; waits follow the backend's Retry-After when it sends
        one. Raises :class:`GenerationError` (timeout: no answer in time, or no slot)."""
        start, budget = time.monotonic(), self.budget()
        if id(self) in budget.held:
            return self._retrying(attempt, budget, start)
        wait = self._slot_wait(budget)
        if not self._slots.acquire(timeout=wait):
            raise self._busy(wait, start)
        metrics.slot_wait(self.name, time.monotonic() - start)
        try:
            return self._retrying(attempt, budget, start)
        finally:
            self._slots.release()

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        after = getattr(error, "retry_after", None)
        return after if after is not None else wait_exponential(multiplier=self.backoff_s, max=8)(state)

    def _retrying(self, attempt: Callable[[float], T], budget: Budget, start: float) -> T:
        attempts = 0

        def once() -> T:
            nonlocal attempts
            cancel.check()  # the request was cancelled (the client went away): no attempt, no retry
            attempts += 1
            left = budget.left()
            if left < MIN_ATTEMPT_S:
                raise BackendError(f"no answer within {budget.total_s:g} s", timeout=True)
            self.count_attempt()  # counted in the request's spend; past its reservation: CallLimitReached
            with calling(self.name):  # the tokens it reports are counted for this generator
                return attempt(min(self.timeout_s, left))

        def stop(state: RetryCallState) -> bool:  # no retries left, or no time for one after the wait
            return state.attempt_number > self.max_retries or budget.left() - self._wait(state) < MIN_ATTEMPT_S

        retryable = retry_if_exception(lambda exc: isinstance(exc, BackendError) and exc.retryable)
        retrying = Retrying(stop=stop, wait=self._wait, retry=retryable, reraise=True)
        try:
            return retrying(once)
        except BackendError as exc:
            cause = exc.cause
            kind = exc.kind or metrics.failure_cause(cause, exc.timeout, exc.retryable)
            metrics.backend_failure(self.name, kind)
            if exc.timeout and budget.left() < MIN_ATTEMPT_S:
                cause = f"no answer within {budget.total_s:g} s"
            elif exc.retryable and attempts <= self.max_retries:  # retries were left: the deadline ended them
                deadline = f"the {budget.total_s:g} s deadline"
                cause += (
                    f" (it asked to retry after {exc.retry_after:g} s, past {deadline})"
                    if exc.retry_after is not None
                    else f" (no time left for a retry within {deadline})"
                )
            if attempts > 1:
                cause += f" ({attempts} attempts)"
            log.warning("generator %r failed after %.0f ms: %s", self.name, (time.monotonic() - start) * 1000, cause)
            raise GenerationError(self.name, cause, exc.timeout) from None


def guard_of(work: Any) -> Guard | None:
    """The :class:`Guard` of the backend that ``work`` calls: a generator's own, a listwise reranker's model's
    (``chat``), an LLM judge's (whose ``complete`` is a generator's); None when it calls none."""
    for holder in (work, getattr(work, "chat", None), getattr(getattr(work, "complete", None), "__self__", None)):
        guard = getattr(holder, "guard", None)
        if isinstance(guard, Guard):
            return guard
    return None


@dataclass
class ApiGenerator:
    """What every backend behind a remote API shares: its config, a :class:`Guard`, an API key named by an
    environment variable (a secret: see :mod:`ragnarok.runtime.redact`), and one client made on first use
    (``_make_client``, under a lock)."""

    config: GeneratorConfig
    _client: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.config.name
        self.guard = Guard.of(self.config)
        register_env(self.config.api_key_env)

    def availability(self) -> str | None:
        """None when usable now, else why not."""
        env = self.config.api_key_env
        return f"{env} is not set" if env and not os.environ.get(env) else None

    def api_key(self, default: str = "") -> str:
        env = self.config.api_key_env
        key = os.environ.get(env, "") if env else default
        register_value(key)
        return key

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                if reason := self.availability():
                    raise GeneratorUnavailable(f"generator {self.name!r} is unavailable: {reason}")
                self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        raise NotImplementedError
