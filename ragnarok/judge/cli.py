"""``ragnarok judge nuggets | relevance | pairwise``: LLM (or proxy) judges making nuggets, relevance labels and
pairwise preferences (``eval-rag`` is :mod:`ragnarok.judge.eval_rag_cli`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from ragnarok.core.settings import Settings, get_settings
from ragnarok.judge.cli_common import (
    Concurrency,
    IndexOpt,
    JudgeOpt,
    RetryFailed,
    chosen_judge,
    index_dir,
    interrupted,
    qrels_of,
    report_stats,
    topic_texts,
)
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputFormatOpt
from ragnarok.runtime.interrupt import stops_on_signals

__all__ = ["index_dir", "judge_app"]  # index_dir: where the viewer and the notebook API read segments from

judge_app = typer.Typer(
    no_args_is_help=True,
    help="LLM (or proxy) judges: nuggets, relevance labels, pairwise preferences. Every judgment is cached.",
)


@judge_app.command("nuggets")
@fails_cleanly
@stops_on_signals(interrupted)
def nuggets(
    output: Annotated[
        Path,
        typer.Option(help="Nugget JSONL to write ({qid, query, nuggets: [{text, importance}]}, nuggetizer's shape)."),
    ],
    topics: Annotated[str | None, typer.Option(help="Topic file or set (with --qrels).")] = None,
    qrels: Annotated[
        str | None,
        typer.Option(
            help="Nuggets from the segments judged >= --min-grade (a qrels file or set name: demo, rag24, ...)."
        ),
    ] = None,
    candidates: Annotated[
        Path | None,
        typer.Option(help="Nuggets from given candidates (nuggetizer's create input / rank_llm Request JSONL)."),
    ] = None,
    min_grade: Annotated[
        int,
        typer.Option(
            min=0, help="With --qrels: the lowest relevance grade whose segments the nuggets are written from."
        ),
    ] = 1,
    max_nuggets: Annotated[int, typer.Option(min=1, max=100, help="The most nuggets kept per topic.")] = 30,
    index: IndexOpt = None,
    judge: JudgeOpt = None,
    concurrency: Concurrency = 4,
    retry_failed: RetryFailed = False,
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """Create nuggets per topic (AutoNuggetizer: iterative over batches of 10 segments, then vital/okay)."""
    from ragnarok.judge.create import create_nuggets, read_candidates
    from ragnarok.judge.nuggets import write_nuggets

    cli_output.file_not_format(output)
    settings = get_settings()
    if (qrels is None) == (candidates is None):
        raise ValueError("give either --qrels (with --topics) or --candidates")
    if candidates is not None:
        sources = read_candidates(candidates)
    elif topics is None or qrels is None:
        raise ValueError("--qrels needs --topics (the query text of each topic)")
    else:
        sources = _judged_segments(qrels, topics, min_grade, settings, index)
    chosen = chosen_judge(settings, judge, retry_failed)
    made = create_nuggets(chosen, sources, max_nuggets, concurrency)
    write_nuggets(output, made)
    report_stats(chosen)
    count = sum(len(t.nuggets) for t in made)
    cli_output.result({"output": str(output), "topics": len(made), "nugget_count": count})
    typer.echo(f"wrote nuggets for {len(made)} topics ({count} nuggets) to {output}")


def _judged_segments(qrels: str, topics: str, min_grade: int, settings: Settings, index: str | None) -> Any:
    """Each topic's segments the qrels judge at least ``min_grade``, read from the index (BM25 finds more)."""
    from ragnarok.judge.answers import lucene_segments
    from ragnarok.judge.create import relevant_segments
    from ragnarok.stages.retrieve.lucene import LuceneRetriever

    directory = index_dir(settings, index)
    bm25 = LuceneRetriever(name="bm25", source=directory)

    def search(query: str, k: int) -> list[tuple[str, str]]:
        from ragnarok.stages.retrieve.lucene import doc_from_raw

        return [
            (d, " ".join(p for p in (doc.title, doc.segment) if p))
            for d, _, raw in bm25.search(query, k)
            for doc in [doc_from_raw(raw.get("raw"))]
        ]

    return relevant_segments(
        qrels_of(qrels, settings), topic_texts(topics, settings), min_grade, lucene_segments(directory), search
    )


@judge_app.command("relevance")
@fails_cleanly
@stops_on_signals(interrupted)
def relevance(
    run: Annotated[Path, typer.Argument(help="TREC run file (segment ids).")],
    topics: Annotated[str, typer.Option(help="Topic file or set.")],
    output: Annotated[Path, typer.Option(help="Qrels file to write: the given judgments plus the new labels.")],
    qrels: Annotated[
        str | None, typer.Option(help="Existing judgments (left as they are): a qrels file or set name.")
    ] = None,
    depth: Annotated[int, typer.Option(min=1, max=1000, help="Label the top DEPTH of each topic.")] = 20,
    index: IndexOpt = None,
    judge: JudgeOpt = None,
    concurrency: Concurrency = 4,
    retry_failed: RetryFailed = False,
    umbrela_mode: Annotated[
        str,
        typer.Option(
            help="umbrela: castorini/umbrela's prompt (empty system prompt), "
            "the segment alone as passage and its parser (an unreadable "
            "grade is 0, counted); strict: our prompt, title + segment, "
            "and an unreadable grade is not labelled."
        ),
    ] = "umbrela",
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """UMBRELA-style 0-3 grades for the retrieved segments the qrels do not judge, written as qrels."""
    from ragnarok.core.trec import read_run
    from ragnarok.judge.answers import lucene_segments
    from ragnarok.judge.create import relevance_labels, write_qrels

    cli_output.file_not_format(output)
    settings = get_settings()
    if umbrela_mode not in ("umbrela", "strict"):
        raise ValueError(f"--umbrela-mode: umbrela or strict, not {umbrela_mode!r}")
    given = qrels_of(qrels, settings) if qrels else {}
    chosen = chosen_judge(settings, judge, retry_failed)
    style = "segment" if umbrela_mode == "umbrela" else "title segment"
    labels, problems = relevance_labels(
        chosen,
        read_run(run),
        given,
        topic_texts(topics, settings),
        lucene_segments(index_dir(settings, index), style),
        depth,
        concurrency,
        mode=umbrela_mode,
    )
    n = write_qrels(output, given, labels)
    report_stats(chosen)
    for problem in problems[:20]:
        typer.echo(f"  not labelled: {problem}", err=True)
    for problem in problems:
        cli_output.warn(f"not labelled: {problem}", echo=False)
    labelled = sum(map(len, labels.values()))
    cli_output.result({"output": str(output), "labelled": labelled, "not_labelled": len(problems), "judgments": n})
    typer.echo(f"labelled {labelled} segments ({len(problems)} not labelled); wrote {n} judgments to {output}")
    if not labelled and problems:
        _fail("no segment was labelled")
    if labelled and chosen.stats.defaulted >= labelled:
        _fail(
            f"none of the judge's {labelled} grades could be read (each set to 0 as umbrela does): "
            f"check the judge model, or --umbrela-mode strict"
        )


def _fail(message: str) -> None:
    """``error: message`` on stderr (and in the envelope's errors), then exit code 1."""
    typer.echo(f"error: {message}", err=True)
    cli_output.error(message)
    raise typer.Exit(1)


@judge_app.command("pairwise")
@fails_cleanly
@stops_on_signals(interrupted)
def pairwise(
    run_a: Annotated[Path | None, typer.Argument(help="RAG answers (2024/2025 JSONL).")] = None,
    run_b: Annotated[Path | None, typer.Argument(help="RAG answers to compare with.")] = None,
    judge: JudgeOpt = None,
    output: Annotated[Path | None, typer.Option(help="JSONL of verdicts per topic.")] = None,
    arena: Annotated[
        bool,
        typer.Option(
            "--arena",
            help="Vote on the arena's battles instead of two runs: "
            "each battle not yet judged by this judge gets a vote "
            "'judge:<name>' in the vote log (never counted on the "
            "human boards).",
        ),
    ] = False,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="With --arena: the vote log (default: the arena's, database_url or arena.db in the data dir)."
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=10_000, help="With --arena: battles judged in this run at most.")
    ] = 1000,
    concurrency: Concurrency = 4,
    retry_failed: RetryFailed = False,
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """Which answer is better, judged twice with sides swapped (disagreement is a tie): per topic of two
    runs, or (--arena) on the arena's battles, as judge votes in the vote log."""
    if output is not None:
        cli_output.file_not_format(output)
    settings = get_settings()
    if arena:
        if run_a is not None or run_b is not None or output is not None:
            raise ValueError("--arena judges the vote log's battles: give no run files and no --output")
        _pairwise_arena(settings, judge, database_url, limit, concurrency, retry_failed)
        return
    if run_a is None or run_b is None:
        raise ValueError("give two run files (RUN_A RUN_B), or --arena to vote on the arena's battles")
    from ragnarok.judge.answers import read_answers
    from ragnarok.judge.create import pairwise_runs, summarise_pairwise

    a, b = read_answers(run_a), read_answers(run_b)
    chosen = chosen_judge(settings, judge, retry_failed)
    queries = {q: x.query for q, x in {**b, **a}.items()}
    verdicts = pairwise_runs(
        chosen, {q: x.text for q, x in a.items()}, {q: x.text for q, x in b.items()}, queries, concurrency
    )
    if output:
        output.write_text(
            "".join(
                json.dumps({"qid": q, "a": str(run_a), "b": str(run_b), "winner": v}) + "\n"
                for q, v in verdicts.items()
            ),
            encoding="utf-8",
        )
    report_stats(chosen)
    cli_output.result(
        {
            "run_a": str(run_a),
            "run_b": str(run_b),
            "wins": _counts(verdicts.values()),
            "verdicts": [{"qid": q, "winner": v} for q, v in verdicts.items()],
        }
    )
    typer.echo(summarise_pairwise(verdicts, run_a.name, run_b.name))
    if verdicts and chosen.stats.judged and chosen.stats.failed == chosen.stats.judged:
        _fail(
            f"every verdict of the judge was unreadable ({chosen.stats.failed} judgments): the "
            f"{len(verdicts)} ties above are failures, not verdicts (--retry-failed asks again)"
        )


def _counts(winners: Iterable[str]) -> dict[str, int]:
    """How often each side won: ``{"a": 3, "b": 1, "tie": 2}``."""
    counted = {"a": 0, "b": 0, "tie": 0}
    for winner in winners:
        counted[winner] = counted.get(winner, 0) + 1
    return counted


def _pairwise_arena(
    settings: Settings,
    judge: str | None,
    database_url: str | None,
    limit: int,
    concurrency: int,
    retry_failed: bool = False,
) -> None:
    from ragnarok.arena.judge_log import judge_votes
    from ragnarok.arena.store import VoteStore
    from ragnarok.judge.arena import agreement, judge_arena, vote_log_url

    chosen = chosen_judge(settings, judge, retry_failed)
    store = VoteStore(database_url or vote_log_url(settings))
    try:
        done = judge_arena(chosen, store, limit, concurrency)
        report_stats(chosen)
        for battle in done.failed[:20]:
            typer.echo(f"  no vote (the judge's verdict could not be read): battle {battle}", err=True)
        for battle in done.failed:
            cli_output.warn(f"no vote (the judge's verdict could not be read): battle {battle}", echo=False)
        cli_output.result(
            {"voter": done.voter, "judged": done.judged, "wins": dict(done.counts), "failed": list(done.failed)}
        )
        typer.echo(
            f"{done.voter}: {done.judged} battles judged ({done.counts['a']} A, {done.counts['b']} B, "
            f"{done.counts['tie']} ties), {len(done.failed)} failed"
        )
        agreed = agreement(judge_votes(store, include_unblinded=True)).get(done.voter)
        if agreed is not None and agreed.both:
            typer.echo(
                f"agreement with human votes on {agreed.both} battles both voted: {agreed.rate:.1%}"
                + (f"; without ties {agreed.rate_decided:.1%} of {agreed.decided}" if agreed.decided else "")
            )
    finally:
        store.engine.dispose()
