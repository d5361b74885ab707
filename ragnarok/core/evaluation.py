"""Retrieval evaluation with ir-measures: nDCG@10, MAP@100, Recall@100 and MAP, with the paper's MaxP step.

MaxP: when the qrels judge documents and the run ranks segments (ids ``{docid}#{n}_{offset}``), a document's
score is its best segment's. Averages follow trec_eval's default (no ``-c``): over the topics that have
judgments and a non-empty ranking. Graded judgments count as relevant from grade 1 for AP and recall; nDCG
uses the grades as (linear) gains, as trec_eval does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import ir_measures

from ragnarok.core.trec import read_columns

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
#: Metrics given either as ir-measures names, or as a display name -> ir-measures name mapping.
Metrics = Sequence[str] | Mapping[str, str]

DEFAULT_METRICS: tuple[str, ...] = ("nDCG@10", "AP@100", "R@100", "AP")
DISPLAY_NAMES: dict[str, str] = {"nDCG@10": "nDCG@10", "AP@100": "MAP@100", "R@100": "Recall@100", "AP": "MAP"}


class QrelsFormatError(ValueError):
    """A qrels file that cannot be read or parsed; the message names the file and the 1-based line."""


def display_name(measure: str) -> str:
    """The column name of an ir-measures name (``AP@100`` -> ``MAP@100``); unknown names unchanged."""
    return DISPLAY_NAMES.get(measure, measure)


def read_qrels(path: str | Path) -> Qrels:
    """A 4-column TREC qrels file (``qid iteration docid grade``, any iteration) as nested dicts."""
    qrels: Qrels = {}
    for n, parts in read_columns(path, "qid iteration docid grade", QrelsFormatError, "qrels"):
        try:
            grade = int(parts[3])
        except ValueError:
            raise QrelsFormatError(f"{path}:{n}: grade {parts[3]!r} is not an integer") from None
        qrels.setdefault(parts[0], {})[parts[2]] = grade
    return qrels


def maxp(run: Mapping[str, Mapping[str, float]]) -> Run:
    """Segment run -> document run: each document (id before the first ``#``) scored by its best segment."""
    out: Run = {}
    for qid, hits in run.items():
        docs = out.setdefault(qid, {})
        for segment, score in hits.items():
            doc = segment.split("#", 1)[0]
            if doc not in docs or score > docs[doc]:
                docs[doc] = score
    return out


def needs_maxp(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]]) -> bool:
    """True when the run ranks segments (ids with ``#``) and the qrels judge documents (no ``#``)."""
    judged_segments = any("#" in d for docs in qrels.values() for d in docs)
    ranked_segments = any("#" in d for hits in run.values() for d in hits)
    return ranked_segments and not judged_segments


def _prepare(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Metrics,
    use_maxp: bool | None,
) -> tuple[dict[str, object], Qrels, Run]:
    """Parsed measures by display name, and the qrels and run restricted to the topics both cover."""
    named = dict(metrics) if isinstance(metrics, Mapping) else {display_name(m): m for m in metrics}
    parsed = {name: ir_measures.parse_measure(m) for name, m in named.items()}
    if use_maxp if use_maxp is not None else needs_maxp(qrels, run):
        run = maxp(run)
    shared = [q for q, hits in run.items() if hits and q in qrels]
    return (
        parsed,
        {q: {d: int(g) for d, g in qrels[q].items()} for q in shared},
        {q: {d: float(s) for d, s in run[q].items()} for q in shared},
    )


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Metrics = DEFAULT_METRICS,
    maxp: bool | None = None,
) -> dict[str, float]:
    """Mean of each metric over the topics in both qrels and run, as ``{display name: value}``.

    ``maxp``: True/False forces MaxP on/off; None applies it when needs_maxp says so. With no topic in common every metric is 0.0.
    """
    parsed, qrels_, run_ = _prepare(qrels, run, metrics, maxp)
    values = ir_measures.calc_aggregate(list(parsed.values()), qrels_, run_) if run_ else {}
    return {name: float(values.get(m, 0.0)) for name, m in parsed.items()}


def evaluate_all(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Metrics = DEFAULT_METRICS,
    maxp: bool | None = None,
) -> tuple[dict[str, float], int]:
    """Means over every topic of the qrels (trec_eval -c: a topic the run does not cover scores 0), and how
    many of the qrels' topics the run covers."""
    scores = evaluate(qrels, run, metrics, maxp)  # means over the topics the run covers
    covered = sum(1 for qid, hits in run.items() if hits and qid in qrels)
    if qrels and covered < len(qrels):
        scores = {metric: value * covered / len(qrels) for metric, value in scores.items()}
    return scores, covered


def per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Metrics = DEFAULT_METRICS,
    maxp: bool | None = None,
) -> dict[str, dict[str, float]]:
    """Each metric per topic (topics in both qrels and run): ``{qid: {display name: value}}``."""
    parsed, qrels_, run_ = _prepare(qrels, run, metrics, maxp)
    by_measure = {m: name for name, m in parsed.items()}
    out: dict[str, dict[str, float]] = {q: {} for q in run_}
    if run_:
        for metric in ir_measures.iter_calc(list(parsed.values()), qrels_, run_):
            out[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    return {q: {name: values.get(name, 0.0) for name in parsed} for q, values in out.items()}


def format_table(rows: Mapping[str, Mapping[str, float]], digits: int = 4) -> str:
    """A plain-text table, one row per run and one column per metric (like the paper's Table 3)."""
    if not rows:
        return ""
    metrics: list[str] = []
    for values in rows.values():
        metrics += [m for m in values if m not in metrics]
    width = max(len("run"), *(len(r) for r in rows))
    cols = [max(len(m), digits + 2) for m in metrics]
    lines = [f"{'run':<{width}}  " + "  ".join(f"{m:>{w}}" for m, w in zip(metrics, cols))]
    for name, values in rows.items():
        cells = (f"{values[m]:.{digits}f}" if m in values else "-" for m in metrics)
        lines.append(f"{name:<{width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, cols)))
    return "\n".join(lines)
