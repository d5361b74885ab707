"""Progress for long commands: a tqdm bar on a terminal, and lines otherwise.

A log file or a pipe gets no bar (its carriage returns make one line of every update) but one line per tenth
of the work and at most one every ``every_s`` seconds, each with the count, the time so far and an estimate of
the time left: ``running the pipeline: 20/50 topics, 12 s, about 18 s left``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class LineProgress:
    """tqdm's ``update``/``close``/context-manager surface, written as lines (see the module docstring)."""

    def __init__(
        self, total: int, desc: str, unit: str = "topic", every_s: float = 30.0, file: Any = None, initial: int = 0
    ):
        self.total, self.desc, self.unit, self.every_s = total, desc, unit, every_s
        self.file = file or sys.stderr
        self.n, self.start, self.last, self.step = initial, time.monotonic(), time.monotonic(), max(1, total // 10)
        self.initial = initial  # done before (a resumed run): not counted in the time per topic

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        tenth = self.n // self.step != (self.n - n) // self.step  # crossed a tenth of the work (any step size)
        if self.n >= self.total or tenth or now - self.last >= self.every_s:
            self.last = now
            elapsed = now - self.start
            done = self.n - self.initial
            left = elapsed / done * (self.total - self.n) if done else 0.0
            eta = f", about {left:.0f} s left" if self.n < self.total else ""
            print(f"{self.desc}: {self.n}/{self.total} {self.unit}s, {elapsed:.0f} s{eta}", file=self.file, flush=True)

    def close(self) -> None:
        pass

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int, desc: str, unit: str = "topic", initial: int = 0, file: Any = None) -> Any:
    """A bar on a terminal, lines otherwise, on ``file`` (default stderr); ``initial``: done before (a resumed
    run), not in the rate."""
    file = file or sys.stderr
    if file.isatty():
        from tqdm import tqdm  # noqa: PLC0415

        return tqdm(total=total, desc=desc, unit=unit, initial=initial, unit_scale=total >= 10_000, file=file)
    return LineProgress(total, desc, unit, initial=initial, file=file)


def progress_iter(items: Iterable[T], total: int, desc: str, unit: str = "topic") -> Iterator[T]:
    """``items`` with :func:`progress` advanced for each."""
    with progress(total, desc, unit) as bar:
        for item in items:
            yield item
            bar.update(1)
