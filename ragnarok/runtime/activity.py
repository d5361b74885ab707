"""Whether the server is answering requests now, so that background work gives way.

``ragnarok serve``'s request middleware (:class:`api.observability.RequestMetrics`) calls :meth:`Activity.begin`
and :meth:`Activity.end` around every HTTP request; the background dense build (:mod:`ragnarok.stages.retrieve.building`)
asks :meth:`Activity.quiet_s` between its encoder batches and waits while requests come, so retrieval runs at
its full rate first. One process-wide instance, :data:`REQUESTS`; nothing is read or started at import.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Activity:
    """Requests in flight and when the last one ended (monotonic clock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._last = -math.inf

    def begin(self) -> None:
        with self._lock:
            self._active += 1

    def end(self) -> None:
        with self._lock:
            self._active = max(0, self._active - 1)
            self._last = time.monotonic()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Work done in this process outside an HTTP request (the arena's battles, which Gradio's queue runs,
        call the API in process): background builds give way to it as to a request."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def quiet_s(self) -> float:
        """Seconds since the last request ended; 0 while one is in flight (``inf`` before any)."""
        with self._lock:
            return 0.0 if self._active else time.monotonic() - self._last


def is_work(method: str, path: str) -> bool:
    """Whether a request is work background builds give way to: every POST (searches, answers, reranking,
    judging, the arena's battles) and Anserini's ``GET /v1/{index}/search``; not health checks, listings,
    metrics or pages (a client polling ``GET /v1/retrievers`` for a build's progress must not stop it)."""
    return method == "POST" or (path.startswith("/v1/") and path.endswith("/search"))


#: The process's requests (``ragnarok serve``: every HTTP request; a call made in process during one is not one).
REQUESTS = Activity()
