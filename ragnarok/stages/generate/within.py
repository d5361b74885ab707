"""Work in a worker thread, waited for at most a deadline: a thread cannot be interrupted, so at the deadline the
waiter leaves and the thread ends on its own; what the work holds (a backend's slot) is given back once, by
whichever of the two ends last."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class NotInTime(Exception):
    """The work did not end within the deadline (it may still be running: it gives back what it holds)."""


async def within(fn: Callable[[], T], seconds: float, limiter: anyio.CapacityLimiter, release: Callable[[], None]) -> T:
    """``fn()`` in one of ``limiter``'s worker threads, waited for at most ``seconds`` (then :class:`NotInTime`,
    at once); ``release()`` is called once, when the wait is over and ``fn`` has ended or will never start.
    A cancellation of the waiter (a client gone) leaves the thread the same way."""
    lock, state = threading.Lock(), {"started": False, "ended": False, "left": False}

    def work() -> T:
        with lock:
            if state["left"]:  # given up on before it started: it never runs
                raise NotInTime
            state["started"] = True
        try:
            return fn()
        finally:
            with lock:
                state["ended"] = True
                if state["left"]:  # nobody waits for it any more: it gives back what it holds itself
                    release()

    try:
        with anyio.move_on_after(max(0.0, seconds)):
            return await anyio.to_thread.run_sync(work, limiter=limiter, abandon_on_cancel=True)
    finally:
        with lock:
            state["left"] = True
            if state["ended"] or not state["started"]:
                release()
    raise NotInTime
