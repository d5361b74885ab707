"""Scoring one pipeline spec on a set of topics: the objective (a retrieval metric through
:mod:`ragnarok.core.evaluation`, or a nugget score of the answers with the judge), each node's metric and its
seconds per query. Pipelines run through the gateway's own runner, in process, with the stage cache."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.core.evaluation import Qrels, needs_maxp, per_query, read_qrels
from ragnarok.core.settings import Settings
from ragnarok.core.spec import Pipeline, Source, parse
from ragnarok.core.topics import Topic
from ragnarok.core.types import Query, RagAnswer
from ragnarok.optimize.cache import CachingRunner, CachingServices, StageCache
from ragnarok.optimize.config import NUGGET_METRICS, OptimizeConfig, one_line
from ragnarok.optimize.space import NONE, Space


class TrialError(RuntimeError):
    """The pipeline failed on a topic (the message names the stage and the topic)."""


class NoJudgmentsError(ValueError):
    """No topic has judgments (qrels or nuggets) for the objective."""


@dataclass
class TrialResult:
    spec: str
    value: float  # the objective's mean over the topics
    per_topic: dict[str, float]
    node_metrics: dict[str, float] = field(default_factory=dict)
    node_seconds: dict[str, float] = field(default_factory=dict)  # seconds per query (median), per node
    too_slow: list[str] = field(default_factory=list)  # nodes over their speed threshold
    wall_s: float = 0.0
    load: float = 1.0  # how much slower the reference workload ran in this trial than its fastest (>= 1)
    run: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)  # the final ranking per topic


def split_topics(
    qids: Sequence[str], test: float | None, folds: int | None, seed: int
) -> list[tuple[list[str], list[str]]]:
    """``[(train, test), ...]``: one split (a seeded shuffle, ``test`` of it held out) or ``folds`` folds."""
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    if folds:
        parts = [order[i::folds] for i in range(folds)]
        return [([q for j, p in enumerate(parts) if j != i for q in p], parts[i]) for i in range(folds)]
    cut = max(1, min(len(order) - 1, round(len(order) * (1 - (test or 0.5)))))
    return [(order[:cut], order[cut:])]


def probe() -> float:
    """Seconds a fixed CPU workload takes now (a few ms): timed beside each batch of a trial's topics, its
    ratio to the fastest time seen says how loaded the machine is."""
    import time  # noqa: PLC0415

    start = time.perf_counter()
    total = 0
    for i in range(60_000):
        total += i * i % 7
    return time.perf_counter() - start


def _run(ranking: Sequence[str]) -> dict[str, float]:
    return {docid: float(len(ranking) - i) for i, docid in enumerate(ranking)}


class Evaluator:
    """Runs specs over topics; one per process (it holds the app, the event loop and the cache)."""

    def __init__(self, config: OptimizeConfig, space: Space, settings: Settings):
        from ragnarok.core.topic_sets import nuggets_path, qrels_path, resolve_topics  # noqa: PLC0415

        self.config, self.space = config, space
        index = config.index
        if Path(index).is_dir():
            settings = settings.model_copy(update={"indexes": {**settings.indexes, f"path:{index}": index}})
            index = f"path:{index}"
        self.settings, self.index = settings, index
        self.nuggets = None
        self.qrels: Qrels | None = read_qrels(qrels_path(config.qrels, settings)) if config.qrels else None
        if config.nuggets:
            from ragnarok.judge.nuggets import read_nuggets  # noqa: PLC0415

            self.nuggets = read_nuggets(nuggets_path(config.nuggets, settings))
        self.generation = config.objective in NUGGET_METRICS
        self.topics = {t.qid: t for t in resolve_topics(config.topics, settings)}
        judged = self.nuggets if self.generation else self.qrels
        self.judged = sorted(
            q for q in self.topics if judged and q in judged and (not self.generation or judged[q].nuggets)
        )  # type: ignore[union-attr]
        if len(self.judged) < 2:
            kind = "nuggets" if self.generation else "qrels"
            raise NoJudgmentsError(
                f"{len(self.judged)} of the {len(self.topics)} topics in {config.topics} have "
                f"judgments in the {kind} ({getattr(config, kind)}); need at least 2 to split"
            )
        self.cache = StageCache(config.cache.memory_mb, config.cache.disk)
        self._loop = asyncio.new_event_loop()
        self._runner: CachingRunner | None = None
        self._judge: Any = None
        self._judged: dict[tuple[str, str], dict[str, float]] = {}
        self.last_run: dict[str, dict[str, float]] = {}
        self._scores: dict[tuple[str, tuple[str, ...], bool], TrialResult] = {}
        self._metric_values: dict[tuple[str, bool, str, bytes], float | None] = {}  # see _per_topic
        self.probe_min = min(probe() for _ in range(3))  # the reference workload's fastest time

    def splits(self) -> list[tuple[list[str], list[str]]]:
        s = self.config.split
        return split_topics(self.judged, s.test, s.folds, s.seed)

    def runner(self) -> CachingRunner:
        if self._runner is None:
            from ragnarok.service.batch import local_services  # noqa: PLC0415

            services, self._app = local_services(self.settings)
            self._runner = CachingRunner(
                CachingServices(services.retrieval, services.generation, self.cache), self.index, self.cache
            )
        return self._runner

    def close(self) -> None:
        self.cache.close()
        self._loop.close()

    # --- scoring -------------------------------------------------------------------------------------------

    def score(self, spec: str, qids: Sequence[str], check_speed: bool = True) -> TrialResult:
        import time  # noqa: PLC0415

        start = time.perf_counter()
        key = (spec, tuple(qids), check_speed)
        if key in self._scores and self.cache.enabled:  # a sampler that suggests a pipeline again (TPE does)
            known = self._scores[key]
            return dataclasses.replace(known, wall_s=time.perf_counter() - start)
        pipeline = parse(spec)
        result = self._loop.run_until_complete(self._score(pipeline, list(qids), check_speed))
        result.wall_s = time.perf_counter() - start
        self._scores[key] = result
        return result

    async def _score(self, pipeline: Pipeline, qids: list[str], check_speed: bool) -> TrialResult:
        runner = self.runner()
        slots = asyncio.Semaphore(self.config.concurrency)
        seconds: dict[str, list[float]] = {}
        rankings: dict[str, dict[str, list[str]]] = {}
        answers: dict[str, RagAnswer] = {}

        async def one(qid: str) -> None:
            topic = self.topics[qid]
            async with slots:
                for attempt in (1, 2):  # once more after a failure (seen: a transient JVM exception in Lucene)
                    try:
                        run = await runner.run(pipeline, Query(text=topic.text, qid=qid))
                        alone = await self._alone(pipeline, topic)
                        break
                    except Exception as exc:  # noqa: BLE001 - a stage failing twice fails the trial, named
                        if attempt == 2:
                            raise TrialError(f"topic {qid}: {one_line(exc)[:300]}") from None
            for node, ranking, ms in self._by_node(pipeline, run.traces) + alone:
                seconds.setdefault(node, []).append(ms / 1000)
                if ranking is not None:
                    rankings.setdefault(node, {})[qid] = ranking
            if isinstance(run.result, RagAnswer):
                answers[qid] = run.result

        done = 0
        chunk = max(self.config.concurrency, 2)
        too_slow: list[str] = []
        probes = [probe()]
        while done < len(qids):
            await asyncio.gather(*(one(q) for q in qids[done : done + chunk]))
            done += chunk
            probes.append(probe())  # the reference workload, timed in the same batch as the topics
            self.probe_min = min(self.probe_min, *probes)
            if check_speed and (too_slow := self._over(seconds, self.load(probes))):
                break  # AutoRAG's speed threshold: a candidate too slow on the first topics is dropped
        node_seconds = {n: statistics.median(v) for n, v in seconds.items()}
        load = self.load(probes)
        if too_slow:
            return TrialResult(str(pipeline), float("nan"), {}, {}, node_seconds, too_slow, load=load)
        self.last_run = {q: _run(r) for q, r in rankings.get("final", {}).items()}
        per_topic = self._objective(qids, rankings.get("final", {}), answers)
        metrics = {}
        for node in self.space.nodes:
            metric = node.metric or self.config.objective
            if metric in NUGGET_METRICS or node.name == "generator":
                metrics[node.name] = _mean(self._nugget(qids, answers, metric)) if answers else float("nan")
            else:
                source = {"query": "retrieval"}.get(node.name, node.name)
                ranked = rankings.get(source) or rankings.get("retrieval", {})
                metrics[node.name] = self._retrieval(ranked, metric)
        return TrialResult(
            str(pipeline), _mean(per_topic), per_topic, metrics, node_seconds, load=load, run=self.last_run
        )

    async def _alone(self, pipeline: Pipeline, topic: Topic) -> list[tuple[str, list[str] | None, float]]:
        """The lexical and the semantic node's own rankings (AutoRAG scores each node's modules alone)."""
        out = []
        if pipeline.query:
            return out
        for source in pipeline.sources():
            node = "semantic" if source.name == "dense" else "lexical"
            if self.space.node(node) is None or len(pipeline.sources()) == 1:
                continue
            request, ms = await self.runner()._source(
                Source(source.name, source.arg), Query(text=topic.text, qid=topic.qid), pipeline.depth
            )
            out.append((node, [c.docid for c in request.candidates], ms or 0.0))
        return out

    def _by_node(self, pipeline: Pipeline, traces: list[Any]) -> list[tuple[str, list[str] | None, float]]:
        """Each trace as (node, ranking, ms): the service's own time when it says, else the gateway's."""
        from ragnarok.stages.components import PASSAGE_STAGES  # noqa: PLC0415

        names = ["query"] * len(pipeline.query) + ["retrieval"]
        passage = self.space.node("passage")
        for stage in pipeline.rerank:
            if (
                stage.name == "cutoff"
                and stage.arg == "0"
                and (passage is None or all(c.module != "cutoff" for c in passage.candidates))
            ):
                names.append("generator")
            else:
                names.append("passage" if stage.name in PASSAGE_STAGES.entries else "rerank")
        names += ["generator"] if pipeline.generate else []
        out: list[tuple[str, list[str] | None, float]] = []
        last = None
        for name, trace in zip(names, traces):
            ms = trace.service_ms if trace.service_ms is not None else trace.latency_ms
            ranking = trace.ranking if name not in ("query", "generator") else None
            if name == "retrieval" and len(pipeline.sources()) == 1:
                out.append(("semantic" if pipeline.sources()[0].name == "dense" else "lexical", ranking, ms))
            out.append((name, ranking, ms))
            if ranking is not None and name != "generator":
                last = ranking
        if last is not None:
            out.append(("final", last, 0.0))
        return out

    def load(self, probes: Sequence[float]) -> float:
        """How loaded the machine was during a trial: the median time of the reference workload timed beside
        its batches over the fastest time seen (1: as fast as ever)."""
        return max(1.0, statistics.median(probes) / self.probe_min) if self.probe_min > 0 else 1.0

    def _over(self, seconds: Mapping[str, list[float]], load: float = 1.0) -> list[str]:
        """Nodes over their speed threshold, scaled by the load measured in the same batch (a busy machine makes
        every candidate slow, and a threshold of the idle machine would drop them all)."""
        return [
            n.name
            for n in self.space.nodes
            if n.max_seconds is not None
            and seconds.get(n.name)
            and statistics.median(seconds[n.name]) > n.max_seconds * load
        ]

    def _retrieval(self, rankings: Mapping[str, list[str]], metric: str) -> float:
        if not rankings or self.qrels is None:
            return float("nan")
        return _mean(self._per_topic(rankings, metric))

    def _per_topic(self, rankings: Mapping[str, list[str]], metric: str) -> dict[str, float]:
        """``per_query`` of the rankings for one metric, ``{qid: value}`` (the topics it scores). A topic's value
        depends on its ranking alone, so each (metric, topic, ranking) is computed once per process: a trial
        whose node rankings were scored before (the same retriever in another pipeline, or a warm trial) asks
        ir-measures for none."""
        assert self.qrels is not None
        if len(self._metric_values) > 200_000:  # bounded: about 40 MB
            self._metric_values.clear()
        maxp = needs_maxp(self.qrels, {q: dict.fromkeys(r) for q, r in rankings.items()})
        keys = {
            q: (metric, maxp, q, hashlib.blake2b("\0".join(r).encode(), digest_size=16).digest())
            for q, r in rankings.items()
        }
        todo = {q: _run(r) for q, r in rankings.items() if keys[q] not in self._metric_values}
        if todo:
            values = per_query(self.qrels, todo, {metric: metric}, maxp=maxp)
            for q in todo:
                self._metric_values[keys[q]] = values[q][metric] if q in values else None
        out = {q: self._metric_values[k] for q, k in keys.items()}
        return {q: v for q, v in out.items() if v is not None}

    def _objective(
        self, qids: Sequence[str], rankings: Mapping[str, list[str]], answers: Mapping[str, RagAnswer]
    ) -> dict[str, float]:
        metric = self.config.objective
        if self.generation:
            return self._nugget(qids, answers, metric)
        return self._per_topic({q: r for q, r in rankings.items() if q in qids}, metric)

    def _nugget(self, qids: Sequence[str], answers: Mapping[str, RagAnswer], metric: str) -> dict[str, float]:
        """Each answered topic's nugget score (the judge's; each answer text judged once per process)."""
        from ragnarok.judge.answers import Answer  # noqa: PLC0415
        from ragnarok.judge.evalrag import judge_topic  # noqa: PLC0415
        from ragnarok.judge.service import make_judge  # noqa: PLC0415

        if self.nuggets is None:
            return {}
        if self._judge is None:
            self._judge = make_judge(self.settings, self.config.judge)
        out = {}
        for qid in qids:
            answer = answers.get(qid)
            if answer is None or qid not in self.nuggets:
                continue
            text = " ".join(s.text for s in answer.answer)
            key = (qid, text)
            if key not in self._judged:
                judged = Answer(
                    qid, self.topics[qid].text, [(s.text, s.citations) for s in answer.answer], answer.references
                )
                result, _ = judge_topic(self._judge, judged, self.nuggets[qid], None, None)
                self._judged[key] = result.scores
            out[qid] = self._judged[key].get(metric, 0.0)
        return out


def _mean(values: Mapping[str, float]) -> float:
    return statistics.fmean(values.values()) if values else float("nan")


def label_note(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels.items() if v != NONE)
