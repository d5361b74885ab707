"""The gateway: ``POST /rag`` runs a pipeline through the R and AG services over HTTP."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request as HttpRequest, Response
from pydantic import BaseModel, Field

from api.deps import SettingsDep
from api.errors import BadInput
from ragnarok.gateway import PipelineRunner
from ragnarok.presets import PRESETS, resolve
from ragnarok.spec import from_mapping, parse
from ragnarok.types import CitedSentence, Doc, Query

router = APIRouter(tags=["rag"])


class RagBody(BaseModel):
    topic: str
    topic_id: str = ""
    pipeline: str | dict[str, Any] = Field(
        "offline", description="A spec such as `bm25@100 | extractive`, a preset name (GET /v1/pipelines), or "
        "the structured form {retrieve, depth, rerank: [...], generate: {...}}.")
    index: str | None = None
    trace: bool = False
    segments: bool = Field(False, description="Also return the cited segments' stored fields (title, segment, "
                                               "url), by segment id, as `segments`.")


class TraceOut(BaseModel):
    stage: str
    k: int
    latency_ms: float = Field(description="The stage as the gateway saw it, HTTP hop included.")
    service_ms: float | None = Field(None, description="The services' own time (their Server-Timing header).")
    ranking: list[str]


class RagOut(BaseModel):
    topic_id: str
    topic: str
    references: list[str]
    response_length: int
    answer: list[CitedSentence]
    trace: list[TraceOut] | None = None
    segments: dict[str, Doc] | None = None


@router.post("/rag", response_model=RagOut, response_model_exclude_none=True)
async def rag(body: RagBody, http: HttpRequest, settings: SettingsDep) -> Response:
    if not body.topic.strip():
        raise BadInput("topic is empty")
    if len(body.topic) > settings.max_query_chars:
        raise BadInput(f"topic has {len(body.topic):,} characters; the limit is {settings.max_query_chars:,}", 413)
    pipeline = parse(resolve(body.pipeline)) if isinstance(body.pipeline, str) else from_mapping(body.pipeline)
    if pipeline.generate is None:
        raise BadInput(f"pipeline {pipeline} has no generation stage: end it with a generator, e.g. `| extractive`")
    runner = PipelineRunner(http.app.state.services, body.index)
    run = await runner.run(pipeline, Query(text=body.topic, qid=body.topic_id))
    out = RagOut.model_construct(**dict(run.result), trace=[TraceOut(**vars(t)) for t in run.traces] if body.trace else None,
                                 segments=run.cited_docs() if body.segments else None)
    # serialised once by pydantic-core (a response_model would validate the answer again)
    return Response(out.model_dump_json(exclude_none=True), media_type="application/json")


@router.get("/v1/pipelines")
def pipelines() -> dict[str, str]:
    """The named pipeline presets."""
    return PRESETS
