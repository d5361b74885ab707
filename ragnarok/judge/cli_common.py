"""What the judging commands (``ragnarok judge ...``, ``ragnarok eval-rag``) share: their options, the judge
they make (named on stderr), what an interrupt says was kept, and where topics, qrels and segments come from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragnarok.core.settings import Settings
from ragnarok.runtime import cli_output

JudgeOpt = Annotated[
    str | None,
    typer.Option(
        "--judge",
        help="A configured LLM generator as judge (e.g. "
        "gpt-4o, a vLLM or llama.cpp server); 'proxy' or unset: the "
        "proxy judge (no LLM).",
    ),
]
Concurrency = Annotated[int, typer.Option(min=1, max=64, help="Judgments in flight.")]
RetryFailed = Annotated[
    bool,
    typer.Option(
        "--retry-failed",
        help="Ask again the judgments cached as failed "
        "(the judge's answer was unreadable); by "
        "default they are read back as failed.",
    ),
]
IndexOpt = Annotated[str | None, typer.Option(help="Index (name or Lucene directory) holding the segments.")]


def chosen_judge(settings: Settings, name: str | None, retry_failed: bool = False):  # type: ignore[no-untyped-def]
    from ragnarok.judge.service import make_judge

    judge = make_judge(settings, name, retry_failed=retry_failed)
    _judging[:] = [(judge, settings)]
    proxy = judge.proxy and not (name or settings.judge)
    typer.echo(
        f"judge: {judge.describe()}" + ("  [no --judge and no judge configured: scores are a PROXY]" if proxy else ""),
        err=True,
    )
    if proxy:
        cli_output.warn("no --judge and no judge configured: scores are a PROXY", echo=False)
    return judge


_judging: list = []  # (judge, settings) of the command running: what an interrupt says was kept


def interrupted() -> str:
    """What an interrupted judging command kept (every judgment is committed as it is made) and how to resume."""
    if not _judging:
        return "no judgment was made yet; run the same command again"
    from ragnarok.judge.service import cache_path

    judge, settings = _judging[0]
    made = judge.stats.judged - judge.stats.cached
    return (
        f"{made} new judgments cached in {cache_path(settings)}; run the same command again to resume "
        "(cached judgments are not asked again)"
    )


def index_dir(settings: Settings, index: str | None) -> str:
    if index and Path(index).is_dir():
        return index
    name = index or settings.default_index
    sources = settings.index_sources()
    if name not in sources:
        raise LookupError(f"unknown index {name!r} (configured: {', '.join(sorted(sources))})")
    if name == "demo" and settings.demo_is_embedded():
        from ragnarok.collection.demo_index import ensure_demo_index

        ensure_demo_index(settings)
    return sources[name]


def topic_texts(source: str | None, settings: Settings) -> dict[str, str]:
    if source is None:
        return {}
    from ragnarok.core.topic_sets import resolve_topics

    return {t.qid: t.text for t in resolve_topics(source, settings)}


def qrels_of(source: str, settings: Settings):  # type: ignore[no-untyped-def]
    """The judgments of a qrels file or set name (``demo``, ``rag24``: :mod:`ragnarok.core.topic_sets`)."""
    from ragnarok.core.evaluation import read_qrels
    from ragnarok.core.topic_sets import qrels_path

    return read_qrels(qrels_path(source, settings))


def report_stats(judge) -> None:  # type: ignore[no-untyped-def]
    typer.echo(f"{judge.describe()}: {judge.stats}", err=True)
