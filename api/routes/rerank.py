"""``POST /v1/rerank``: part of the R service; a ranking in, the reranked top-k out (rank_llm Request JSON)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from api.deps import RerankDep, SettingsDep
from api.errors import BadInput
from api.routes.retrieve import json_response
from ragnarok.types import Request

router = APIRouter(prefix="/v1", tags=["retrieval"])


class RerankBody(BaseModel):
    request: Request
    reranker: str = Field(description="embedding, mmr[:λ], listwise:GENERATOR, rankgpt, rankzephyr[:rho], "
                                      "monot5, lit5")
    k: int = Field(20, description="Candidates to keep, 1..10,000.")


@router.post("/rerank", response_model=Request, response_model_exclude_unset=True)
def rerank(body: RerankBody, service: RerankDep, settings: SettingsDep) -> Response:
    if not 1 <= body.k <= settings.max_k:
        raise BadInput(f"k must be between 1 and {settings.max_k:,}, got {body.k}")
    if len(body.request.candidates) > settings.max_k:
        raise BadInput(f"{len(body.request.candidates):,} candidates; the limit is {settings.max_k:,}", 413)
    return json_response(service.get(body.reranker).rerank(body.request, body.k))
