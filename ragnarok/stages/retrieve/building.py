"""Dense indexes built in the background while the service already answers (``ragnarok serve``).

The R service answers BM25 as soon as the Lucene index exists; the dense index of a model beside it is encoded
by a :class:`DenseBuild` in a thread of the server. Until it is there, ``GET /v1/retrievers`` lists the dense
retriever as ``building`` with its progress (segments done of the total, percent, ETA) and a request for it
answers 503 "building, N % done" with ``Retry-After`` (:class:`IndexBuilding`); the log shows tqdm's bar (total
and ETA). Shutdown cancels the build within one encoder batch (the build's cancel token is one of the server's
in-flight tokens). The build writes into a temporary directory that is renamed into place only when complete,
so a build that is stopped or killed never leaves an index that looks complete; what a killed build left beside
it is removed by the next one (:func:`ragnarok.stages.retrieve.dense_ensure.remove_abandoned`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragnarok.runtime import metrics
from ragnarok.runtime.activity import REQUESTS, Activity
from ragnarok.runtime.cancel import Cancelled, CancelToken, InFlight
from ragnarok.runtime.quoting import shorten
from ragnarok.stages.retrieve.dense import DenseIndexNotFoundError, rebuild_command

log = logging.getLogger(__name__)
#: A background build's next step waits until no request has come for this long (seconds) ...
QUIET_S = 0.5
#: ... but at most this long per step.
GIVE_WAY_S = 30.0
Status = Literal["queued", "building", "done", "failed", "stopped"]


class IndexBuilding(RuntimeError):
    """The index a request needs is being built: answered 503 with ``Retry-After`` (seconds)."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Progress:
    """A build's progress: ``done`` of ``total`` segments encoded (``total`` None until it is counted)."""

    done: int
    total: int | None
    elapsed_s: float
    eta_s: float | None  # None until two batches have been timed

    @property
    def percent(self) -> float:
        return round(100.0 * self.done / self.total, 1) if self.total else 0.0

    def describe(self) -> str:
        """``building, 42 % done (2,650 of 6,282 segments, about 2 min left)``."""
        counted = f"{self.done:,} of {self.total:,} segments" if self.total else "counting segments"
        left = f", about {_duration(self.eta_s)} left" if self.eta_s is not None else ""
        return f"building, {int(self.percent)} % done ({counted}{left})"


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds))} s" if seconds < 90 else f"{round(seconds / 60)} min"


class DenseBuild:
    """The background build of the dense index of ``model`` beside the Lucene index at ``lucene_dir``.

    ``batch_size`` segments are read, encoded and added per step (progress is reported per step); ``pause_s``
    is slept after each step, leaving the CPU to requests (and making a build slow enough to watch in tests).
    Between steps it gives way to requests (``activity``: the server's, :mod:`ragnarok.runtime.activity`): it waits
    until none has come for :data:`QUIET_S`, but at most ``give_way_s`` per step, so a server that is never
    quiet still gets its dense index (a step is about 2 s of encoding on two cores: ~7 % of the time then).
    """

    def __init__(
        self,
        lucene_dir: Path,
        model: str = "minilm",
        kind: str = "flat",
        batch_size: int = 64,
        pause_s: float = 0.0,
        activity: Activity | None = None,
        give_way_s: float = GIVE_WAY_S,
    ):
        self.lucene_dir, self.model, self.kind = Path(lucene_dir), model, kind
        self.batch_size, self.pause_s = batch_size, pause_s
        self.activity, self.give_way_s = activity or REQUESTS, give_way_s
        self.gave_way_s = 0.0  # seconds spent waiting for requests to stop, in all
        self.status: Status = "queued"
        self.why = ""  # why it is (re)built: "missing" or why the one there is stale
        self.error = ""  # why it failed or stopped
        self._done: int = 0
        self._total: int | None = None
        self._started = time.monotonic()
        self._first: tuple[float, int] | None = None  # (time, done) at the first finished batch: the ETA's base
        self._token: CancelToken | None = None
        self._stopping = threading.Event()  # stop() was called (perhaps before the thread had its token)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def building(self) -> bool:
        return self.status in ("queued", "building")

    def start(self, inflight: InFlight | None = None) -> bool:
        """Start building in a thread, unless the index is up to date (then it is ``done`` at once; two small
        files are read here, nothing else). Returns whether a build started."""
        from ragnarok.stages.retrieve.dense_ensure import dense_build_reason  # noqa: PLC0415

        reason = dense_build_reason(self.lucene_dir, self.model, self.kind)
        if reason is None:
            self.status = "done"
            return False
        self.why, self.status, self._started = reason, "building", time.monotonic()
        self._thread = threading.Thread(
            target=self._run, args=(inflight or InFlight(),), daemon=True, name=f"dense build {self.model}"
        )
        self._thread.start()
        return True

    def _run(self, inflight: InFlight) -> None:
        from ragnarok.stages.retrieve.dense_ensure import ensure_dense_index  # noqa: PLC0415

        log.warning(
            "building the dense index of %s for %s in the background (%s); BM25 answers meanwhile",
            self.model,
            self.lucene_dir,
            self.why,
        )
        with inflight.token() as token:
            self._token = token
            try:
                self._check()  # stopped before it began
                token.run(
                    lambda: ensure_dense_index(
                        self.lucene_dir, self.model, self.kind, batch_size=self.batch_size, progress=self._progress
                    )
                )
            except Cancelled as exc:
                self.status, self.error = "stopped", str(exc)
                log.warning("the dense index build of %s stopped: %s", self.model, exc)
            except Exception as exc:  # noqa: BLE001 - reported by GET /v1/retrievers and the log
                first_line = (str(exc).strip().splitlines() or [""])[0]  # a Java exception carries its stack
                self.status, self.error = "failed", shorten(f"{type(exc).__name__}: {first_line}", 300)
                log.exception("the dense index build of %s failed", self.model)
            else:
                self.status = "done"
                log.warning("the dense index of %s is ready (%.0f s)", self.model, time.monotonic() - self._started)

    def _progress(self, done: int, total: int) -> None:
        """Called by the build after each batch (in its thread): records the progress, pauses, and stops
        there when cancelled."""
        now = time.monotonic()
        with self._lock:
            self._done, self._total = done, total
            if done > 0 and self._first is None:
                self._first = (now, done)
        metrics.dense_progress(self.lucene_dir.name, self.model, done, total)
        if done > 0 and done < total and self.pause_s > 0:
            until = now + self.pause_s
            while (left := until - time.monotonic()) > 0:
                self._check()
                time.sleep(min(0.1, left))
        if done < total:
            self._give_way()
        self._check()

    def _give_way(self) -> None:
        """Wait while requests come (none for :data:`QUIET_S`), at most ``give_way_s``."""
        start = time.monotonic()
        while (quiet := self.activity.quiet_s()) < QUIET_S and (left := start + self.give_way_s - time.monotonic()) > 0:
            self._check()
            time.sleep(min(0.1, QUIET_S - quiet, left))
        self.gave_way_s += time.monotonic() - start

    def _check(self) -> None:
        if self._stopping.is_set():
            raise Cancelled("the server is shutting down")
        if self._token is not None:
            self._token.check()

    def progress(self) -> Progress:
        now = time.monotonic()
        with self._lock:
            done, total, first = self._done, self._total, self._first
        eta = None
        if first is not None and total and done > first[1] and now > first[0]:
            eta = (total - done) * (now - first[0]) / (done - first[1])
        return Progress(done, total, round(now - self._started, 1), None if eta is None else round(eta, 1))

    def check(self) -> None:
        """Raise :class:`IndexBuilding` while building (503, Retry-After: the ETA, 1..60 s), or
        :class:`DenseIndexNotFoundError` (503) when the build failed or was stopped; nothing once done."""
        if self.building:
            progress = self.progress()
            retry = int(min(60, max(1, progress.eta_s if progress.eta_s is not None else 10)))
            raise IndexBuilding(
                f"the dense index of {self.model} for {self.lucene_dir} is {progress.describe()}; "
                f"BM25 retrievers answer now",
                retry,
            )
        if self.status in ("failed", "stopped") and not self.built_since():
            raise DenseIndexNotFoundError(
                f"the background build of the dense index of {self.model} for {self.lucene_dir} "
                f"{self.status}: {self.error}; build it with `{rebuild_command(self.lucene_dir, self.model, self.kind)}`"
            )

    def built_since(self) -> bool:
        """After a failed or stopped build: whether the index is there and up to date now (built by `ragnarok
        index --dense`, say); if so the build counts as done."""
        from ragnarok.stages.retrieve.dense_ensure import dense_build_reason  # noqa: PLC0415

        if self.status in ("failed", "stopped") and dense_build_reason(self.lucene_dir, self.model, self.kind) is None:
            self.status, self.error = "done", ""
        return self.status == "done"

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the build to end (without stopping it); returns whether it has."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    def stop(self, timeout_s: float) -> bool:
        """Cancel the build (it stops within one encoder batch and removes its temporary directory) and wait
        for it up to ``timeout_s``; returns whether it has stopped."""
        self._stopping.set()
        if self._token is not None:
            self._token.cancel(Cancelled, "the server is shutting down")
        return self.wait(timeout_s)


class DenseBuilds:
    """The background builds of a service, by (Lucene index directory, model); started and stopped with it."""

    def __init__(self) -> None:
        self._builds: dict[tuple[str, str], DenseBuild] = {}

    def add(self, build: DenseBuild) -> DenseBuild:
        return self._builds.setdefault((str(build.lucene_dir), build.model), build)

    def get(self, source: str, model: str) -> DenseBuild | None:
        return self._builds.get((str(Path(source)), model))

    def models(self, source: str) -> list[str]:
        """The models with a build (running or finished) for the Lucene index at ``source``."""
        return [model for (lucene, model) in self._builds if lucene == str(Path(source))]

    def start_all(self, inflight: InFlight | None = None) -> None:
        for build in self._builds.values():
            if build.status == "queued":
                build.start(inflight)

    def stop_all(self, timeout_s: float) -> bool:
        """Stop every build, waiting at most ``timeout_s`` in all; returns whether all have stopped."""
        deadline = time.monotonic() + timeout_s
        stopped = [build.stop(max(0.0, deadline - time.monotonic())) for build in self._builds.values()]
        return all(stopped)  # every build asked to stop, not only up to the first that is still running
