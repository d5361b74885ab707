"""``ragnarok eval-rag``: score RAG runs (nugget scores, citation support, reference metrics, G-Eval), each
metric's mean with its 95 % bootstrap interval per run, and paired tests of the first run against the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ragnarok.core.settings import get_settings
from ragnarok.judge.cli_common import (
    Concurrency,
    IndexOpt,
    JudgeOpt,
    RetryFailed,
    chosen_judge,
    index_dir,
    interrupted,
    report_stats,
)
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly, row_names
from ragnarok.runtime.cli_output import Format, OutputOpt
from ragnarok.runtime.interrupt import stops_on_signals, writing


@fails_cleanly
@stops_on_signals(interrupted)
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
            cli_output.warn(
                f"nuggets for {len(unknown)} topics no run answers: {', '.join(unknown[:10])}", prefix="note: "
            )
    if support_mode not in ("all", "trec24"):
        raise ValueError(f"--support-mode: all or trec24, not {support_mode!r}")
    style = "title: segment" if support_mode == "trec24" else "title segment"
    segments = lucene_segments(index_dir(settings, index), style) if support else None
    chosen = chosen_judge(settings, judge, retry_failed) if (nugget_sets is not None or support or geval) else None
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
            cli_output.warn(
                f"{name}: skipped {len(result.skipped)} topics without nuggets/references: "
                f"{', '.join(result.skipped[:20])}",
                prefix="",
            )
        if result.missing_segments:
            cli_output.warn(
                f"{name}: {result.missing_segments} cited segments not in the index (no support)", prefix=""
            )
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
        cli_output.warn(
            f"the runs are compared on the {len(results[0].topics)} topics all of them scored; left out: "
            + "; ".join(
                f"{name}: {len(qids)} ({', '.join(qids[:10])}{', ...' if len(qids) > 10 else ''})"
                for name, qids in left_out.items()
            ),
            prefix="note: ",
        )
    if chosen is not None:
        report_stats(chosen)
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
                "failed_judgments": sum(t.failed for t in r.topics.values()),
                "means": {m: asdict(i) for m, i in r.means(metrics, resamples).items()},
            }
            for r in results
        ],
        "paired_tests": [
            {"run_a": t.a, "run_b": t.b, "n": t.n, "mean_difference": t.mean_difference, "t": t.t, "p_value": t.p_value}
            for t in tests
        ],
    }
