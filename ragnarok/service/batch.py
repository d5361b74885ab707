"""Running a pipeline over many topics, in process, through the same gateway code as ``POST /rag``.

Load is not a verdict: a topic whose stage times out or fails with a 5xx is retried (``retries`` times, waiting
``backoff_s``, then twice that, ...), and one that still fails is recorded (:class:`TopicFailure`) while the
other topics go on. A timeout (504, 429) halves the topics in flight (:class:`AdaptiveLimit`, never below 1).
Only a stage that refuses the pipeline itself (its 4xx: no topic can succeed) stops the whole batch
(:class:`PipelineRefused`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ragnarok.core.settings import Settings
from ragnarok.core.spec import Pipeline
from ragnarok.core.topics import Topic
from ragnarok.core.types import Query, RagAnswer, Request
from ragnarok.service.gateway import PipelineRunner, Services, StageError

Result = RagAnswer | Request
T = TypeVar("T")

#: Stage statuses that say "busy" rather than "wrong": the topic is retried and fewer run at once.
LOAD_STATUSES = (408, 429, 504)


class PipelineRefused(RuntimeError):
    """A stage refused the pipeline itself (its 4xx): no topic can succeed, so the batch stops."""


@dataclass(frozen=True)
class TopicFailure:
    """Why a topic has no result, in words: the stage, its status, the cause."""

    qid: str
    stage: str | None
    status: int | None
    cause: str

    def reason(self) -> str:
        where = f"stage {self.stage!r}" if self.stage else "the pipeline"
        status = f" answered {self.status}" if self.status is not None else " failed"
        return f"{where}{status}: {self.cause}"

    def __str__(self) -> str:
        return f"topic {self.qid} failed: {self.reason()}"


def _words(detail: Any, limit: int = 300) -> str:
    """A stage's error detail (a string, or the API's JSON: ``{"generator", "error", "message"}``,
    ``{"stage", "error"}``, a validation list) as one line of words, not a Python dict."""
    if isinstance(detail, dict):
        for key in ("message", "error", "detail"):
            if detail.get(key):
                return _words(detail[key], limit)
        text = "; ".join(f"{k}: {_words(v, limit)}" for k, v in detail.items())
    elif isinstance(detail, list):
        text = "; ".join(_words(d, limit) for d in detail[:3])
    else:
        text = str(detail) if isinstance(detail, str) else json.dumps(detail, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(qid: str, exc: BaseException) -> TopicFailure:
    """The failure of topic ``qid`` by ``exc``, readable on one line."""
    if isinstance(exc, StageError):
        return TopicFailure(qid, exc.stage, exc.status, _words(exc.detail) or "no detail")
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return TopicFailure(qid, None, 504, "timed out")
    return TopicFailure(qid, None, None, _words(f"{type(exc).__name__}: {exc}"))


def is_load(exc: BaseException) -> bool:
    """A timeout or "busy": says the machine is loaded, nothing about the topic."""
    if isinstance(exc, StageError):
        return exc.status in LOAD_STATUSES
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError))


def refusal(exc: StageError) -> PipelineRefused | None:
    """A stage's 4xx (but a timeout or "too many requests") as the refusal of the whole pipeline."""
    if 400 <= exc.status < 500 and exc.status not in LOAD_STATUSES:
        return PipelineRefused(describe("", exc).reason())
    return None


class AdaptiveLimit:
    """At most ``limit`` topics in flight; a timeout halves the limit (not below 1), and ``2 x limit``
    successes in a row raise it by one again, up to where it started (additive increase, multiplicative
    decrease). Only an attempt started since the last change can lower it: the attempts of one wave that time
    out together halve it once, not once each."""

    def __init__(self, limit: int, on_change: Callable[[int, int], None] | None = None):
        self.start = self.limit = max(1, limit)
        self.in_flight = 0
        self.epoch = 0  # bumped at every change of the limit
        self.streak = 0
        self.on_change = on_change
        self._ready: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._ready is None:
            self._ready = asyncio.Condition()
        return self._ready

    def _set(self, limit: int) -> None:
        old, self.limit = self.limit, limit
        self.epoch += 1
        self.streak = 0
        if limit != old and self.on_change is not None:
            self.on_change(old, limit)

    def overloaded(self, epoch: int) -> bool:
        """An attempt started at ``epoch`` timed out: halve the limit unless that wave already did."""
        if epoch != self.epoch:
            return False
        changed = self.limit > 1
        self._set(max(1, self.limit // 2))
        return changed

    def succeeded(self) -> None:
        self.streak += 1
        if self.limit < self.start and self.streak >= 2 * self.limit:
            self._set(self.limit + 1)

    async def acquire(self) -> int:
        """Wait for a slot; returns the epoch the attempt starts in."""
        ready = self._condition()
        async with ready:
            await ready.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            return self.epoch

    async def release(self, epoch: int, outcome: str) -> None:
        """``outcome``: ``ok``, ``load`` (a timeout: lower the limit) or anything else (a failure that says
        nothing about load)."""
        if outcome == "load":
            self.overloaded(epoch)
        elif outcome == "ok":
            self.succeeded()
        ready = self._condition()
        async with ready:
            self.in_flight -= 1
            ready.notify_all()


def _retryable(exc: BaseException) -> bool:
    return not isinstance(exc, (PipelineRefused, ValueError))


async def with_retries(
    call: Callable[[], Awaitable[T]], limit: AdaptiveLimit, retries: int = 2, backoff_s: float = 1.0
) -> T:
    """``call()`` in a slot of ``limit``, retried up to ``retries`` times (waiting ``backoff_s``, then twice
    that, ... out of the slot) while it fails with anything but a refusal; the last failure is raised."""
    for n in range(max(0, retries) + 1):
        epoch = await limit.acquire()
        outcome = "failed"
        try:
            result = await call()
            outcome = "ok"
            return result
        except Exception as exc:  # noqa: BLE001 - retried, or raised once the retries are spent
            if is_load(exc):
                outcome = "load"
            if n >= retries or not _retryable(exc):
                raise
        finally:
            await asyncio.shield(limit.release(epoch, outcome))
        await asyncio.sleep(backoff_s * 2**n)
    raise AssertionError("unreachable")  # pragma: no cover


def local_services(settings: Settings) -> tuple[Services, Any]:
    """Clients for R and AG: remote URLs from settings, else an app in this process."""
    from api.main import create_app  # noqa: PLC0415 - the API layer is only needed here
    from ragnarok.auth.principal import LOCAL  # noqa: PLC0415

    app = create_app(settings, arena=False, principal=LOCAL)  # the operator's own command: no keys, no bounds
    return app.state.services, app


async def run_topics(
    pipeline: Pipeline,
    topics: Sequence[Topic],
    settings: Settings,
    index: str | None = None,
    concurrency: int = 4,
    on_result: Callable[[Topic, Result], Awaitable[None] | None] | None = None,
    on_failure: Callable[[TopicFailure], None] | None = None,
    retries: int | None = None,
    backoff_s: float | None = None,
    on_limit: Callable[[int, int], None] | None = None,
    services: Services | None = None,
) -> dict[str, Result]:
    """Every topic through ``pipeline`` with at most ``concurrency`` in flight (fewer after timeouts);
    ``on_result`` sees each one as it finishes (to write it out at once). A topic that still fails after
    ``retries`` (default: ``settings.topic_retries``) is left out of the results and given to ``on_failure``;
    a refused pipeline raises :class:`PipelineRefused`. ``services``: the R and AG clients to call (default:
    :func:`local_services`, loaded for this call)."""
    if services is None:
        services, _app = local_services(settings)
    runner = PipelineRunner(services, index)
    limit = AdaptiveLimit(concurrency, on_limit)
    retries = settings.topic_retries if retries is None else retries
    backoff_s = settings.topic_backoff_s if backoff_s is None else backoff_s
    results: dict[str, Result] = {}

    async def attempt(topic: Topic) -> Result:
        try:
            return (await runner.run(pipeline, Query(text=topic.text, qid=topic.qid))).result
        except StageError as exc:
            if (refused := refusal(exc)) is not None:
                raise refused from None
            raise

    async def one(topic: Topic) -> None:
        try:
            result = await with_retries(lambda: attempt(topic), limit, retries, backoff_s)
        except PipelineRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded per topic; the others go on
            if on_failure is not None:
                on_failure(describe(topic.qid, exc))
            return
        results[topic.qid] = result
        if on_result is not None:
            maybe = on_result(topic, result)
            if asyncio.iscoroutine(maybe):
                await maybe

    tasks = [asyncio.create_task(one(t)) for t in topics]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return results
