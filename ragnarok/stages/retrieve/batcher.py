"""Concurrent searches of one Lucene searcher, run together on Java's threads instead of Python's.

A search holds the GIL while pyjnius turns its hits into Python objects, so concurrent request threads left
the process on about one core. A :class:`SearchBatcher` sends every query that arrived meanwhile to Anserini's
``batch_search`` in one call ("natural" batching: a lone query is searched at once).

Design notes: docs/internals/retrieve.md.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")
SearchOne = Callable[[str, int], Sequence[Any]]
SearchMany = Callable[[list[str], int], list[Sequence[Any]]]


@dataclass
class _Job(Generic[R]):
    text: str
    k: int
    finish: Callable[[Sequence[Any]], R]
    future: Future[R] = field(default_factory=Future)


@dataclass
class BatchStats:
    batches: int = 0  # Java calls made (one per k in a batch)
    queries: int = 0  # queries searched
    largest: int = 0  # the most queries in one Java call


class SearchBatcher:
    """Searches submitted from any thread, run in batches of at most ``max_batch`` queries."""

    def __init__(
        self,
        search_one: SearchOne,
        search_many: SearchMany,
        workers: int = 2,
        max_batch: int = 32,
        name: str = "search",
    ):
        if workers < 1 or max_batch < 1:
            raise ValueError("workers and max_batch must be at least 1")
        self.search_one, self.search_many = search_one, search_many
        self.workers, self.max_batch, self.name = workers, max_batch, name
        self.stats = BatchStats()
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, text: str, k: int, finish: Callable[[Sequence[Any]], R]) -> Future[R]:
        """A future of ``finish(hits)`` for the top ``k`` hits of ``text``."""
        job: _Job[R] = _Job(text, k, finish)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the {self.name} batcher is closed")
            if not self._threads:
                self._threads = [
                    threading.Thread(target=self._work, name=f"{self.name}-batcher-{n}", daemon=True)
                    for n in range(self.workers)
                ]
                for thread in self._threads:
                    thread.start()
            self._queue.put(job)
        return job.future

    def close(self) -> None:
        """Stop the workers once the jobs already submitted are done."""
        with self._lock:
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)

    def _take(self) -> list[_Job[Any]] | None:
        """The next batch: one job (waiting for it), then whatever else is queued, up to ``max_batch``."""
        first = self._queue.get()
        if first is None:
            return None
        jobs = [first]
        while len(jobs) < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:  # closing: let another worker see it after this batch
                self._queue.put(None)
                break
            jobs.append(job)
        return [job for job in jobs if job.future.set_running_or_notify_cancel()]

    def _work(self) -> None:
        while (jobs := self._take()) is not None:
            groups: dict[int, list[_Job[Any]]] = {}
            for job in jobs:
                groups.setdefault(job.k, []).append(job)
            for k, group in groups.items():
                self._run(k, group)

    def _run(self, k: int, group: list[_Job[Any]]) -> None:
        try:
            if len(group) == 1:
                results = [self.search_one(group[0].text, k)]
            else:
                results = self.search_many([job.text for job in group], k)
        except BaseException as exc:  # noqa: BLE001 - the callers get it, as if they had searched themselves
            for job in group:
                job.future.set_exception(exc)
            return
        with self._lock:
            self.stats.batches += 1
            self.stats.queries += len(group)
            self.stats.largest = max(self.stats.largest, len(group))
        for job, hits in zip(group, results, strict=True):
            try:
                job.future.set_result(job.finish(hits))
            except BaseException as exc:  # noqa: BLE001 - this job's failure is its caller's
                job.future.set_exception(exc)
