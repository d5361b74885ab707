"""Choosing the judge (``--judge NAME``, the ``judge`` setting, or the proxy) and running judgments
concurrently with a progress bar; a backend failure stops the work with what was judged already cached."""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Protocol, TypeVar

from tqdm import tqdm

from ragnarok.core.settings import Settings
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.llm import JudgeStats, LLMJudge
from ragnarok.judge.nuggets import Nugget
from ragnarok.judge.proxy import ProxyJudge

if TYPE_CHECKING:
    from ragnarok.stages.generate.service import GenerationService

T = TypeVar("T")
R = TypeVar("R")
PROXY = "proxy"


class Judge(Protocol):
    proxy: bool
    name: str
    stats: JudgeStats

    def describe(self) -> str: ...
    def assign(self, query: str, passage: str, nuggets: Sequence[str]) -> list[str | None]: ...
    def support(self, sentence: str, passage: str) -> str | None: ...
    def relevance(self, query: str, passage: str, mode: str = ...) -> int | None: ...
    def prefer(self, query: str, answer_a: str, answer_b: str) -> str | None: ...
    def create(self, query: str, segments: Sequence[str], max_nuggets: int = ...) -> list[Nugget]: ...
    def geval(self, query: str, answer: str) -> dict[str, int | None]: ...


class JudgeFailed(RuntimeError):
    """The judge's backend failed (unavailable, timed out, errors): the judgments made so far are kept."""


def cache_path(settings: Settings):  # type: ignore[no-untyped-def]
    return settings.data_dir / "judgments.db"


def make_judge(
    settings: Settings,
    name: str | None,
    generation: GenerationService | None = None,
    cache: JudgeCache | None = None,
    retry_failed: bool = False,
) -> Judge:
    """The named generator as judge; no name and no ``judge`` setting (or ``proxy``): the proxy judge.
    ``generation`` and ``cache``: the service's generators and judgment cache, reused (the API's); by
    default new ones (both judges cache every judgment). ``retry_failed``: judgments cached as unreadable
    are asked again."""
    name = name or settings.judge
    if not name or name == PROXY:
        nli = None
        if settings.judge_nli_model:  # loaded (offline) now, once per process: a model not here fails at start
            from ragnarok.judge.nli import load_nli  # noqa: PLC0415 - torch, only where a model is configured

            nli = load_nli(settings.judge_nli_model)
        return ProxyJudge(cache or JudgeCache(cache_path(settings)), nli)
    from ragnarok.stages.generate.base import GeneratorUnavailable  # noqa: PLC0415 - not for the proxy judge
    from ragnarok.stages.generate.service import GenerationService  # noqa: PLC0415

    generator = (generation or GenerationService(settings)).get(name)  # UnknownComponentError: the known ones
    complete = getattr(generator, "complete", None)
    if complete is None:
        raise ValueError(
            f"generator {name!r} is not an LLM and cannot judge (use an LLM generator, or "
            f"'{PROXY}' for the proxy judge)"
        )
    if reason := generator.availability():
        raise GeneratorUnavailable(f"judge {name!r} is unavailable: {reason}")
    config = settings.generator_configs()[name]
    return LLMJudge(
        f"{name}:{config.backend}:{config.model}",
        complete,
        cache or JudgeCache(cache_path(settings)),
        retry_failed=retry_failed,
    )


class Watched:
    """A judge whose every judgment first checks the current cancel token (:func:`ragnarok.runtime.cancel.check`),
    so work under a deadline stops between judgments (each LLM call has its backend's own deadline)."""

    def __init__(self, judge: Judge):
        self.judge = judge
        self.proxy, self.name, self.stats = judge.proxy, judge.name, judge.stats

    def describe(self) -> str:
        return self.judge.describe()

    def __getattr__(self, task: str) -> Callable[..., object]:
        from ragnarok.runtime.cancel import check

        method = getattr(self.judge, task)

        def watched(*args: object, **kwargs: object) -> object:
            check()
            return method(*args, **kwargs)

        return watched


class _OneFailureLine(logging.Filter):
    """Drops the generators' own "failed after" warnings from the threads judging: the first failure is
    reported once, as :class:`JudgeFailed`, not once per judgment that was in flight (other threads, such as
    the API's other requests, still log theirs)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.thread in self.threads and str(record.msg).startswith("generator %r failed after"))


def run_all(
    items: Sequence[T], work: Callable[[T], R], concurrency: int, desc: str, judge: Judge, progress: bool | None = None
) -> list[R]:
    """``work`` over ``items`` in ``concurrency`` threads, results in order. The first backend failure
    cancels what has not started (a judgment that was queued does not start) and is raised as
    :class:`JudgeFailed` -- one error, not one per judgment in flight."""
    from ragnarok.stages.generate.base import GenerationError, GeneratorUnavailable

    bar = tqdm(
        total=len(items),
        desc=desc,
        file=sys.stderr,
        disable=not (progress if progress is not None else sys.stderr.isatty()),
    )
    results: dict[int, R] = {}
    stopped = threading.Event()

    quiet = _OneFailureLine()

    def guarded(item: T) -> R | None:
        quiet.threads.add(threading.get_ident())
        return None if stopped.is_set() else work(item)

    logger = logging.getLogger("ragnarok.stages.generate.base")
    logger.addFilter(quiet)
    try:
        return _run(
            items,
            guarded,
            concurrency,
            judge,
            bar,
            results,
            stopped,  # type: ignore[arg-type]
            (GenerationError, GeneratorUnavailable),
        )
    finally:
        logger.removeFilter(quiet)


def _run(items, work, concurrency, judge, bar, results, stopped, backend_errors):  # type: ignore[no-untyped-def]
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        # each in a copy of this context: a request's spend meter and principal reach every judgment
        futures = {pool.submit(contextvars.copy_context().run, work, item): i for i, item in enumerate(items)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                bar.update(1)
                if (exc := future.exception()) is not None:
                    stopped.set()
                    for other in pending:
                        other.cancel()
                    bar.close()
                    if isinstance(exc, backend_errors):
                        raise JudgeFailed(
                            f"{judge.describe()} failed: {exc}; the {judge.stats.judged} "
                            f"judgments made so far are cached: run again to resume"
                        ) from None
                    raise exc
                results[futures[future]] = future.result()
    bar.close()
    return [results[i] for i in range(len(items))]
