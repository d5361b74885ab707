"""What one request spends on backends: LLM calls (every HTTP attempt, retries included) and tokens (from the
backends' ``usage``), counted where every backend call goes through (:meth:`ragnarok.stages.generate.base.Guard.call`)
into the :class:`Meter` of the request in progress, a context variable shared with the work the request
starts (worker threads copy the context; in-process stage calls run in it).

A meter has a ``limit``: the calls reserved for the request from its worst case before it ran. A call past it
is refused before it is made (:class:`CallLimitReached`), so a wrong estimate can stop a request but never
spend more than was reserved.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ragnarok.runtime import metrics


class CallLimitReached(RuntimeError):
    """A backend call past the calls reserved for the request."""


class CallNotRecorded(RuntimeError):
    """A backend call whose spend could not be written down first (the service database is away): not made."""


@dataclass
class Meter:
    limit: int | None = None  # calls at most (None: unbounded)
    token_limit: int | None = None  # tokens at most; checked before each call (one call may pass it)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generators: dict[str, int] = field(default_factory=dict)  # calls per generator
    reserved: bool = False  # the route reserved the request's worst case (a nested request reserves nothing)
    reservation: Any = None  # the budget's reservation (ragnarok.auth.reservations.Reservation), settled at the end
    # writes one call into the reservation before it is made (api/store_call.py); raises CallNotRecorded
    record: Callable[[], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def take_call(self, generator: str) -> None:
        """Count one backend call about to be made, or raise :class:`CallLimitReached`."""
        with self._lock:
            if self.limit is not None and self.calls >= self.limit:
                raise CallLimitReached(f"the request's {self.limit} backend call(s) are spent")
            if self.token_limit is not None and self.tokens >= self.token_limit:
                raise CallLimitReached(f"the key's token budget ({self.token_limit:,}) is spent")
            if self.record is not None:
                self.record()  # on disk before the call: a process killed after it cannot lose it
            self.calls += 1
            self.generators[generator] = self.generators.get(generator, 0) + 1

    def close(self) -> tuple[int, int]:
        """Refuse every later call (the spend is being settled): the calls and tokens spent until now."""
        with self._lock:
            self.limit = self.calls
            return self.calls, self.tokens

    def add_tokens(self, prompt: int, completion: int) -> None:
        with self._lock:
            self.prompt_tokens += max(0, int(prompt))
            self.completion_tokens += max(0, int(completion))

    def headers(self) -> list[tuple[bytes, bytes]]:
        """``Ragnarok-Backend-Calls``, ``Ragnarok-Prompt-Tokens``, ``Ragnarok-Completion-Tokens``."""
        return [
            (b"ragnarok-backend-calls", str(self.calls).encode()),
            (b"ragnarok-prompt-tokens", str(self.prompt_tokens).encode()),
            (b"ragnarok-completion-tokens", str(self.completion_tokens).encode()),
        ]


_current: ContextVar[Meter | None] = ContextVar("ragnarok_meter", default=None)
#: The generator whose backend call is in progress (set by the Guard): the tokens reported are counted for it.
_generator: ContextVar[str | None] = ContextVar("ragnarok_calling_generator", default=None)


@contextmanager
def calling(generator: str) -> Iterator[None]:
    token = _generator.set(generator)
    try:
        yield
    finally:
        _generator.reset(token)


def current() -> Meter | None:
    return _current.get()


@contextmanager
def metering(meter: Meter) -> Iterator[Meter]:
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def take_call(generator: str) -> None:
    if (meter := _current.get()) is not None:
        meter.take_call(generator)


def add_tokens(prompt: int, completion: int) -> None:
    """Count tokens in the request's meter (if any) and in the metrics, for the generator being called."""
    metrics.tokens(_generator.get(), max(0, int(prompt)), max(0, int(completion)))
    if (meter := _current.get()) is not None:
        meter.add_tokens(prompt, completion)


def add_usage(usage: object) -> None:
    """Record a backend's ``usage`` (OpenAI/llama.cpp ``prompt_tokens``/``completion_tokens``, Cohere v2
    ``tokens.input_tokens``/``output_tokens`` or ``billed_units``) in the current meter and the metrics;
    anything else is ignored."""
    if not isinstance(usage, dict):
        return
    for source in (usage, usage.get("tokens"), usage.get("billed_units")):
        if not isinstance(source, dict):
            continue
        prompt = source.get("prompt_tokens", source.get("input_tokens"))
        completion = source.get("completion_tokens", source.get("output_tokens"))
        if isinstance(prompt, (int, float)) or isinstance(completion, (int, float)):
            add_tokens(
                prompt if isinstance(prompt, (int, float)) else 0,
                completion if isinstance(completion, (int, float)) else 0,
            )
            return
