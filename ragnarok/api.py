"""The Python API, for notebooks and scripts: ``ragnarok.rag``, ``retrieve``, ``search``, ``run``, ``evaluate``,
``Experiment``, ``load_topics``, ``load_qrels`` and ``Pipeline``.

It runs the same code as the command line and ``POST /rag``, on the same settings (``RAGNAROK_*`` and
``.env``; every function takes ``settings=`` instead), so a notebook gets the answers the service gives. A
:class:`Pipeline` keeps its loaded indexes and models, and the module-level functions keep one per pipeline
spec, so a second call loads nothing again. Bad input raises the project's exceptions with the CLI's messages.

Design notes: docs/internals/python-api.md.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# load_topics and load_qrels are this API's too (``ragnarok.load_topics``): they live with the other input readers
from ragnarok.core.inputs import as_query, load_qrels, load_topics, parse_pipeline
from ragnarok.core.results import Answers, Ranking, TopicsFailed
from ragnarok.core.settings import Settings, get_settings, index_name, with_index_path
from ragnarok.core.topics import Topic
from ragnarok.core.types import RagAnswer, Request
from ragnarok.runtime.loop_thread import LoopThread

#: The pipeline the functions run when given none (``ragnarok run``'s default).
DEFAULT_PIPELINE = "offline"


class SearchFailed(TopicsFailed):
    """Some topics failed after their retries: ``failures`` names each one, ``run`` holds the others."""

    @property
    def run(self) -> Ranking:
        return self.results


class Pipeline:
    """A pipeline, loaded once and reused across calls: its indexes, models and services stay loaded.

    ``spec``: a pipeline spec (``'bm25@100 | extractive'``), a preset name (``offline``, or one ``ragnarok
    optimize`` saved) or a TOML/YAML pipeline file. Every component it names is checked at once (a typo fails
    here, with "did you mean ...?"); nothing loads until the first call (the demo index is built then, on
    first use, as ``ragnarok run`` builds it).

    >>> p = Pipeline("bm25@20 | extractive")
    >>> p.rag("what does the yield statement do").references[:3]   # doctest: +SKIP
    >>> p.retrieve("yield statement", k=3).candidates[0].docid     # doctest: +SKIP
    >>> p.close()                                                   # or: with Pipeline(...) as p: ...
    """

    def __init__(self, spec: str = DEFAULT_PIPELINE, *, index: str | None = None, settings: Settings | None = None):
        from ragnarok.track.run import check_names  # noqa: PLC0415

        # an index directory or prebuilt:NAME is named as `ragnarok search --index` names it
        self.settings = with_index_path(settings or get_settings(), index)
        self.spec, self.index = str(spec), index_name(index)
        self.pipeline = parse_pipeline(self.spec, self.settings)
        check_names(self.pipeline, self.settings, self.index)
        self._services: Any = None
        self._app: Any = None  # the in-process app behind the services (kept alive with them)
        self._loop: LoopThread | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Pipeline({str(self.pipeline)!r}" + (f", index={self.index!r})" if self.index else ")")

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _ready(self) -> tuple[Any, LoopThread]:
        """The services and the loop, made on the first call (the demo index built if it is missing)."""
        with self._lock:
            if self._services is None:
                from ragnarok.service.batch import local_services  # noqa: PLC0415
                from ragnarok.track.run import prepare_demo_index  # noqa: PLC0415

                prepare_demo_index(self.pipeline, self.settings, self.index)
                self._services, self._app = local_services(self.settings)
                self._loop = LoopThread()
            assert self._loop is not None
            return self._services, self._loop

    def _runner(self) -> tuple[Any, LoopThread]:
        from ragnarok.service.gateway import PipelineRunner  # noqa: PLC0415

        services, loop = self._ready()
        return PipelineRunner(services, self.index), loop

    def rag(self, topic: str | Topic, topic_id: str = "") -> RagAnswer:
        """The answer ``POST /rag`` gives for ``topic`` (its JSON: ``answer.model_dump_json()``): sentences
        citing ``references`` (segment ids) by index."""
        if self.pipeline.generate is None:
            raise ValueError("the pipeline has no generation stage: end it with a generator, e.g. `| extractive`")
        runner, loop = self._runner()
        result = loop.run(runner.run(self.pipeline, as_query(topic, topic_id))).result
        assert isinstance(result, RagAnswer)
        return result

    def retrieve(self, query: str | Topic, k: int | None = None) -> Request:
        """The ranking the pipeline's retrieval part (every stage before the generator) gives ``query``: a
        rank_llm Request (``query``, ``candidates`` with ``docid``, ``score`` and the segment in ``doc``).
        ``k``: how many candidates (a pipeline without rerank stages retrieves ``k``; else its ranking is cut)."""
        runner, loop = self._runner()
        result = loop.run(runner.run(self._retrieval(k), as_query(query, ""))).result
        assert isinstance(result, Request)
        return result.model_copy(update={"candidates": result.candidates[:k]}) if k else result

    def search(
        self, topics: str | Path | Iterable[str | Topic] | Mapping[str, str], *, concurrency: int = 4
    ) -> Ranking:
        """A run of the pipeline's retrieval part over ``topics``: ``{qid: {docid: score}}`` in the topics'
        order (a :class:`~ragnarok.core.results.Ranking`: ``.to_pandas()`` gives qid, docid, rank, score), what
        ``ragnarok search --pipeline`` writes (:func:`ragnarok.core.trec.write_run` writes it out).

        ``topics``: a set name (``demo``, ``rag24``, ...), a topic file, ``{qid: text}``, or a list of topics
        or strings (numbered ``q1``, ``q2``, ...). Topics that still fail after their retries raise
        :class:`SearchFailed` (its ``run`` holds the others)."""
        results, failures = self._each(self._retrieval(None), topics, concurrency)
        run = Ranking({qid: {c.docid: c.score for c in result.candidates} for qid, result in results.items()})
        if failures:
            raise SearchFailed(failures, run)
        return run

    def run(self, topics: str | Path | Iterable[str | Topic] | Mapping[str, str], *, concurrency: int = 4) -> Answers:
        """The pipeline's answers to ``topics`` (as :meth:`search` takes them): ``{qid: RagAnswer}`` in the
        topics' order (an :class:`~ragnarok.core.results.Answers`: ``.to_pandas()`` gives a row per sentence with
        its citations), what ``ragnarok run`` writes. Topics that still fail after their retries raise
        :class:`~ragnarok.core.results.TopicsFailed` (its ``results`` holds the others)."""
        if self.pipeline.generate is None:
            raise ValueError("the pipeline has no generation stage: end it with a generator, e.g. `| extractive`")
        results, failures = self._each(self.pipeline, topics, concurrency)
        answers = Answers(results)
        if failures:
            raise TopicsFailed(failures, answers)
        return answers

    def _each(self, pipeline: Any, topics: Any, concurrency: int) -> tuple[dict[str, Any], list[Any]]:
        """Every topic through ``pipeline`` (the batch runner's retries and bounds): results in the topics'
        order, and the topics that failed."""
        from ragnarok.service.batch import run_topics  # noqa: PLC0415

        loaded = load_topics(topics, self.settings)
        services, loop = self._ready()
        failures: list[Any] = []
        results = loop.run(
            run_topics(
                pipeline, loaded, self.settings, self.index, concurrency, on_failure=failures.append, services=services
            )
        )
        return {t.qid: results[t.qid] for t in loaded if t.qid in results}, failures

    def _retrieval(self, k: int | None) -> Any:
        part = dataclasses.replace(self.pipeline, generate=None)
        return dataclasses.replace(part, depth=k) if k and not part.rerank else part

    def close(self) -> None:
        """Stop the pipeline's event loop and let its services go (a later call loads them again)."""
        with self._lock:
            if self._loop is not None:
                self._loop.close()
            self._services = self._app = self._loop = None


_pipelines: dict[tuple[str, str | None, str], Pipeline] = {}
_pipelines_lock = threading.Lock()


def pipeline_for(
    pipeline: str | Pipeline | None, index: str | None = None, settings: Settings | None = None
) -> Pipeline:
    """``pipeline`` itself when it is a :class:`Pipeline`; else the one kept for this spec, index and
    settings (made on first use): what lets ``ragnarok.rag(...)`` twice load its models once."""
    if isinstance(pipeline, Pipeline):
        return pipeline
    settings = settings or get_settings()
    key = (str(pipeline or DEFAULT_PIPELINE), index, settings.model_dump_json())
    with _pipelines_lock:
        if key not in _pipelines:
            _pipelines[key] = Pipeline(key[0], index=index, settings=settings)
        return _pipelines[key]


def rag(
    topic: str | Topic,
    pipeline: str | Pipeline | None = None,
    *,
    topic_id: str = "",
    index: str | None = None,
    settings: Settings | None = None,
) -> RagAnswer:
    """The standardized answer (what ``POST /rag`` returns) to ``topic``; see :meth:`Pipeline.rag`.

    >>> ragnarok.rag("run a shell command and capture its output", pipeline="bm25@20 | extractive")  # doctest: +SKIP
    """
    return pipeline_for(pipeline, index, settings).rag(topic, topic_id)


def retrieve(
    query: str | Topic,
    k: int | None = None,
    pipeline: str | Pipeline | None = "bm25",
    *,
    index: str | None = None,
    settings: Settings | None = None,
) -> Request:
    """Candidates for ``query`` (a rank_llm Request); see :meth:`Pipeline.retrieve`.

    >>> [c.docid for c in ragnarok.retrieve("read a csv file", k=3).candidates]   # doctest: +SKIP
    """
    return pipeline_for(pipeline, index, settings).retrieve(query, k)


def search(
    topics: str | Path | Iterable[str | Topic] | Mapping[str, str],
    pipeline: str | Pipeline | None = "bm25",
    *,
    index: str | None = None,
    concurrency: int = 4,
    settings: Settings | None = None,
) -> Ranking:
    """A run ``{qid: {docid: score}}`` over ``topics`` (a set name, a file, ``{qid: text}`` or a list); see
    :meth:`Pipeline.search`.

    >>> run = ragnarok.search("demo", pipeline="bm25+rocchio@100")   # doctest: +SKIP
    """
    return pipeline_for(pipeline, index, settings).search(topics, concurrency=concurrency)


def run(
    topics: str | Path | Iterable[str | Topic] | Mapping[str, str],
    pipeline: str | Pipeline | None = None,
    *,
    index: str | None = None,
    concurrency: int = 4,
    settings: Settings | None = None,
) -> Answers:
    """The answers ``{qid: RagAnswer}`` to ``topics`` (a set name, a file, ``{qid: text}`` or a list), as
    ``ragnarok run`` gives them; see :meth:`Pipeline.run`.

    >>> ragnarok.run("demo", pipeline="bm25@20 | extractive").to_pandas()   # doctest: +SKIP
    """
    return pipeline_for(pipeline, index, settings).run(topics, concurrency=concurrency)


def evaluate(
    run: Mapping[str, Any] | Iterable[RagAnswer] | str | Path,
    *,
    qrels: Any = None,
    nuggets: Any = None,
    judge: str | None = None,
    maxp: bool | None = None,
    settings: Settings | None = None,
) -> dict[str, float]:
    """Scores of a run, as ``ragnarok eval`` (``qrels=``) or ``ragnarok eval-rag --nuggets`` (``nuggets=``) give them.

    With ``qrels`` (a set name such as ``demo`` or ``rag24``, a qrels file, or ``{qid: {docid: grade}}``):
    ``run`` is ``{qid: {docid: score}}`` (:func:`search`'s) or a TREC run file; the result is nDCG@10, MAP@100,
    Recall@100 and MAP over every topic of the qrels (one the run misses scores 0). With ``nuggets`` (a set
    name such as ``demo``, a nugget file, or what :func:`ragnarok.judge.nuggets.read_nuggets` gives): ``run`` is answers (``{qid: RagAnswer}``, a
    list of them, or a run file) and the result each nugget score's mean, judged by ``judge`` (a configured
    generator; default the settings' judge, else the proxy judge, no LLM).

    >>> ragnarok.evaluate(run, qrels="demo")                          # doctest: +SKIP
    {'nDCG@10': 0.61, 'MAP@100': 0.52, 'Recall@100': 0.9, 'MAP': 0.52}
    """
    if (qrels is None) == (nuggets is None):
        raise ValueError("give qrels= (a ranking's scores) or nuggets= (an answer's), one of them")
    settings = settings or get_settings()
    if qrels is not None:
        from ragnarok.core.evaluation import evaluate_all, read_qrels  # noqa: PLC0415
        from ragnarok.core.topic_sets import qrels_path  # noqa: PLC0415
        from ragnarok.core.trec import read_run  # noqa: PLC0415

        judged = qrels if isinstance(qrels, Mapping) else read_qrels(qrels_path(qrels, settings))
        ranked = read_run(run) if isinstance(run, (str, Path)) else run
        return evaluate_all(judged, ranked, maxp=maxp)[0]  # type: ignore[arg-type]
    from ragnarok.judge.run_means import nugget_means  # noqa: PLC0415

    return nugget_means(run, nuggets, judge, settings)


def Experiment(
    pipelines: Iterable[Any],
    topics: Any,
    qrels: Any = None,
    nuggets: Any = None,
    *,  # noqa: N802
    perquery: bool = False,
    **options: Any,
) -> Any:
    """Several pipelines on the same topics, in one pandas DataFrame, as PyTerrier's ``pt.Experiment``
    (:mod:`ragnarok.experiment.experiment` says what each column holds).

    ``pipelines``: specs or presets (``"bm25@100"``, ``"rrf(bm25, dense:minilm)"``), :class:`Pipeline` objects,
    run files (TREC runs with ``qrels``, answer JSONL with ``nuggets``) or results already in hand
    (:func:`search`'s, :func:`run`'s). ``topics``: as :func:`search` takes them. ``qrels`` (a set name, a file or
    ``{qid: {docid: grade}}``): rankings measured with ir-measures (``metrics`` default nDCG@10, MAP@100,
    Recall@100, MAP). ``nuggets`` (a set name or a file): answers judged by ``judge`` as ``eval-rag`` does,
    its cache shared (default metrics ``all``, ``vital``, ``response_length``; ``support=True`` reads the cited
    segments from ``index`` for ``support_precision``/``support_recall``). ``baseline``: a pipeline's position
    or name; ``test``: ``t`` or ``wilcoxon``; ``correction``: ``bonferroni`` or ``holm``.

    ``perquery=True``: one row per pipeline, topic and metric instead. Other options: see :func:`measure`.

    >>> ragnarok.Experiment(["bm25@1000", "bm25+rm3@1000"], "demo", qrels="demo", baseline=0)  # doctest: +SKIP
    """
    measured = measure(pipelines, topics, qrels, nuggets, **options)
    return measured.perquery() if perquery else measured.means()


def measure(
    pipelines: Iterable[Any],
    topics: Any,
    qrels: Any = None,
    nuggets: Any = None,
    *,
    metrics: Iterable[str] | None = None,
    names: Iterable[str] | None = None,
    baseline: int | str | None = None,
    test: str = "t",
    correction: str | None = None,
    alpha: float = 0.05,
    judge: str | None = None,
    support: bool = False,
    maxp: bool | None = None,
    index: str | None = None,
    concurrency: int = 4,
    settings: Settings | None = None,
) -> Any:
    """:func:`Experiment`'s work: every pipeline run and scored once, kept as a
    :class:`~ragnarok.experiment.experiment.Measured` whose ``means()`` and ``perquery()`` are its two tables."""
    from ragnarok.experiment.experiment import measure as measure_runs  # noqa: PLC0415

    settings = settings or get_settings()
    if isinstance(pipelines, (str, Path, Pipeline)):  # one pipeline, metric or name given bare, not in a list
        pipelines = [pipelines]
    metrics = [metrics] if isinstance(metrics, str) else metrics
    names = [names] if isinstance(names, str) else names
    loaded = load_topics(topics, settings)
    judge_, segments, judged = None, None, None
    if nuggets is not None:
        from ragnarok.core.topic_sets import nuggets_path  # noqa: PLC0415
        from ragnarok.judge.nuggets import read_nuggets  # noqa: PLC0415
        from ragnarok.judge.service import make_judge  # noqa: PLC0415

        judged = read_nuggets(nuggets_path(nuggets, settings)) if isinstance(nuggets, (str, Path)) else nuggets
        judge_ = make_judge(settings, judge)
        if support:
            from ragnarok.judge.answers import lucene_segments  # noqa: PLC0415
            from ragnarok.judge.cli import index_dir  # noqa: PLC0415

            segments = lucene_segments(index_dir(settings, index), "title segment")
    return measure_runs(
        list(pipelines),
        loaded,
        qrels=load_qrels(qrels, settings) if qrels is not None else None,
        nuggets=judged,
        metrics=list(metrics) if metrics else None,
        names=list(names) if names else None,
        baseline=baseline,
        test=test,
        correction=correction,
        alpha=alpha,
        judge=judge_,
        segments=segments,
        maxp=maxp,
        make=lambda spec: pipeline_for(spec, index, settings),
        concurrency=concurrency,
    )
