"""Running a pipeline by calling the R and AG services with the standardized JSON
(:class:`~ragnarok.service.services.Services`): over HTTP in a distributed deployment (the services' URLs are
settings), called directly in a single process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ragnarok.core.fuse import cc, dbsf, ranked, rrf
from ragnarok.core.spec import Fusion, Node, Pipeline, QueryStage, Rerank, Source
from ragnarok.core.trace import StageError, StageTrace  # noqa: F401 - StageError: the gateway's, for its callers
from ragnarok.core.types import Candidate, Doc, Query, RagAnswer, Request
from ragnarok.service.services import Services, json_body
from ragnarok.stages.query.stages import Expansion

GENERATION_K = 20
log = logging.getLogger(__name__)
#: The first stage of a pipeline that starts from given candidates (``PipelineRunner.run(given=...)``).
GIVEN = "given"


def _fuse(method: str, requests: list[Request], weights: list[float | None], depth: int, query: Query) -> Request:
    runs = [{c.docid: c.score for c in r.candidates} for r in requests]
    if method == "rrf":
        scores = rrf(runs)
    else:
        given = None if all(w is None for w in weights) else [1.0 if w is None else w for w in weights]
        scores = (cc if method == "cc" else dbsf)(runs, given)
    docs = {c.docid: c.doc for r in requests for c in r.candidates}
    return Request(
        query=query, candidates=[Candidate(docid=d, score=s, doc=docs[d]) for d, s in ranked(scores)[:depth]]
    )


@dataclass
class PipelineRun:
    """What a pipeline produced: the answer (or the final ranking when it has no generator), the ranking the
    last retrieval or rerank stage handed on, and a trace per stage."""

    result: RagAnswer | Request
    ranking: Request
    traces: list[StageTrace]

    def cited_docs(self) -> dict[str, Doc]:
        """The stored fields (title, segment, url) of each segment the answer cites, by segment id."""
        refs = self.result.references if isinstance(self.result, RagAnswer) else []
        docs = {c.docid: c.doc for c in self.ranking.candidates}
        return {ref: docs[ref] for ref in refs if ref in docs}


class PipelineRunner:
    def __init__(self, services: Services, index: str | None = None):
        self.services, self.index = services, index
        self.stage = ""  # the stage running now (a streamed answer's error event names it)

    async def _source(
        self, node: Node, query: Query, depth: int, expansion: Expansion | None = None
    ) -> tuple[Request, float | None]:
        """``expansion``: the query as query stages rewrote it (dense retrievers get its ``dense`` text,
        the others its ``lexical`` text); the ranking always carries the original ``query``."""
        if isinstance(node, Fusion):
            parts = await asyncio.gather(*(self._source(n, query, depth, expansion) for n in node.sources))
            weights = [n.weight if isinstance(n, Source) else None for n in node.sources]
            times = [ms for _, ms in parts]
            slowest = None if None in times else max(times)  # type: ignore[type-var]
            return _fuse(node.method, [r for r, _ in parts], weights, depth, query), slowest
        name = node.name + (f":{node.arg}" if node.arg else "")
        text = query.text if expansion is None else (expansion.dense if node.name == "dense" else expansion.lexical)
        fields = {"query": text, "qid": query.qid, "retriever": name, "index": self.index, "k": depth}
        data, ms = await self.services.retrieve(f"retrieve {name}", fields)
        request = Request.model_validate_json(data)
        if expansion is not None:
            request.query = query
        return request, ms

    async def _expand(self, stages: tuple[QueryStage, ...], topic: Query, traces: list[StageTrace]) -> list[Expansion]:
        """The queries to retrieve: each query stage rewrites every query so far (the AG service writes)."""
        from ragnarok.stages.components import QUERY_STAGES  # noqa: PLC0415 - the registry

        current = [Expansion.of(topic.text)]
        for stage in stages:
            start = time.perf_counter()
            definition = QUERY_STAGES.create(stage.name)
            answers = await asyncio.gather(
                *(
                    self._write(
                        f"query {stage}",
                        {"task": stage.name, "generator": stage.generator, "query": e.text, "n": stage.n},
                    )
                    for e in current
                )
            )
            expanded = [x for e, a in zip(current, answers) for x in definition.expand(e, a["items"])]
            current = list(dict.fromkeys(expanded))
            detail = {
                "queries": [
                    {"lexical": e.lexical, "dense": e.dense} if e.lexical != e.dense else e.text for e in current
                ],
                "generated": [a["text"] for a in answers],
                "cached": [a["cached"] for a in answers],
                "generator_ms": [round(a["ms"], 1) for a in answers],
            }
            traces.append(
                StageTrace(
                    str(stage),
                    len(current),
                    (time.perf_counter() - start) * 1000,
                    [],
                    max(a["ms"] for a in answers),
                    detail,
                )
            )
        return current

    async def _write(self, stage: str, fields: dict[str, Any]) -> dict[str, Any]:
        data, _ = await self.services.post(
            self.services.generation,
            stage,
            "/v1/write",
            json.dumps({k: v for k, v in fields.items() if v is not None}).encode(),
        )
        return json.loads(data)

    async def _retrieve(
        self, pipeline: Pipeline, topic: Query, expansions: list[Expansion] | None
    ) -> tuple[Request, float | None]:
        """The first stage; after query stages, each query retrieved and the rankings fused (RRF unless a
        query stage says ``~cc``/``~dbsf``)."""
        if not expansions:
            return await self._source(pipeline.retrieve, topic, pipeline.depth)
        parts = await asyncio.gather(*(self._source(pipeline.retrieve, topic, pipeline.depth, e) for e in expansions))
        times = [ms for _, ms in parts]
        slowest = None if None in times else max(times)  # type: ignore[type-var]
        if len(parts) == 1:
            return parts[0][0], slowest
        method = next((q.fuse for q in reversed(pipeline.query) if q.fuse), "rrf")
        return _fuse(method, [r for r, _ in parts], [None] * len(parts), pipeline.depth, topic), slowest

    async def _passage(self, stage: Rerank, request: Request, topic: Query) -> tuple[Request, dict[str, Any]]:
        """A passage stage, run here, calling the services for what it needs (segments, embeddings, text)."""
        from ragnarok.stages.components import PASSAGE_STAGES  # noqa: PLC0415 - the registry
        from ragnarok.stages.passage.base import StageContext  # noqa: PLC0415

        name = f"{stage.name}" + (f":{stage.arg}" if stage.arg else "")

        async def segments(prefixes: list[str]) -> dict[str, Candidate]:
            body = json.dumps({"index": self.index, "prefixes": prefixes}).encode()
            data, _ = await self.services.post(self.services.retrieval, f"passage {name}", "/v1/segments", body)
            return {p: Candidate.model_validate(c) for p, c in json.loads(data)["segments"].items()}

        async def rerank(reranker: str, given: Request, k: int) -> Request:
            body = json_body({"reranker": reranker, "k": k}, request=given)
            data, _ = await self.services.post(self.services.retrieval, f"passage {name}", "/v1/rerank", body)
            return Request.model_validate_json(data)

        async def write(fields: dict[str, Any]) -> dict[str, Any]:
            return await self._write(f"passage {name}", fields)

        component = PASSAGE_STAGES.create(stage.name, arg=stage.arg)
        return await component.apply(request, stage.depth, StageContext(topic, segments, rerank, write))

    def check(self, pipeline: Pipeline) -> None:
        """Every query and passage stage exists and takes its argument, before anything runs (404/422 naming
        it); a query stage written after the retriever is named as such."""
        from ragnarok.core.registry import ComponentArgumentError, lookup  # noqa: PLC0415
        from ragnarok.stages.components import PASSAGE_STAGES, QUERY_STAGES, RERANKERS  # noqa: PLC0415 - the registry

        for q in pipeline.query:
            QUERY_STAGES.get(q.name)
            if q.name in ("hyde", "query2doc") and q.n is not None:
                raise ComponentArgumentError(
                    f"{q.name} writes one passage: drop the count in {q}",
                    public=f"{q.name} writes one passage: drop its count",
                )
        for stage in pipeline.rerank:
            if stage.name in QUERY_STAGES.entries:
                raise ComponentArgumentError(
                    f"{stage.name} is a query stage: it goes before the retriever, e.g. "
                    f"`{stage.name}:GENERATOR > {pipeline.retrieve}@{pipeline.depth}`, not after it ({stage})",
                    public=f"{stage.name} is a query stage: it goes before the retriever (`{stage.name}:GENERATOR > "
                    "RETRIEVER@K`), not after it",
                )
            if lookup(stage.name, RERANKERS, PASSAGE_STAGES) is PASSAGE_STAGES:  # unknown: 404, did you mean
                if stage.fuse:
                    raise ComponentArgumentError(
                        f"a passage stage is not fused with its input: drop ~{stage.fuse} from {stage}",
                        public=f"a passage stage is not fused with its input: drop the ~ after {stage.name}",
                    )
                PASSAGE_STAGES.create(stage.name, arg=stage.arg)

    async def ranking(
        self, pipeline: Pipeline, topic: Query, given: Request | None = None
    ) -> AsyncIterator[StageTrace | Request]:
        """Every stage before the generator: each stage's trace as it finishes, then the ranking handed on."""
        self.check(pipeline)
        start = time.perf_counter()
        if given is not None:
            if pipeline.retrieve != Source(GIVEN):
                raise ValueError(
                    f"candidates were given: the pipeline must start with `{GIVEN}`, not {pipeline.retrieve}"
                )
            if pipeline.query:
                raise ValueError(f"candidates were given: query stages cannot run ({pipeline.query[0]})")
            request, ms = given.model_copy(update={"candidates": given.candidates[: pipeline.depth]}), 0.0
        else:
            if pipeline.query:
                self.stage = str(pipeline.query[0])
                traces: list[StageTrace] = []
                expansions = await self._expand(pipeline.query, topic, traces)
                for trace in traces:
                    yield trace
            else:
                expansions = None
            start = time.perf_counter()
            self.stage = str(pipeline.retrieve)
            request, ms = await self._retrieve(pipeline, topic, expansions)
        yield _trace(f"{pipeline.retrieve}", pipeline.depth, start, request, ms)
        from ragnarok.stages.components import PASSAGE_STAGES  # noqa: PLC0415 - the registry

        for stage in pipeline.rerank:
            start = time.perf_counter()
            self.stage = str(stage)
            if stage.name in PASSAGE_STAGES.entries:
                request, detail = await self._passage(stage, request, topic)
                trace = _trace(str(stage), stage.depth, start, request, None)
                trace.detail = detail
                yield trace
                continue
            name = stage.name + (f":{stage.arg}" if stage.arg else "")
            body = json_body({"reranker": name, "k": stage.depth}, request=request)
            data, ms = await self.services.post(self.services.retrieval, f"rerank {name}", "/v1/rerank", body)
            reranked = Request.model_validate_json(data)
            if stage.fuse:
                reranked = _fuse(stage.fuse, [reranked, request], [None, None], stage.depth, topic)
            request = reranked
            yield _trace(str(stage), stage.depth, start, request, ms)
        yield request

    async def run(self, pipeline: Pipeline, topic: Query, given: Request | None = None) -> PipelineRun:
        """Run every stage (see :class:`PipelineRun` for what comes back).

        ``given``: candidates handed over instead of retrieved (the track's AG task), for a pipeline whose
        first stage is ``given``; its top ``depth`` go on to the rerankers and the generator."""
        traces: list[StageTrace] = []
        request = None
        async for item in self.ranking(pipeline, topic, given):
            if isinstance(item, StageTrace):
                traces.append(item)
            else:
                request = item
        assert request is not None
        if pipeline.generate is None:
            return PipelineRun(request, request, traces)
        start = time.perf_counter()
        gen = pipeline.generate
        self.stage = str(gen)
        top = request.model_copy(update={"candidates": request.candidates[:GENERATION_K]})  # all AG reads
        answer, notes, ms = await self.services.generate(
            f"generate {gen}", topic, top, gen.name, gen.template, self._generate_body(topic, top, gen)
        )
        trace = StageTrace(str(gen), GENERATION_K, (time.perf_counter() - start) * 1000, answer.references, ms)
        trace.detail = notes  # what post-processing did (repeats dropped, attribution)
        traces.append(trace)
        return PipelineRun(answer, top, traces)

    @staticmethod
    def _generate_body(topic: Query, top: Request, gen: Any, stream: bool = False) -> bytes:
        fields = {
            "topic": topic.text,
            "topic_id": str(topic.qid),
            "generator": gen.name,
            "template": gen.template,
            "k": GENERATION_K,
            "notes": True,
        }
        return json_body({**fields, "stream": True} if stream else fields, request=top)


def _trace(stage: str, k: int, start: float, request: Request, service_ms: float | None) -> StageTrace:
    return StageTrace(stage, k, (time.perf_counter() - start) * 1000, [c.docid for c in request.candidates], service_ms)
