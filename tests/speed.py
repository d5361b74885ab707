"""How slow this machine is right now, for tests that must wait for real work (a model answering, a server
starting): their deadlines are scaled by :func:`slowdown` rather than fixed, so a busy machine (load 10-30 on a
few cores) does not fail them, and an idle one does not wait longer than before.

:func:`slowdown` times a fixed pure-Python task (the median of a few runs, about 50 ms in all on an idle
machine) and divides by what it takes on an idle reference machine; at least 1, at most ``MAX_SLOWDOWN``.
``RAGNAROK_TEST_SLOWDOWN`` sets the factor instead (e.g. on a machine known to be slow)."""

from __future__ import annotations

import os
import statistics
import time

REFERENCE_S = 0.010  # the task below on an idle reference machine (one core of a 2024 x86 server)
MAX_SLOWDOWN = 20.0


def _task() -> float:
    start = time.perf_counter()
    x = 0
    for i in range(200_000):
        x += i * i % 7
    return time.perf_counter() - start


def slowdown(samples: int = 5) -> float:
    """How many times slower than the reference machine this one runs a fixed CPU task now (1 .. 20)."""
    if forced := os.environ.get("RAGNAROK_TEST_SLOWDOWN"):
        return max(1.0, float(forced))
    measured = statistics.median(_task() for _ in range(samples))
    return min(MAX_SLOWDOWN, max(1.0, measured / REFERENCE_S))


def scaled(seconds: float, factor: float | None = None) -> float:
    """A deadline of ``seconds`` on the reference machine, scaled to this one's speed now."""
    return seconds * (slowdown() if factor is None else factor)
