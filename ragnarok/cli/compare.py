"""``ragnarok compare``: several pipelines or run files over one topic set, each metric's mean per pipeline,
wins and losses against a baseline and paired significance tests (:func:`ragnarok.api.Experiment`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt
from ragnarok.runtime.interrupt import stops_on_signals


@fails_cleanly
@stops_on_signals(
    "nothing written (the table is printed once every pipeline is measured); run the same "
    "command again: judgments made so far are cached"
)
def compare(
    pipelines: Annotated[
        list[str],
        typer.Argument(
            help="Pipelines to compare: specs or presets ('bm25@1000', 'rrf(bm25, dense:minilm)@100 | extractive') "
            "or run files (TREC runs with --qrels, answer JSONL with --nuggets), in any mix."
        ),
    ],
    topics: Annotated[str, typer.Option(help="Topic file or set name (demo, rag24, ...: `ragnarok topics list`).")],
    qrels: Annotated[Optional[str], typer.Option(help="Qrels file or set name: compare rankings.")] = None,
    nuggets: Annotated[Optional[str], typer.Option(help="Nugget file or set name: compare answers.")] = None,
    metric: Annotated[
        Optional[list[str]],
        typer.Option(
            help="A metric; repeat it. Rankings: nDCG@10, MAP@100, Recall@100, MAP (default) or any ir-measures name; "
            "answers: all, vital (default), strict_all, strict_vital, support_precision, support_recall, "
            "response_length (default)."
        ),
    ] = None,
    name: Annotated[
        Optional[list[str]], typer.Option(help="A row name; repeat it, one per pipeline, in order.")
    ] = None,
    baseline: Annotated[
        Optional[str], typer.Option(help="The baseline: a pipeline's position (0 = the first) or row name.")
    ] = None,
    test: Annotated[str, typer.Option(help="Paired test: t (Student's) or wilcoxon.")] = "t",
    correction: Annotated[
        Optional[str], typer.Option(help="Multiple-testing correction over the pipelines: holm or bonferroni.")
    ] = None,
    alpha: Annotated[float, typer.Option(min=0.0, max=1.0, help="Significance level of the * mark.")] = 0.05,
    perquery: Annotated[bool, typer.Option("--perquery", help="One row per pipeline, topic and metric.")] = False,
    csv: Annotated[
        Optional[Path],
        typer.Option(help="Also write the table as CSV to this file ('-': stdout instead of the text table)."),
    ] = None,
    save: Annotated[
        Optional[Path], typer.Option(help="Also write the per-topic scores as JSON, for `ragnarok view --experiment`.")
    ] = None,
    judge: Annotated[
        Optional[str], typer.Option(help="The judge of answers (a configured LLM generator); default the proxy judge.")
    ] = None,
    support: Annotated[
        bool, typer.Option("--support", help="Judge citation support too (reads the cited segments from --index).")
    ] = False,
    index: Annotated[Optional[str], typer.Option(help="Index name or directory the pipelines search.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Topics in flight per pipeline.")] = 4,
    output_format: OutputOpt = Format.text,
) -> None:
    """Compare pipelines on one topic set, as PyTerrier's Experiment does: means, wins/ties/losses against a
    baseline, paired t or Wilcoxon tests with a Holm or Bonferroni correction. Each pipeline runs once; a
    topic it fails on, or its run file lacks, scores 0 and is counted under 'missing'."""
    from ragnarok.api import measure  # noqa: PLC0415
    from ragnarok.experiment.table import format_table  # noqa: PLC0415

    base: int | str | None = int(baseline) if baseline is not None and baseline.lstrip("-").isdigit() else baseline
    measured = measure(
        pipelines,
        topics,
        qrels=qrels,
        nuggets=nuggets,
        metrics=metric,
        names=name,
        baseline=base,
        test=test,
        correction=correction,
        alpha=alpha,
        judge=judge,
        support=support,
        index=index,
        concurrency=concurrency,
    )
    frame, detail = measured.means(), measured.perquery()
    for who, failed in frame.attrs["failures"].items():
        cli_output.warn(
            f"{who} failed on {len(failed)} topics (scored 0): "
            + "; ".join(f"{q}: {why}" for q, why in list(failed.items())[:3])
        )
    shown = detail if perquery else frame
    cli_output.result(shown.astype(object).where(shown.notna(), None).to_dict("records"))  # NaN is no JSON
    if save is not None:
        detail.to_json(save, orient="records", indent=1)
    if csv is not None:
        shown.to_csv(sys.stdout if str(csv) == "-" else csv, index=False)
        if str(csv) == "-":
            return
    if perquery:
        typer.echo(shown.to_string(index=False))
        return
    baseline_name = measured.names[measured.baseline] if measured.baseline is not None else None
    typer.echo(
        format_table(
            frame, measured.metrics, shutil.get_terminal_size((100, 24)).columns, alpha, baseline_name, test, correction
        )
    )
