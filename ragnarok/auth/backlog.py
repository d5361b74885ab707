"""Writes that no request waits for, kept until the service database takes them: the audit log's rows, and the
spend of requests that ended while the database was unreachable.

A :class:`Backlog` writes what is queued in batches, in order, from one background thread. A batch that fails
because the database cannot be reached (refused, shut down, timed out: :func:`unreachable`) is retried with
a growing pause (at most :data:`MAX_PAUSE_S`) until the database is back, so an outage loses none of it; a
batch that fails otherwise is logged and dropped (it would never be written). At most ``most`` items wait: past
that the oldest are dropped, logged. Items still queued when the process exits are lost (the process never
waits for the database: :meth:`Backlog.flush` has a timeout), unless the backlog has a spool: then those that
waited for the database are on disk too, for another process to write (:mod:`ragnarok.auth.spool`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ragnarok.arena.db import describe

log = logging.getLogger(__name__)
#: The longest pause between two tries of a batch while the database is unreachable (seconds).
MAX_PAUSE_S = 1.0
BATCH = 500


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says the database could not be reached or did not answer in time (a
    pooled connection not free within the pool's timeout included)."""
    while exc is not None:
        if isinstance(exc, (OperationalError, InterfaceError, PoolTimeout)):
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


class Backlog:
    """Items written by ``write(batch)`` in a background thread named ``name`` (see the module's docstring)."""

    def __init__(
        self, name: str, write: Callable[[list[Any]], None], what: str, most: int = 100_000, spool: Any = None
    ):
        self.name, self.write, self.what, self.most = name, write, what, most
        self.spool = spool  # where the items that wait for the database are kept on disk too (ragnarok.auth.spool)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.waiting = 0  # items queued and not yet written (or dropped)
        self.degraded = False  # the last write found the database away (and there is a spool)

    def put(self, item: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self.waiting += 1
            degraded = self.degraded
        if degraded:  # the database is away: on disk at once, not at the next try (a kill -9 may come first)
            self.spool.add([item])
        self._queue.put(("item", item))

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (at most ``timeout_s``) until everything queued so far is written; whether it was."""
        done = threading.Event()
        self._queue.put(("flush", done))
        if self._thread is None or not self._thread.is_alive():
            return self.waiting == 0
        return done.wait(timeout_s)

    def _take(self, pending: deque[Any], flushes: list[threading.Event]) -> None:
        """Move what is queued into ``pending``: when nothing waits, block for the first item and gather what
        comes within 50 ms of it (up to a batch); else take what is there without waiting."""
        gather = not pending and not flushes
        if gather:
            self._keep(self._queue.get(), pending, flushes)
        while True:
            try:
                if gather and len(pending) < BATCH:
                    entry = self._queue.get(timeout=0.05)
                else:
                    entry = self._queue.get_nowait()
            except queue.Empty:
                break
            self._keep(entry, pending, flushes)
        while len(pending) > self.most:
            pending.popleft()
            with self._lock:
                self.waiting -= 1
            log.error("dropped one %s: more than %d wait for the database", self.what, self.most)

    @staticmethod
    def _keep(entry: tuple[str, Any], pending: deque[Any], flushes: list[threading.Event]) -> None:
        kind, item = entry
        (flushes if kind == "flush" else pending).append(item)

    def _run(self) -> None:
        pending: deque[Any] = deque()
        flushes: list[threading.Event] = []
        pause, spooled = 0.05, False
        while True:
            self._take(pending, flushes)
            if pending:
                batch = list(pending)[:BATCH]
                try:
                    self.write(batch)
                    if spooled:
                        self.spool.remove(batch)
                        spooled = len(pending) > len(batch)
                        with self._lock:
                            self.degraded = spooled
                except Exception as exc:  # noqa: BLE001 - a writer that stops would lose everything after
                    if unreachable(exc):
                        log.warning("%d %s(s) wait for the database: %s", len(pending), self.what, describe(exc))
                        if self.spool is not None:  # on disk too: a process killed now loses none of them
                            with self._lock:
                                self.degraded = True
                            self.spool.add(list(pending))
                            spooled = True
                        time.sleep(pause)
                        pause = min(MAX_PAUSE_S, pause * 2)
                        continue
                    log.error("could not write %d %s(s): %s", len(batch), self.what, describe(exc))
                pause = 0.05
                for _ in batch:
                    pending.popleft()
                with self._lock:
                    self.waiting -= len(batch)
            if not pending:
                for event in flushes:
                    event.set()
                flushes.clear()
