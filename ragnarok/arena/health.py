"""Pipelines paused after their backend failed, so that blinded battles do not draw them (pure, in memory).

A side whose backend failed or ran out of time pauses its pipeline for ``FIRST_PAUSE_S`` (5 min), doubled on
each further failure up to ``MAX_PAUSE_S`` (15 min); an answer ends the pause and resets the backoff.
:func:`ragnarok.arena.pool.pick_pair` leaves paused pipelines out while at least two others remain.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ragnarok.arena.pool import LatencyBook, PipelineId

FIRST_PAUSE_S = 300.0
MAX_PAUSE_S = 900.0


def generator_key(generator: str) -> str:
    """The pause key of a generator: a generator that failed pauses every pipeline it answers for."""
    return f"generator:{generator}"


def generator_failed(error: str, generator: str) -> bool:
    """Whether a backend failure was the generator's own: the error names it, or the generate stage."""
    return f"generator '{generator}'" in error or f": {generator}:" in error or ": generate:" in error


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

    def record_side(self, spec: str, generator: str, error: str | None) -> None:
        """A battle side's outcome (``error`` None: it answered): a backend failure pauses its pipeline, and
        every pipeline of its generator when the generator itself failed; an answer resumes both."""
        if error is None or backend_failed(error):
            self.record(spec, failed=error is not None)
        if error is None or (backend_failed(error) and generator_failed(error, generator)):
            self.record(generator_key(generator), failed=error is not None)

    def paused_specs(self, pool: Sequence[PipelineId]) -> dict[str, float]:
        """The pool's pipelines paused now, by their own pause or their generator's, with the seconds left."""
        paused = self.paused()
        left = {p.spec: max(paused.get(p.spec, 0.0), paused.get(generator_key(p.generator), 0.0)) for p in pool}
        return {spec: seconds for spec, seconds in left.items() if seconds > 0}

    def failures(self) -> dict[str, int]:
        """The failures in a row of each spec that failed since its last answer."""
        with self._lock:
            return dict(self._failures)

    def paused(self) -> dict[str, float]:
        """The specs paused now, with the seconds each has left."""
        now = self.clock()
        with self._lock:
            return {spec: until - now for spec, until in self._until.items() if until > now}


def pool_status(
    pool: Sequence[PipelineId], pauses: PauseBook, latency: LatencyBook, serial: Collection[str]
) -> list[dict[str, Any]]:
    """What moderators see of the pool: each pipeline, whether battles draw it now or it is paused (for how many
    more seconds, after how many failures in a row), its median seconds, its recent misses of the time budget
    (missed, of how many), and whether its generator has one slot (``serial``)."""
    paused, failures = pauses.paused_specs(pool), pauses.failures()
    medians: Mapping[str, float] = latency.medians()
    misses = latency.misses()
    return [
        {
            **p.as_dict(),
            "state": "paused" if p.spec in paused else "drawn",
            "paused_s_left": round(paused[p.spec], 1) if p.spec in paused else None,
            "failures_in_a_row": max(failures.get(p.spec, 0), failures.get(generator_key(p.generator), 0)),
            "median_s": round(medians[p.spec], 3) if p.spec in medians else None,
            "recent_misses": list(misses[p.spec]) if p.spec in misses else None,
            "one_slot_generator": p.generator in serial,
        }
        for p in pool
    ]
