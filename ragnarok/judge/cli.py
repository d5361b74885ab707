"""``ragnarok judge nuggets | relevance | pairwise`` and ``ragnarok eval-rag``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragnarok.core.settings import Settings, get_settings
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly, row_names
from ragnarok.runtime.cli_output import Format, OutputOpt
from ragnarok.runtime.interrupt import stops_on_signals, writing

judge_app = typer.Typer(
    no_args_is_help=True,
    help="LLM (or proxy) judges: nuggets, relevance labels, pairwise preferences. Every judgment is cached.",
)

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


def _judge(settings: Settings, name: str | None, retry_failed: bool = False):  # type: ignore[no-untyped-def]
    from ragnarok.judge.service import make_judge

    judge = make_judge(settings, name, retry_failed=retry_failed)
    _judging[:] = [(judge, settings)]
    typer.echo(
        f"judge: {judge.describe()}"
        + (
            "  [no --judge and no judge configured: scores are a PROXY]"
            if judge.proxy and not (name or settings.judge)
            else ""
        ),
        err=True,
    )
    return judge


_judging: list = []  # (judge, settings) of the command running: what an interrupt says was kept


def _interrupted() -> str:
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
    if name == "demo":
        from ragnarok.collection.demo_index import ensure_demo_index

        ensure_demo_index(settings)
    return sources[name]


def _topics(source: str | None, settings: Settings) -> dict[str, str]:
    if source is None:
        return {}
    from ragnarok.core.topic_sets import resolve_topics

    return {t.qid: t.text for t in resolve_topics(source, settings)}


def _qrels(source: str, settings: Settings):  # type: ignore[no-untyped-def]
    """The judgments of a qrels file or set name (``demo``, ``rag24``: :mod:`ragnarok.core.topic_sets`)."""
    from ragnarok.core.evaluation import read_qrels
    from ragnarok.core.topic_sets import qrels_path

    return read_qrels(qrels_path(source, settings))


def _report_stats(judge) -> None:  # type: ignore[no-untyped-def]
    typer.echo(f"{judge.describe()}: {judge.stats}", err=True)


@judge_app.command("nuggets")
@fails_cleanly
@stops_on_signals(_interrupted)
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
) -> None:
    """Create nuggets per topic (AutoNuggetizer: iterative over batches of 10 segments, then vital/okay)."""
    from ragnarok.judge.create import create_nuggets, read_candidates, relevant_segments
    from ragnarok.judge.nuggets import write_nuggets

    settings = get_settings()
    if (qrels is None) == (candidates is None):
        raise ValueError("give either --qrels (with --topics) or --candidates")
    if candidates is not None:
        sources = read_candidates(candidates)
    else:
        if topics is None:
            raise ValueError("--qrels needs --topics (the query text of each topic)")
        from ragnarok.judge.answers import lucene_segments
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

        sources = relevant_segments(
            _qrels(qrels, settings), _topics(topics, settings), min_grade, lucene_segments(directory), search
        )
    chosen = _judge(settings, judge, retry_failed)
    made = create_nuggets(chosen, sources, max_nuggets, concurrency)
    write_nuggets(output, made)
    _report_stats(chosen)
    typer.echo(f"wrote nuggets for {len(made)} topics ({sum(len(t.nuggets) for t in made)} nuggets) to {output}")


@judge_app.command("relevance")
@fails_cleanly
@stops_on_signals(_interrupted)
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
) -> None:
    """UMBRELA-style 0-3 grades for the retrieved segments the qrels do not judge, written as qrels."""
    from ragnarok.core.trec import read_run
    from ragnarok.judge.answers import lucene_segments
    from ragnarok.judge.create import relevance_labels, write_qrels

    settings = get_settings()
    if umbrela_mode not in ("umbrela", "strict"):
        raise ValueError(f"--umbrela-mode: umbrela or strict, not {umbrela_mode!r}")
    given = _qrels(qrels, settings) if qrels else {}
    chosen = _judge(settings, judge, retry_failed)
    style = "segment" if umbrela_mode == "umbrela" else "title segment"
    labels, problems = relevance_labels(
        chosen,
        read_run(run),
        given,
        _topics(topics, settings),
        lucene_segments(index_dir(settings, index), style),
        depth,
        concurrency,
        mode=umbrela_mode,
    )
    n = write_qrels(output, given, labels)
    _report_stats(chosen)
    for problem in problems[:20]:
        typer.echo(f"  not labelled: {problem}", err=True)
    labelled = sum(map(len, labels.values()))
    typer.echo(f"labelled {labelled} segments ({len(problems)} not labelled); wrote {n} judgments to {output}")
    if not labelled and problems:
        typer.echo("error: no segment was labelled", err=True)
        raise typer.Exit(1)
    if labelled and chosen.stats.defaulted >= labelled:
        typer.echo(
            f"error: none of the judge's {labelled} grades could be read (each set to 0 as umbrela does): "
            f"check the judge model, or --umbrela-mode strict",
            err=True,
        )
        raise typer.Exit(1)


@judge_app.command("pairwise")
@fails_cleanly
@stops_on_signals(_interrupted)
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
) -> None:
    """Which answer is better, judged twice with sides swapped (disagreement is a tie): per topic of two
    runs, or (--arena) on the arena's battles, as judge votes in the vote log."""
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
    chosen = _judge(settings, judge, retry_failed)
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
    _report_stats(chosen)
    typer.echo(summarise_pairwise(verdicts, run_a.name, run_b.name))
    if verdicts and chosen.stats.judged and chosen.stats.failed == chosen.stats.judged:
        typer.echo(
            f"error: every verdict of the judge was unreadable ({chosen.stats.failed} judgments): the "
            f"{len(verdicts)} ties above are failures, not verdicts (--retry-failed asks again)",
            err=True,
        )
        raise typer.Exit(1)


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

    chosen = _judge(settings, judge, retry_failed)
    store = VoteStore(database_url or vote_log_url(settings))
    try:
        done = judge_arena(chosen, store, limit, concurrency)
        _report_stats(chosen)
        for battle in done.failed[:20]:
            typer.echo(f"  no vote (the judge's verdict could not be read): battle {battle}", err=True)
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


@fails_cleanly
@stops_on_signals(_interrupted)
def eval_rag(
    runs: Annotated[list[Path], typer.Argument(help="RAG answer files (our/the track's 2024 or 2025 JSONL).")],
    nuggets: Annotated[
        str | None, typer.Option(help="Nugget JSONL (ours or nuggetizer's), or a set name (demo).")
    ] = None,
    support: Annotated[
        bool, typer.Option("--support", help="Judge citation support (needs the cited segments in --index).")
    ] = False,
    support_mode: Annotated[
        str,
        typer.Option(
            help="all: every citation, title + segment passages; trec24: a "
            "sentence's first 3 citations with 'title: segment' passages, "
            "as the TREC 2024 support evaluation."
        ),
    ] = "all",
    references: Annotated[
        Path | None,
        typer.Option(help="Gold answers JSONL {qid, answer}: ROUGE-L, BLEU, chrF, METEOR, token F1, SemScore."),
    ] = None,
    geval: Annotated[
        bool,
        typer.Option(
            "--geval",
            help="G-Eval-style 1-5 scores (coherence, consistency, fluency, relevance); needs an LLM --judge.",
        ),
    ] = False,
    run_name: Annotated[
        list[str] | None,
        typer.Option(help="A row name; repeat it, one per run, in the runs' order: --run-name a --run-name b."),
    ] = None,
    judge: JudgeOpt = None,
    index: IndexOpt = None,
    test_metric: Annotated[str, typer.Option(help="Score of the paired test between runs.")] = "all",
    resamples: Annotated[int, typer.Option(min=100, max=100_000, help="Bootstrap resamples.")] = 1000,
    assignments: Annotated[
        Path | None,
        typer.Option(help="Write per-topic assignments and scores (JSONL, nuggetizer's assign output shape)."),
    ] = None,
    concurrency: Concurrency = 4,
    retry_failed: RetryFailed = False,
    output_format: OutputOpt = Format.text,
) -> None:
    """Score RAG runs: the four AutoNuggetizer scores, citation support, reference metrics; means with 95 %
    bootstrap intervals, one row per run, and a paired t-test of the first run against each other."""
    from ragnarok.core.topic_sets import nuggets_path
    from ragnarok.judge.answers import lucene_segments, read_answers
    from ragnarok.judge.evalrag import (
        assignment_records,
        evaluate_run,
        format_report,
        metrics_of,
        paired_tests,
        prefetch_runs,
    )
    from ragnarok.judge.nuggets import read_nuggets
    from ragnarok.judge.reference import read_references

    if nuggets is None and not support and references is None and not geval:
        raise ValueError("nothing to score: give --nuggets FILE, --support, --references FILE and/or --geval")
    names = row_names(run_name, runs)
    settings = get_settings()
    loaded = {name: read_answers(path) for name, path in zip(names, runs)}
    nugget_sets = read_nuggets(nuggets_path(nuggets, settings)) if nuggets else None
    refs = read_references(str(references)) if references else None
    answered = set().union(*loaded.values())
    if nugget_sets is not None:
        unknown = sorted(set(nugget_sets) - answered)
        if len(unknown) == len(nugget_sets):
            raise ValueError(f"the nuggets are for topics no run answers ({', '.join(unknown[:5])}...): wrong file?")
        if unknown:
            typer.echo(f"note: nuggets for {len(unknown)} topics no run answers: {', '.join(unknown[:10])}", err=True)
    if support_mode not in ("all", "trec24"):
        raise ValueError(f"--support-mode: all or trec24, not {support_mode!r}")
    style = "title: segment" if support_mode == "trec24" else "title segment"
    segments = lucene_segments(index_dir(settings, index), style) if support else None
    chosen = _judge(settings, judge, retry_failed) if (nugget_sets is not None or support or geval) else None
    if geval and chosen is not None and chosen.proxy:
        raise ValueError("--geval needs an LLM judge (--judge NAME); the proxy judge gives no G-Eval scores")
    if chosen is not None and len(loaded) > 1:  # the proxy judge: every run's texts encoded in one call
        segments = prefetch_runs(
            chosen,
            list(loaded.values()),
            nuggets=nugget_sets,
            segments=segments,
            references=refs,
            support_mode=support_mode,
        )
    results = []
    for name, answers in loaded.items():
        result = evaluate_run(
            name,
            answers,
            chosen,
            nuggets=nugget_sets,
            segments=segments,  # type: ignore[arg-type]
            references=refs,
            geval=geval,
            concurrency=concurrency,
            support_mode=support_mode,
        )
        if result.skipped:
            typer.echo(
                f"{name}: skipped {len(result.skipped)} topics without nuggets/references: "
                f"{', '.join(result.skipped[:20])}",
                err=True,
            )
        if result.missing_segments:
            typer.echo(f"{name}: {result.missing_segments} cited segments not in the index (no support)", err=True)
        results.append(result)
        if assignments is not None:
            with writing(), open(assignments, "a" if len(results) > 1 else "w", encoding="utf-8") as f:
                f.writelines(
                    json.dumps(record, ensure_ascii=False) + "\n"
                    for record in assignment_records(result, answers, nugget_sets or {})
                )
    if not any(r.topics for r in results):
        raise ValueError("no topic could be scored")
    from ragnarok.judge.evalrag import on_shared_topics

    results, left_out = on_shared_topics(results)
    if left_out:
        if not results[0].topics:
            raise ValueError(
                "the runs share no scored topic: nothing to compare ("
                + "; ".join(f"{name}: {len(qids)} topics" for name, qids in left_out.items())
                + ")"
            )
        typer.echo(
            f"note: the runs are compared on the {len(results[0].topics)} topics all of them scored; left "
            "out: "
            + "; ".join(
                f"{name}: {len(qids)} ({', '.join(qids[:10])}{', ...' if len(qids) > 10 else ''})"
                for name, qids in left_out.items()
            ),
            err=True,
        )
    if chosen is not None:
        _report_stats(chosen)
    label = " (PROXY judge)" if chosen is not None and chosen.proxy else ""
    if chosen is not None:
        from ragnarok.judge.agreement import measured_line

        nli = getattr(chosen, "nli", None)
        typer.echo(measured_line(chosen.name, nli.name if nli is not None else None))
    typer.echo(f"means with 95% bootstrap intervals{label}:")
    typer.echo(format_report(results, metrics_of(results), resamples))
    tests = paired_tests(results, test_metric) if len(results) > 1 else []
    for test in tests:
        typer.echo(str(test))
    cli_output.result(_eval_rag_result(results, tests, resamples, chosen))


def _eval_rag_result(results: list, tests: list, resamples: int, chosen: Any) -> dict:
    """eval-rag's scores for the ``--output json`` envelope: per run, each metric's mean and 95 % interval."""
    from dataclasses import asdict

    from ragnarok.judge.evalrag import metrics_of

    metrics = metrics_of(results)
    return {
        "judge": None if chosen is None else chosen.name,
        "proxy": bool(chosen is not None and chosen.proxy),
        "runs": [
            {
                "name": r.name,
                "topics": len(r.topics),
                "failed": sum(t.failed for t in r.topics.values()),
                "means": {m: asdict(i) for m, i in r.means(metrics, resamples).items()},
            }
            for r in results
        ],
        "paired_tests": [asdict(t) for t in tests],
    }
