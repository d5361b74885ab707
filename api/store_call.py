"""Calls into the service database from a request, each answered within ``STORE_DEADLINE_S`` whatever the database
does: a PostgreSQL that is frozen (SIGSTOP: its kernel still answers TCP, so no socket option notices) holds the
worker thread, not the request. The thread is left to finish on its own (a bounded pool of them: past it, calls
wait for a thread and time out the same way); what it got once the database answers is handed to ``undo`` (a
budget reserved for a request that was already refused is given back).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ragnarok.arena.db import STORE_DEADLINE_S, StoreBusy, StoreError, StoreTimeout
from ragnarok.core.meter import CallNotRecorded

log = logging.getLogger(__name__)
#: How often each instance settles the reservations of processes that died (ragnarok.auth.reservations).
SWEEP_S = 10.0

T = TypeVar("T")
#: What a 503 for an unavailable service database tells the caller to wait (seconds); a busy one: 1.
RETRY_AFTER_S = 5
_THREADS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="store")


def _then(undo: Callable[[Any], None]) -> Callable[[Future], None]:
    def done(future: Future) -> None:
        if not future.cancelled() and future.exception() is None:
            _THREADS.submit(undo, future.result())

    return done


async def store_call(
    fn: Callable[..., T], *args: Any, undo: Callable[[T], None] | None = None, deadline_s: float = STORE_DEADLINE_S
) -> T:
    """``fn(*args)`` in a store thread; :class:`~ragnarok.arena.db.StoreTimeout` past ``deadline_s``."""
    future = _THREADS.submit(functools.partial(fn, *args))
    try:
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), deadline_s)
    except TimeoutError:
        if undo is not None:
            future.add_done_callback(_then(undo))
        raise StoreTimeout(f"the service database did not answer within {deadline_s:g} s") from None
    except asyncio.CancelledError:  # the request went away meanwhile: what the call gets is not wanted either
        if undo is not None:
            future.add_done_callback(_then(undo))
        raise


def call_recorder(store: Any, reservation: Any) -> Callable[[], None]:
    """What a request's meter calls before each backend call: the call written into its reservation
    (:meth:`~ragnarok.auth.store.AuthStore.record_call`), or :class:`CallNotRecorded` and no call."""

    def record() -> None:
        try:
            store.record_call(reservation)
        except StoreError as exc:
            raise CallNotRecorded(
                f"the backend call was not made: its spend cannot be recorded now ({unavailable(exc)})"
            ) from None

    return record


async def sweep_forever(store: Any, every_s: float = SWEEP_S) -> None:
    """Every ``every_s``: settle the reservations of processes that died (their calls counted as spend)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            if settled := await store_call(store.sweep):
                log.warning("settled %d backend call(s) of requests whose process died", settled)
        except StoreError as exc:
            log.info("abandoned reservations not settled now: %s", exc)
        except Exception:  # noqa: BLE001 - a sweep that stops would leave every later death unsettled
            log.exception("the sweep of abandoned reservations failed; it runs again in %g s", every_s)


def unavailable(exc: StoreError) -> str:
    """Why the service database cannot answer, for a 503: busy (this process's connections all in use), or not
    answering (down, frozen)."""
    if isinstance(exc, StoreBusy):
        return "the service database is busy: try again in a second"
    if isinstance(exc, StoreTimeout):
        return "the service database did not answer in time"
    return "the service database is unavailable"


def retry_after(exc: StoreError) -> int:
    return 1 if isinstance(exc, StoreBusy) else RETRY_AFTER_S
