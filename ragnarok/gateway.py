"""Running a pipeline by calling the R and AG services over HTTP with the standardized JSON.

The same code serves a distributed deployment (the services' URLs are settings) and a single process (an
``httpx.ASGITransport`` into the local app): one code path, two transports.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import BaseModel

from ragnarok.fuse import cc, dbsf, ranked, rrf
from ragnarok.quoting import shorten
from ragnarok.spec import Fusion, Node, Pipeline, Source
from ragnarok.types import Candidate, Doc, Query, RagAnswer, Request

GENERATION_K = 20
log = logging.getLogger(__name__)
#: The first stage of a pipeline that starts from given candidates (``PipelineRunner.run(given=...)``).
GIVEN = "given"


class StageError(RuntimeError):
    """A stage failed: ``status`` is what the gateway answers (the stage's 4xx, 503 or 504, else 502)."""

    def __init__(self, stage: str, status: int, detail: Any):
        self.stage, self.status, self.detail = stage, status, detail
        super().__init__(f"stage {stage!r} failed ({status}): {detail}")


@dataclass
class StageTrace:
    """One stage as the gateway saw it: ``latency_ms`` from the gateway's side (HTTP hop included),
    ``service_ms`` the services' own time from their ``Server-Timing`` headers (parallel calls: the longest)."""

    stage: str
    k: int
    latency_ms: float
    ranking: list[str] = field(default_factory=list)
    service_ms: float | None = None


def server_time_ms(headers: Any) -> float | None:
    """The ``app;dur=`` figure of a ``Server-Timing`` header (set by the API's middleware), if any."""
    for part in (headers.get("server-timing") or "").split(","):
        name, _, params = part.strip().partition(";")
        if name == "app" and params.startswith("dur="):
            try:
                return float(params[4:])
            except ValueError:
                return None
    return None




def json_body(fields: dict[str, Any], **models: BaseModel) -> bytes:
    """``fields`` as a JSON object with each model spliced in, serialised once by pydantic-core (the
    candidates' text is most of every body; a ``model_dump`` + ``json.dumps`` round costs several ms)."""
    parts = [json.dumps(fields)[1:-1]] if fields else []
    parts += [f"{json.dumps(key)}: {model.model_dump_json(exclude_none=True)}" for key, model in models.items()]
    return ("{" + ", ".join(parts) + "}").encode()


@dataclass
class Services:
    """HTTP clients for the R and AG services (the same client when one app serves both)."""

    retrieval: httpx.AsyncClient
    generation: httpx.AsyncClient

    async def post(self, client: httpx.AsyncClient, stage: str, path: str, body: bytes) -> tuple[bytes, float | None]:
        """The stage's JSON answer (raw) and its own time in ms (None when its service does not say); a stage
        that fails with a 5xx is logged (stage, status, latency, cause)."""
        start = time.perf_counter()
        try:
            return await self._post(client, stage, path, body)
        except StageError as exc:
            if exc.status >= 500:
                log.warning("stage %r failed with HTTP %d after %.0f ms: %s", stage, exc.status,
                            (time.perf_counter() - start) * 1000, shorten(json.dumps(exc.detail, default=str), 600))
            raise

    async def _post(self, client: httpx.AsyncClient, stage: str, path: str, body: bytes) -> tuple[bytes, float | None]:
        try:
            response = await client.post(path, content=body, headers=_JSON)
        except httpx.TimeoutException:
            raise StageError(stage, 504, "timed out") from None
        except httpx.HTTPError as exc:
            raise StageError(stage, 502, f"cannot reach {client.base_url}: {exc}") from None
        if response.status_code >= 400:
            try:
                payload = response.json()
                detail = payload.get("detail", response.text) if isinstance(payload, dict) else response.text[:500]
            except ValueError:
                detail = response.text[:500]
            if response.status_code == 422 and isinstance(detail, list):
                # a validation error of a body the gateway built itself: our fault, not the client's
                raise StageError(stage, 502, "internal error: the stage refused the request the gateway built: "
                                             + shorten(json.dumps(detail), 300))
            # a stage's 4xx, its 503 (a missing index: the detail says how to build it) and 504 pass through
            status = response.status_code if response.status_code < 500 or response.status_code in (503, 504) \
                else 502
            raise StageError(stage, status, detail)
        return response.content, server_time_ms(response.headers)


_JSON = {"content-type": "application/json"}


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

    async def _source(self, node: Node, query: Query, depth: int) -> tuple[Request, float | None]:
        if isinstance(node, Fusion):
            parts = await asyncio.gather(*(self._source(n, query, depth) for n in node.sources))
            weights = [n.weight if isinstance(n, Source) else None for n in node.sources]
            times = [ms for _, ms in parts]
            slowest = None if None in times else max(times)  # type: ignore[type-var]
            return _fuse(node.method, [r for r, _ in parts], weights, depth, query), slowest
        name = node.name + (f":{node.arg}" if node.arg else "")
        body = json_body({"query": query.text, "qid": query.qid, "retriever": name, "index": self.index, "k": depth})
        data, ms = await self.services.post(self.services.retrieval, f"retrieve {name}", "/v1/retrieve", body)
        return Request.model_validate_json(data), ms

    async def run(self, pipeline: Pipeline, topic: Query,
                  given: Request | None = None) -> PipelineRun:
        """Run every stage (see :class:`PipelineRun` for what comes back).

        ``given``: candidates handed over instead of retrieved (the track's AG task), for a pipeline whose
        first stage is ``given``; its top ``depth`` go on to the rerankers and the generator."""
        traces: list[StageTrace] = []
        start = time.perf_counter()
        if given is not None:
            if pipeline.retrieve != Source(GIVEN):
                raise ValueError(f"candidates were given: the pipeline must start with `{GIVEN}`, not {pipeline.retrieve}")
            request, ms = given.model_copy(update={"candidates": given.candidates[:pipeline.depth]}), 0.0
        else:
            request, ms = await self._source(pipeline.retrieve, topic, pipeline.depth)
        traces.append(_trace(f"{pipeline.retrieve}", pipeline.depth, start, request, ms))
        for stage in pipeline.rerank:
            start = time.perf_counter()
            name = stage.name + (f":{stage.arg}" if stage.arg else "")
            body = json_body({"reranker": name, "k": stage.depth}, request=request)
            data, ms = await self.services.post(self.services.retrieval, f"rerank {name}", "/v1/rerank", body)
            reranked = Request.model_validate_json(data)
            if stage.fuse:
                reranked = _fuse(stage.fuse, [reranked, request], [None, None], stage.depth, topic)
            request = reranked
            traces.append(_trace(str(stage), stage.depth, start, request, ms))
        if pipeline.generate is None:
            return PipelineRun(request, request, traces)
        start = time.perf_counter()
        gen = pipeline.generate
        top = request.model_copy(update={"candidates": request.candidates[:GENERATION_K]})  # all AG reads
        body = json_body({"topic": topic.text, "topic_id": str(topic.qid), "generator": gen.name,
                          "template": gen.template, "k": GENERATION_K}, request=top)
        data, ms = await self.services.post(self.services.generation, f"generate {gen}", "/v1/generate", body)
        answer = RagAnswer.model_validate_json(data)
        traces.append(StageTrace(str(gen), GENERATION_K, (time.perf_counter() - start) * 1000, answer.references, ms))
        return PipelineRun(answer, top, traces)


def _trace(stage: str, k: int, start: float, request: Request, service_ms: float | None) -> StageTrace:
    return StageTrace(stage, k, (time.perf_counter() - start) * 1000, [c.docid for c in request.candidates],
                      service_ms)
