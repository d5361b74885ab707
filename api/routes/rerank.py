"""``POST /v1/rerank``: part of the R service; a ranking in, the reranked top-k out (rank_llm Request JSON)."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Response
from fastapi import Request as HttpRequest
from pydantic import BaseModel, Field

from api.auth import check_scope, reserve
from api.body import StrictJSONRoute
from api.deps import RerankDep, SettingsDep
from api.errors import BadInput, errors
from api.routes.retrieve import json_response
from ragnarok.auth.cost import rerank_cost
from ragnarok.core.types import Integer, Request
from ragnarok.runtime.cancel import InFlight, run_watched
from ragnarok.stages.generate.base import guard_of
from ragnarok.stages.rerank.embedding import EmbeddingReranker, check_work
from ragnarok.stages.rerank.pointwise import PointwiseReranker

router = APIRouter(prefix="/v1", tags=["retrieval"], route_class=StrictJSONRoute)


class RerankBody(BaseModel):
    request: Request
    reranker: str = Field(
        description="embedding, mmr[:λ], listwise:GENERATOR, rankgpt, rankzephyr[:rho], "
        "monot5[:MODEL], crossencoder[:MODEL], lit5"
    )
    k: Integer = Field(20, description="Candidates to keep, 1..10,000.")


@router.post(
    "/rerank",
    response_model=Request,
    response_model_exclude_unset=True,
    responses=errors(400, 404, 413, 422, 502, 503, 504),
)
async def rerank(body: RerankBody, http: HttpRequest, service: RerankDep, settings: SettingsDep) -> Response:
    """The CPU rerankers (embedding, mmr, monot5, crossencoder) take at most `cpu_rerank_max_candidates`
    candidates and `cpu_rerank_max_chars` characters of text (413) and answer within `cpu_rerank_timeout_s`
    (504); every rerank is cancelled when the client disconnects or the server shuts down (503)."""
    if not 1 <= body.k <= settings.max_k:
        raise BadInput(f"k must be between 1 and {settings.max_k:,}, got {body.k}")
    if len(body.request.candidates) > settings.max_k:
        raise BadInput(f"{len(body.request.candidates):,} candidates; the limit is {settings.max_k:,}", 413)
    cost = rerank_cost(body.reranker, len(body.request.candidates), http.app.state.generation.configs)
    if cost.total:  # an LLM reranker spends like a generator
        check_scope("generate")
        await reserve(http, cost)
    reranker = await anyio.to_thread.run_sync(service.get, body.reranker)  # may import a model library
    timeout_s = None
    if isinstance(reranker, (EmbeddingReranker, PointwiseReranker)):  # before anything is encoded
        check_work(body.request, settings.cpu_rerank_max_candidates, settings.cpu_rerank_max_chars)
        timeout_s = settings.cpu_rerank_timeout_s
    inflight: InFlight = http.app.state.inflight
    guard = guard_of(reranker)  # a listwise reranker: a thread of its backend's share, not of the default pool
    with inflight.token() as token:
        return await run_watched(
            lambda: json_response(reranker.rerank(body.request, body.k)),
            token,
            timeout_s=timeout_s,
            disconnected=http.is_disconnected,
            limiter=guard.callers if guard else None,
        )
