"""``Experiment``: several pipelines over the same topics, measured the same way, in one pandas DataFrame, as
PyTerrier's ``pt.Experiment`` gives it.

One row per pipeline with each metric's mean, the topics missing, and against a baseline the wins, ties,
losses and (corrected) paired-test p-values; ``perquery=True`` gives one row per pipeline, topic and metric.
Each pipeline runs once, and RAG judgments go through the judgment cache ``eval-rag`` uses.

Design notes: docs/internals/experiment.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.core.results import TopicsFailed
from ragnarok.core.topics import Topic
from ragnarok.core.types import RagAnswer
from ragnarok.experiment import measures
from ragnarok.experiment.significance import CORRECTIONS, TESTS, compare, correct

#: What a run file's name ends with: a string with one of these that names no file is a missing file, not a spec.
RUN_SUFFIXES = {".txt", ".trec", ".run", ".tsv", ".jsonl", ".json", ".gz"}


class ExperimentError(ValueError):
    """Bad input to an experiment: the message names what and, where it can, what would do."""


@dataclass
class Result:
    """One pipeline's results over the experiment's topics."""

    name: str
    results: dict[str, Any]  # {qid: {docid: score}} or {qid: Answer}
    failures: dict[str, str] = field(default_factory=dict)  # qid -> why
    seconds: float = 0.0


def _name(pipeline: Any, n: int) -> str:
    if isinstance(pipeline, (str, Path)):
        return Path(pipeline).name if Path(pipeline).is_file() else str(pipeline)
    if isinstance(pipeline, Mapping):
        return f"run {n}"
    return str(getattr(pipeline, "spec", None) or f"pipeline {n}")


def _answers_of(given: Mapping[str, Any]) -> dict[str, Any]:
    from ragnarok.judge.answers import Answer, answers_from  # noqa: PLC0415

    if all(isinstance(a, Answer) for a in given.values()):
        return dict(given)
    return answers_from(
        (f"the answer to {q}", a.model_dump() if isinstance(a, RagAnswer) else a) for q, a in given.items()
    )


def materialise(
    pipeline: Any,
    name: str,
    topics: Sequence[Topic],
    answers: bool,
    make: Callable[[str], Any] | None,
    concurrency: int,
) -> Result:
    """The pipeline's results over ``topics``: a run given as a mapping or a file, or a pipeline run now."""
    from ragnarok.core.trec import read_run  # noqa: PLC0415
    from ragnarok.judge.answers import read_answers  # noqa: PLC0415

    started = time.perf_counter()
    if isinstance(pipeline, Mapping):
        return Result(name, _answers_of(pipeline) if answers else dict(pipeline))
    if isinstance(pipeline, (str, Path)) and Path(pipeline).is_file():
        return Result(name, read_answers(pipeline) if answers else read_run(pipeline))
    if isinstance(pipeline, (str, Path)):
        if Path(pipeline).suffix in RUN_SUFFIXES:
            raise ExperimentError(f"{name}: no such run file")
        if make is None:
            raise ExperimentError(f"{name}: not a file, and no way to run a pipeline spec was given")
        pipeline = make(str(pipeline))
    if not hasattr(pipeline, "run" if answers else "search"):
        raise ExperimentError(
            f"{name} is not a pipeline: give a spec, a Pipeline, a run file or a run (got {type(pipeline).__name__})"
        )
    failures: dict[str, str] = {}
    try:
        results = (
            pipeline.run(topics, concurrency=concurrency)
            if answers
            else pipeline.search(topics, concurrency=concurrency)
        )
    except TopicsFailed as exc:
        results = exc.results
        failures = {f.qid: f.reason() if hasattr(f, "reason") else str(f) for f in exc.failures}
    if answers:
        results = _answers_of(results)
    return Result(name, dict(results), failures, time.perf_counter() - started)


def _names(pipelines: Sequence[Any], names: Sequence[str] | None) -> list[str]:
    if names is not None and len(names) != len(pipelines):
        raise ExperimentError(f"{len(names)} names for {len(pipelines)} pipelines: give one name each")
    chosen = list(names) if names is not None else [_name(p, n) for n, p in enumerate(pipelines)]
    twice = sorted({n for n in chosen if chosen.count(n) > 1})
    if twice:
        raise ExperimentError(f"two pipelines are named {twice[0]!r}: give names=[...] (--name) to tell them apart")
    return chosen


def _baseline(baseline: int | str | None, names: list[str]) -> int | None:
    if baseline is None:
        return None
    if isinstance(baseline, str) and not baseline.lstrip("-").isdigit():
        if baseline not in names:
            raise ExperimentError(f"baseline {baseline!r} is not one of the pipelines: {', '.join(names)}")
        return names.index(baseline)
    index = int(baseline)
    if not 0 <= index < len(names):
        raise ExperimentError(
            f"baseline {index} is out of range: {len(names)} pipelines, numbered 0 to {len(names) - 1}"
        )
    return index


@dataclass
class Measured:
    """An experiment's per-topic scores, as the two DataFrames :func:`Experiment` can give."""

    results: list[Result]
    scores: list[measures.PerTopic]  # per pipeline: {metric: {qid: value}}
    qids: list[str]
    metrics: list[str]
    baseline: int | None
    test: str
    correction: str | None
    alpha: float

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.results]

    def means(self) -> Any:
        return self._attrs(
            _means(
                self.results,
                self.scores,
                self.qids,
                self.metrics,
                self.baseline,
                self.test,
                self.correction,
                self.alpha,
            )
        )

    def perquery(self) -> Any:
        return self._attrs(_perquery(self.names, self.scores, self.qids, self.metrics))

    def _attrs(self, frame: Any) -> Any:
        frame.attrs["failures"] = {r.name: r.failures for r in self.results if r.failures}
        frame.attrs["seconds"] = {r.name: r.seconds for r in self.results}
        return frame


def measure(
    pipelines: Sequence[Any],
    topics: Sequence[Topic],
    *,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
    nuggets: Mapping[str, Any] | None = None,
    metrics: Sequence[str] | None = None,
    names: Sequence[str] | None = None,
    baseline: int | str | None = None,
    test: str = "t",
    correction: str | None = None,
    alpha: float = 0.05,
    judge: Any = None,
    segments: Any = None,
    maxp: bool | None = None,
    make: Callable[[str], Any] | None = None,
    concurrency: int = 4,
) -> Measured:
    """Run and score every pipeline (see the module's docstring); ``ragnarok.Experiment`` resolves set names and
    specs, then calls this. ``qrels`` (a ranking experiment) or ``nuggets`` (a RAG one, with ``judge``)."""
    if (qrels is None) == (nuggets is None):
        raise ExperimentError("give qrels (an experiment on rankings) or nuggets (on answers), one of them")
    if not pipelines:
        raise ExperimentError("no pipelines to compare")
    if test not in TESTS:
        raise ExperimentError(f"unknown test {test!r}: one of {', '.join(TESTS)}")
    if correction is not None and correction not in CORRECTIONS:
        raise ExperimentError(f"unknown correction {correction!r}: one of {', '.join(CORRECTIONS)}")
    answers = nuggets is not None
    judged: Mapping[str, Any] = nuggets if answers else qrels  # type: ignore[assignment]
    chosen = (
        measures.rag_metrics(metrics or measures.RAG_DEFAULT)
        if answers
        else measures.ranking_measures(metrics or measures.RANKING_DEFAULT)
    )
    row_names = _names(pipelines, names)
    base = _baseline(baseline, row_names)
    experiment = [t for t in topics if t.qid in judged]
    qids = [t.qid for t in experiment]
    if not qids:
        raise ExperimentError(
            f"the topics ({', '.join(t.qid for t in topics[:5])}...) and the "
            f"{'nuggets' if answers else 'qrels'} ({', '.join(list(judged)[:5])}...) share no "
            "topic: a different topic set?"
        )
    done = [materialise(p, n, experiment, answers, make, concurrency) for p, n in zip(pipelines, row_names)]
    for result in done:
        if not set(result.results) & set(qids):
            raise ExperimentError(
                f"{result.name} has results for none of the experiment's {len(qids)} topics "
                f"(it has {', '.join(sorted(result.results)[:5]) or 'none'}): a run of "
                "another topic set?"
            )
    scores = [
        measures.score_answers(r.name, r.results, judged, qids, list(chosen), judge, segments, concurrency)
        if answers
        else measures.score_ranking(r.results, judged, qids, chosen, maxp)  # type: ignore[arg-type]
        for r in done
    ]
    return Measured(done, scores, qids, list(chosen), base, test, correction, alpha)


def Experiment(
    pipelines: Sequence[Any],
    topics: Sequence[Topic],
    *,
    perquery: bool = False,  # noqa: N802
    **options: Any,
) -> Any:
    """:func:`measure`'s means (one row per pipeline), or with ``perquery`` its per-topic scores."""
    measured = measure(pipelines, topics, **options)
    return measured.perquery() if perquery else measured.means()


def _perquery(names: list[str], scores: list[measures.PerTopic], qids: list[str], columns: list[str]) -> Any:
    import pandas as pd  # noqa: PLC0415

    rows = [
        {"name": name, "qid": q, "measure": m, "value": per[m][q]}
        for name, per in zip(names, scores)
        for q in qids
        for m in columns
    ]
    return pd.DataFrame(rows, columns=["name", "qid", "measure", "value"])


def _means(
    done: list[Result],
    scores: list[measures.PerTopic],
    qids: list[str],
    columns: list[str],
    base: int | None,
    test: str,
    correction: str | None,
    alpha: float,
) -> Any:
    import pandas as pd  # noqa: PLC0415

    rows: list[dict[str, Any]] = []
    for result, per in zip(done, scores):
        rows.append(
            {
                "name": result.name,
                **{m: sum(per[m][q] for q in qids) / len(qids) for m in columns},
                "topics": len(qids),
                "missing": sum(1 for q in qids if q not in result.results),
            }
        )
    if base is not None:
        others = [i for i in range(len(done)) if i != base]
        for metric in columns:
            line = [scores[base][metric][q] for q in qids]
            for i in others:
                got = compare([scores[i][metric][q] for q in qids], line, test)
                rows[i].update(
                    {
                        f"{metric} +": got.wins,
                        f"{metric} =": got.ties,
                        f"{metric} -": got.losses,
                        f"{metric} p-value": got.p_value,
                    }
                )
            if correction and others:
                adjusted = correct([rows[i][f"{metric} p-value"] for i in others], correction)
                for i, p in zip(others, adjusted):
                    rows[i].update({f"{metric} p-value corrected": p, f"{metric} reject": p < alpha})
    return pd.DataFrame(rows)
