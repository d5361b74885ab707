"""Pipelines paused after their backend failed, so that blinded battles do not draw them (pure, in memory).

A side whose backend failed or ran out of time pauses its pipeline for ``FIRST_PAUSE_S`` (5 min), doubled on
each further failure up to ``MAX_PAUSE_S`` (15 min); an answer ends the pause and resets the backoff.
:func:`ragnarok.arena.pool.pick_pair` leaves paused pipelines out while at least two others remain.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

FIRST_PAUSE_S = 300.0
MAX_PAUSE_S = 900.0


def backend_failed(error: str) -> bool:
    """Whether a side's error says its backend failed (a 5xx, a time-out, the service unreachable) rather than
    the request being refused (a 4xx: the topic, the budget or a rate limit, which say nothing of the backend)."""
    return error.startswith(("HTTP 5", "timed out", "cannot reach"))


class PauseBook:
    """Per spec: consecutive failures and until when it is paused, by ``clock`` (monotonic seconds)."""

    def __init__(
        self, first_s: float = FIRST_PAUSE_S, max_s: float = MAX_PAUSE_S, clock: Callable[[], float] = time.monotonic
    ):
        self.first_s, self.max_s, self.clock = first_s, max_s, clock
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def record(self, spec: str, failed: bool) -> None:
        """A side's outcome: a failure pauses ``spec`` (twice as long as its last pause), an answer resumes it."""
        with self._lock:
            if not failed:
                self._failures.pop(spec, None)
                self._until.pop(spec, None)
                return
            failures = self._failures.get(spec, 0) + 1
            self._failures[spec] = failures
            self._until[spec] = self.clock() + min(self.max_s, self.first_s * 2 ** (failures - 1))

    def paused(self) -> dict[str, float]:
        """The specs paused now, with the seconds each has left."""
        now = self.clock()
        with self._lock:
            return {spec: until - now for spec, until in self._until.items() if until > now}
