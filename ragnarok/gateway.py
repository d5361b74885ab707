"""Running a pipeline by calling the R and AG services over HTTP with the standardized JSON.

The same code serves a distributed deployment (the services' URLs are settings) and a single process (an
``httpx.ASGITransport`` into the local app): one code path, two transports.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from ragnarok.fuse import cc, dbsf, ranked, rrf
from ragnarok.spec import Fusion, Node, Pipeline, Source
from ragnarok.types import Candidate, Query, RagAnswer, Request

GENERATION_K = 20


class StageError(RuntimeError):
    """A stage failed: ``status`` is what the gateway answers (the stage's 4xx, else 502/504)."""

    def __init__(self, stage: str, status: int, detail: Any):
        self.stage, self.status, self.detail = stage, status, detail
        super().__init__(f"stage {stage!r} failed ({status}): {detail}")


@dataclass
class StageTrace:
    stage: str
    k: int
    latency_ms: float
    ranking: list[str] = field(default_factory=list)


@dataclass
class Services:
    """HTTP clients for the R and AG services (the same client when one app serves both)."""

    retrieval: httpx.AsyncClient
    generation: httpx.AsyncClient

    async def post(self, client: httpx.AsyncClient, stage: str, path: str, body: dict[str, Any]) -> Any:
        try:
            response = await client.post(path, json=body)
        except httpx.TimeoutException:
            raise StageError(stage, 504, "timed out") from None
        except httpx.HTTPError as exc:
            raise StageError(stage, 502, f"cannot reach {client.base_url}: {exc}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text[:500]
            status = response.status_code if response.status_code < 500 else (
                504 if response.status_code == 504 else 502)
            raise StageError(stage, status, detail)
        return response.json()


def _fuse(method: str, requests: list[Request], weights: list[float | None], depth: int, query: Query) -> Request:
    runs = [{c.docid: c.score for c in r.candidates} for r in requests]
    if method == "rrf":
        scores = rrf(runs)
    else:
        given = None if all(w is None for w in weights) else [1.0 if w is None else w for w in weights]
        scores = (cc if method == "cc" else dbsf)(runs, given)
    docs = {c.docid: c.doc for r in requests for c in r.candidates}
    return Request(query=query, candidates=[Candidate(docid=d, score=s, doc=docs[d])
                                            for d, s in ranked(scores)[:depth]])


class PipelineRunner:
    def __init__(self, services: Services, index: str | None = None):
        self.services, self.index = services, index

    async def _source(self, node: Node, query: Query, depth: int) -> Request:
        if isinstance(node, Fusion):
            parts = await asyncio.gather(*(self._source(n, query, depth) for n in node.sources))
            weights = [n.weight if isinstance(n, Source) else None for n in node.sources]
            return _fuse(node.method, list(parts), weights, depth, query)
        name = node.name + (f":{node.arg}" if node.arg else "")
        body = {"query": query.text, "qid": query.qid, "retriever": name, "index": self.index, "k": depth}
        data = await self.services.post(self.services.retrieval, f"retrieve {name}", "/v1/retrieve", body)
        return Request.model_validate(data)

    async def run(self, pipeline: Pipeline, topic: Query) -> tuple[RagAnswer | Request, list[StageTrace]]:
        """Run every stage; returns the answer (or the final ranking when there is no generator) and traces."""
        traces: list[StageTrace] = []
        start = time.perf_counter()
        request = await self._source(pipeline.retrieve, topic, pipeline.depth)
        traces.append(_trace(f"{pipeline.retrieve}", pipeline.depth, start, request))
        for stage in pipeline.rerank:
            start = time.perf_counter()
            name = stage.name + (f":{stage.arg}" if stage.arg else "")
            body = {"request": request.model_dump(mode="json", exclude_none=True), "reranker": name, "k": stage.depth}
            reranked = Request.model_validate(
                await self.services.post(self.services.retrieval, f"rerank {name}", "/v1/rerank", body))
            if stage.fuse:
                reranked = _fuse(stage.fuse, [reranked, request], [None, None], stage.depth, topic)
            request = reranked
            traces.append(_trace(str(stage), stage.depth, start, request))
        if pipeline.generate is None:
            return request, traces
        start = time.perf_counter()
        gen = pipeline.generate
        body = {"topic": topic.text, "topic_id": str(topic.qid), "generator": gen.name, "template": gen.template,
                "k": GENERATION_K, "request": request.model_dump(mode="json", exclude_none=True)}
        data = await self.services.post(self.services.generation, f"generate {gen}", "/v1/generate", body)
        answer = RagAnswer.model_validate(data)
        traces.append(StageTrace(str(gen), GENERATION_K, (time.perf_counter() - start) * 1000, answer.references))
        return answer, traces


def _trace(stage: str, k: int, start: float, request: Request) -> StageTrace:
    return StageTrace(stage, k, (time.perf_counter() - start) * 1000, [c.docid for c in request.candidates])
