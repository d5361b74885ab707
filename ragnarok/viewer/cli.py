"""``ragnarok view RUN [RUN2]``: the command (the view's model in :mod:`ragnarok.viewer.model`, its HTML page in
:mod:`ragnarok.viewer.page`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt
from ragnarok.viewer.model import View, load_view, terminal


@fails_cleanly
def view(
    runs: Annotated[
        Optional[list[Path]],
        typer.Argument(metavar="[RUN [RUN2]]", help="One or two runs (JSONL, the 2024 or 2025 format)."),
    ] = None,
    nuggets: Annotated[
        Optional[Path],
        typer.Option(help="Nugget file (ours or nuggetizer's): each topic's nuggets, labelled if assigned."),
    ] = None,
    assignments: Annotated[
        Optional[Path],
        typer.Option(help="Assigned nuggets (eval-rag --assignments, nuggetizer's assign output): labels and scores."),
    ] = None,
    topics: Annotated[
        Optional[str], typer.Option(help="Topic ids (comma-separated), or a topic set or file: only those topics.")
    ] = None,
    html: Annotated[
        Optional[Path],
        typer.Option(
            help="Write one self-contained HTML page here instead (score bars, filters, two runs side by side)."
        ),
    ] = None,
    index: Annotated[
        Optional[str],
        typer.Option(
            help="Index name or Lucene index directory the cited segments are read from (default: settings')."
        ),
    ] = None,
    experiment: Annotated[
        Optional[Path],
        typer.Option(
            help="An experiment's per-topic scores (ragnarok compare --save FILE, JSON or CSV): the topics where "
            "its pipelines differ most, instead of runs."
        ),
    ] = None,
    metric: Annotated[Optional[str], typer.Option(help="With --experiment: the metric (default: its first).")] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Show a run for people: each topic's answer, its citations resolved to the cited segments' text, and
    nugget labels; give two runs to compare them."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.judge.answers import lucene_segments  # noqa: PLC0415
    from ragnarok.judge.cli_common import index_dir  # noqa: PLC0415
    from ragnarok.track.cli import resolve_topics  # noqa: PLC0415

    if experiment is not None:
        _experiment(experiment, metric, topics, bool(runs))
        return
    if not runs:
        raise ValueError("give one or two runs (or --experiment FILE)")
    if len(runs) > 2:
        raise ValueError(f"view takes one or two runs, got {len(runs)}")
    if nuggets is not None and assignments is not None:
        raise ValueError("give --nuggets or --assignments, not both (assignments carry their nuggets)")
    settings = get_settings()
    loaded = load_view(
        runs,
        topics,
        nuggets,
        assignments,
        lambda: lucene_segments(index_dir(settings, index)),
        lambda source: [t.qid for t in resolve_topics(source, settings)],
    )
    cli_output.result(view_result(loaded, html))
    if html is None:
        typer.echo(terminal(loaded), nl=False)
        return
    from ragnarok.track.output import atomic_write  # noqa: PLC0415
    from ragnarok.viewer.page import page  # noqa: PLC0415

    atomic_write(html, page(loaded))
    typer.echo(f"wrote {html} ({len(loaded.qids)} topics, {len(loaded.runs)} runs)", err=True)


def _experiment(path: Path, metric: str | None, topics: str | None, with_runs: bool) -> None:
    from ragnarok.track.cli import resolve_topics  # noqa: PLC0415
    from ragnarok.viewer.experiment import differences, read_experiment  # noqa: PLC0415

    if with_runs:
        raise ValueError("--experiment shows an experiment's scores: give it without runs")
    frame = read_experiment(path)
    qids = None
    if topics is not None:
        pieces = [p.strip() for p in topics.split(",") if p.strip()]
        known = set(frame["qid"])
        qids = (
            pieces
            if pieces and all(p in known for p in pieces)
            else [q for q in _topic_set(topics, resolve_topics) if q in known]
        )
        if not qids:
            raise ValueError(f"none of the topics {topics!r:.80} is in the experiment")
    cli_output.result(_experiment_result(path, frame, metric, qids))
    typer.echo(differences(frame, metric, qids), nl=False)


def view_result(view: View, html: Path | None) -> dict[str, Any]:
    """The view as data: the runs, each topic's answers (sentences with their citations, references, nuggets
    and scores; null where a run has no answer), and the cited segments' texts (null: not in the index)."""
    topics = [
        {
            "qid": qid,
            "query": query,
            "differs": view.differs(qid),
            "answers": [
                None
                if r is None
                else {
                    "sentences": [{"text": text, "citations": list(cited)} for text, cited in r.answer.sentences],
                    "references": list(r.answer.references),
                    "nuggets": [n.model_dump() for n in r.labels.nuggets] if r.labels else None,
                    "scores": r.labels.scores if r.labels else None,
                }
                for r in answers
            ],
        }
        for qid, query, answers in view.topics()
    ]
    return {
        "runs": [
            {"name": r.name, "path": str(r.path), "year": r.year, "run_id": r.run_id, "topics": len(r.answers)}
            for r in view.runs
        ],
        "topic_answers": topics,
        "segment_texts": dict(view.segments),
        "html": None if html is None else str(html),
    }


def _experiment_result(path: Path, frame: Any, metric: str | None, qids: list[str] | None) -> dict[str, Any]:
    """An experiment's per-topic scores of one metric (the first when none is given) as data."""
    chosen = metric or str(frame["measure"].iloc[0])
    rows = frame[frame["measure"] == chosen]
    if qids is not None:
        rows = rows[rows["qid"].isin(qids)]
    return {
        "experiment": str(path),
        "metric": chosen,
        "per_topic": [
            {"qid": str(r.qid), "name": str(r.name), "value": None if math.isnan(r.value) else float(r.value)}
            for r in rows.itertuples()
        ],
    }


def _topic_set(source: str, resolve) -> list[str]:  # type: ignore[no-untyped-def]
    """The ids of the topic set or file ``source``; none when it is not one."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415

    try:
        return [t.qid for t in resolve(source, get_settings())]
    except (FileNotFoundError, ValueError, LookupError):
        return []
