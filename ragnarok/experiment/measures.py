"""Per-topic scores of one pipeline's results, the figures ``ragnarok eval`` and ``eval-rag`` average.

- A ranking (``{qid: {docid: score}}``) against qrels, through ir-measures with ``ragnarok eval``'s MaxP step
  (:mod:`ragnarok.core.evaluation`): metrics by its display names (``nDCG@10``, ``MAP@100``, ``Recall@100``,
  ``MAP``) or any ir-measures name (``P@10``, ``RR``, ``nDCG@20``, ...).
- Answers (``{qid: Answer}``) against nuggets, through the judges of ``eval-rag`` (the same judge, the same
  judgment cache): the nugget scores (``all``, ``vital``, ``strict_all``, ``strict_vital``), citation support
  (``support_precision``, ``support_recall``: needs the cited segments' texts) and ``response_length`` (the
  track checkers' word count).

A topic of the experiment that a pipeline has no result for (it failed, or a run file lacks it) scores 0, as
``ragnarok eval`` counts a topic a run does not cover (trec_eval ``-c``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

import ir_measures

from ragnarok.core.evaluation import DEFAULT_METRICS, DISPLAY_NAMES, per_query
from ragnarok.core.types import word_count
from ragnarok.judge.answers import Answer, SegmentText
from ragnarok.judge.evalrag import evaluate_run
from ragnarok.judge.nuggets import SCORES, TopicNuggets
from ragnarok.judge.service import Judge

RANKING_DEFAULT = tuple(DISPLAY_NAMES[m] for m in DEFAULT_METRICS)  # ragnarok eval's columns
SUPPORT = ("support_precision", "support_recall")
RAG_METRICS = (*SCORES, *SUPPORT, "response_length")
RAG_DEFAULT = ("all", "vital", "response_length")
#: Suggested for a mistyped ranking metric (any ir-measures name is taken).
KNOWN = (
    *DISPLAY_NAMES.values(),
    *DISPLAY_NAMES,
    "nDCG@20",
    "nDCG@100",
    "P@10",
    "P@20",
    "R@1000",
    "RR",
    "RR@10",
    "Judged@10",
    "Bpref",
    "Rprec",
)
PerTopic = dict[str, dict[str, float]]  # {metric: {qid: value}}


class UnknownMetricError(ValueError):
    def __init__(self, name: str, known: Sequence[str]):
        lowered = {k.lower(): k for k in known}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
        hint = f"; did you mean {lowered[close[0]]!r}?" if close else ""
        super().__init__(f"unknown metric {name!r}{hint} (known: {', '.join(dict.fromkeys(known))})")


def ranking_measures(metrics: Sequence[str]) -> dict[str, str]:
    """``{column name: ir-measures name}`` for ``metrics``; :class:`UnknownMetricError` for one it cannot parse."""
    by_display = {v: k for k, v in DISPLAY_NAMES.items()}
    out: dict[str, str] = {}
    for name in metrics:
        measure = by_display.get(name, name)
        try:
            ir_measures.parse_measure(measure)
        except (ValueError, NameError, TypeError, SyntaxError, AttributeError):
            raise UnknownMetricError(name, KNOWN) from None
        out[DISPLAY_NAMES.get(measure, name)] = measure
    return out


def rag_metrics(metrics: Sequence[str]) -> list[str]:
    for name in metrics:
        if name not in RAG_METRICS:
            raise UnknownMetricError(name, RAG_METRICS)
    return list(metrics)


def score_ranking(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    topics: Sequence[str],
    measures: Mapping[str, str],
    maxp: bool | None = None,
) -> PerTopic:
    """Each metric on each of ``topics`` (all in the qrels); a topic the run lacks scores 0."""
    judged = {q: qrels[q] for q in topics}
    values = per_query(judged, {q: hits for q, hits in run.items() if q in judged}, dict(measures), maxp)
    return {name: {q: values.get(q, {}).get(name, 0.0) for q in topics} for name in measures}


def score_answers(
    name: str,
    answers: Mapping[str, Answer],
    nuggets: Mapping[str, TopicNuggets],
    topics: Sequence[str],
    metrics: Sequence[str],
    judge: Judge,
    segments: SegmentText | None = None,
    concurrency: int = 4,
) -> PerTopic:
    """Each metric on each of ``topics`` (all with nuggets), judged as ``eval-rag`` judges; a topic without an
    answer scores 0."""
    given = {q: answers[q] for q in topics if q in answers}
    judged = evaluate_run(
        name,
        given,
        judge,
        nuggets={q: nuggets[q] for q in topics},
        concurrency=concurrency,
        segments=segments if any(m in SUPPORT for m in metrics) else None,
        progress=False,
    )
    out: PerTopic = {}
    for metric in metrics:
        if metric == "response_length":
            out[metric] = {q: float(word_count(given[q].text)) if q in given else 0.0 for q in topics}
        else:
            scored = judged.per_topic(metric)
            out[metric] = {q: scored.get(q, 0.0) for q in topics}
    return out
