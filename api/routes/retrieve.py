"""The R service: ``POST /v1/retrieve``, Anserini's ``GET /v1/{index}/search`` and ``GET /v1/retrievers``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query as Q, Response
from pydantic import BaseModel, Field

from api.deps import RetrievalDep, SettingsDep
from api.body import StrictJSONRoute
from api.errors import BadInput, errors
from ragnarok.settings import Settings
from ragnarok.types import Query, Request

router = APIRouter(prefix="/v1", tags=["retrieval"], route_class=StrictJSONRoute)


def json_response(request: Request) -> Response:
    """Serialize once with pydantic-core (FastAPI would validate the model again, then serialize it)."""
    return Response(request.model_dump_json(exclude_unset=True), media_type="application/json")


class RetrieveBody(BaseModel):
    query: str = Field(description="The query text.")
    qid: str | int = ""
    retriever: str = Field("bm25", description="bm25, bm25+rocchio or bm25+rm3 (GET /v1/retrievers).")
    index: str | None = Field(None, description="Index name; the configured default when omitted.")
    k: int = Field(100, description="Number of candidates, 1..10,000.")


class RetrieverOut(BaseModel):
    name: str
    index: str
    kind: str
    available: bool
    reason: str = ""


def _check(settings: Settings, text: str, k: int) -> Query:
    if not text or not text.strip():
        raise BadInput("query is empty")
    if "\ufffd" in text:
        raise BadInput("query is not valid UTF-8", 400)
    if len(text) > settings.max_query_chars:
        raise BadInput(f"query has {len(text):,} characters; the limit is {settings.max_query_chars:,}", 413)
    if not 1 <= k <= settings.max_k:
        raise BadInput(f"k must be between 1 and {settings.max_k:,}, got {k}")
    return Query(text=text)


@router.post("/retrieve", response_model=Request, response_model_exclude_unset=True,
             responses=errors(400, 404, 413, 422, 502, 503, 504))
def retrieve(body: RetrieveBody, service: RetrievalDep, settings: SettingsDep) -> Response:
    query = _check(settings, body.query, body.k)
    query.qid = body.qid
    return json_response(service.get(body.retriever, body.index).retrieve(query, body.k))


@router.get("/retrievers", response_model=list[RetrieverOut])
def retrievers(service: RetrievalDep) -> list[RetrieverOut]:
    return [
        RetrieverOut(name=i.name, index=i.index, kind=i.kind, available=i.available, reason=i.reason)
        for i in service.describe()
    ]


@router.get("/{index}/search", response_model=Request, response_model_exclude_unset=True,
            responses=errors(400, 404, 413, 422, 502, 503, 504))
def search(
    index: str,
    service: RetrievalDep,
    settings: SettingsDep,
    query: Annotated[str, Q(description="The query text.")],
    hits: Annotated[int, Q(description="Number of hits, 1..10,000.")] = 10,
    qid: str = "",
) -> Response:
    """Anserini's REST shape: BM25 over ``index``."""
    checked = _check(settings, query, hits)
    checked.qid = qid
    return json_response(service.get("bm25", index).retrieve(checked, hits))
