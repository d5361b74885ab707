"""The gateway: ``POST /rag`` runs a pipeline through the R and AG services over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import APIRouter, Request as HttpRequest, Response
from pydantic import BaseModel, Field

from api.deps import SettingsDep
from api.body import StrictJSONRoute
from api.errors import BadInput, errors
from ragnarok.gateway import PipelineRunner, Services
from ragnarok.presets import PRESETS, default_pipeline, resolve
from ragnarok.spec import parse
from ragnarok.spec_mapping import PipelineMapping, from_mapping
from ragnarok.types import CitedSentence, Doc, Query

router = APIRouter(tags=["rag"], route_class=StrictJSONRoute)
#: The response header that names the pipeline that ran (the default one is chosen per request).
PIPELINE_HEADER = "Ragnarok-Pipeline"


class RagBody(BaseModel):
    topic: str
    topic_id: str = ""
    pipeline: str | PipelineMapping | None = Field(
        None, description="A spec such as `bm25@100 | extractive`, a preset name (GET /v1/pipelines), or "
        "the structured form {retrieve, depth, rerank: [...], generate: {...}}. Default: `offline` when the "
        "index has its dense MiniLM index, else `bm25+rocchio@100 | extractive`; the pipeline that ran is in "
        "the `Ragnarok-Pipeline` response header.")
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
    detail: dict[str, Any] | None = Field(None, description="Query and passage stages: the queries generated "
                                          "(and whether from the cache), candidates added, merged and dropped, "
                                          "text length before and after.")


class RagOut(BaseModel):
    topic_id: str
    topic: str
    references: list[str]
    response_length: int
    answer: list[CitedSentence]
    trace: list[TraceOut] | None = None
    segments: dict[str, Doc] | None = None


@router.post("/rag", response_model=RagOut, response_model_exclude_none=True,
             responses=errors(400, 404, 413, 422, 502, 503, 504))
async def rag(body: RagBody, http: HttpRequest, settings: SettingsDep) -> Response:
    if not body.topic.strip():
        raise BadInput("topic is empty")
    if len(body.topic) > settings.max_query_chars:
        raise BadInput(f"topic has {len(body.topic):,} characters; the limit is {settings.max_query_chars:,}", 413)
    spec = body.pipeline if body.pipeline is not None else \
        await _default_pipeline(http.app.state.services, body.index or settings.default_index)
    pipeline = parse(resolve(spec), settings.max_k) if isinstance(spec, str) else \
        from_mapping(spec, max_depth=settings.max_k)
    if pipeline.generate is None:
        raise BadInput(f"pipeline {pipeline} has no generation stage: end it with a generator, e.g. `| extractive`")
    runner = PipelineRunner(http.app.state.services, body.index)
    run = await runner.run(pipeline, Query(text=body.topic, qid=body.topic_id))
    out = RagOut.model_construct(**dict(run.result), trace=[TraceOut(**vars(t)) for t in run.traces] if body.trace else None,
                                 segments=run.cited_docs() if body.segments else None)
    # serialised once by pydantic-core (a response_model would validate the answer again)
    return Response(out.model_dump_json(exclude_none=True), media_type="application/json",
                    headers={PIPELINE_HEADER: str(pipeline).encode("ascii", "backslashreplace").decode()})


async def _default_pipeline(services: Services, index: str) -> str:
    """The preset that runs when the request names none (:func:`ragnarok.presets.default_pipeline`), chosen
    from the retrievers the R service can run on ``index`` now (GET /v1/retrievers)."""
    try:
        response = await services.retrieval.get("/v1/retrievers")
        response.raise_for_status()
        available = {r["name"] for r in response.json() if r["index"] == index and r["available"]}
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        available = None  # the retrieval stage will say what is wrong
    return default_pipeline(available)


@router.get("/v1/pipelines")
def pipelines() -> dict[str, str]:
    """The named pipeline presets."""
    return PRESETS
