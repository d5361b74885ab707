"""The R service: ``POST /v1/retrieve``, Anserini's ``GET /v1/{index}/search`` and ``GET /v1/retrievers``."""

from __future__ import annotations

import asyncio
import unicodedata
from typing import Annotated, Literal

from fastapi import APIRouter, Response
from fastapi import Query as Q
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from api.body import StrictJSONRoute
from api.deps import RetrievalDep, SettingsDep
from api.errors import BadInput, errors, scrub
from ragnarok.core.settings import Settings
from ragnarok.core.types import MAX_ID_CHARS, Id, Integer, Query, Request

router = APIRouter(prefix="/v1", tags=["retrieval"], route_class=StrictJSONRoute)


def json_response(request: Request) -> Response:
    """Serialize once with pydantic-core (FastAPI would validate the model again, then serialize it)."""
    return Response(request.model_dump_json(exclude_unset=True), media_type="application/json")


async def retrieved(retriever: object, query: Query, k: int) -> Response:
    """The retriever's answer. Lucene retrievers search in batches on Java's threads and write it from cached
    per-segment JSON (the same bytes), awaited here without a worker thread of ours; others run in the
    thread pool."""
    submit_json = getattr(retriever, "submit_json", None)
    if submit_json is not None:
        return Response(await asyncio.wrap_future(submit_json(query, k)), media_type="application/json")
    return json_response(await run_in_threadpool(retriever.retrieve, query, k))  # type: ignore[attr-defined]


class RetrieveBody(BaseModel):
    query: str = Field(description="The query text.")
    qid: Id = ""
    retriever: str = Field("bm25", description="bm25, bm25+rocchio or bm25+rm3 (GET /v1/retrievers).")
    index: str | None = Field(None, min_length=1, description="Index name; the configured default when omitted.")
    k: Integer = Field(100, description="Number of candidates, 1..10,000.")


class BuildProgressOut(BaseModel):
    done: int = Field(description="Segments encoded so far.")
    total: int | None = Field(description="Segments to encode (null until counted).")
    percent: float = Field(description="done / total, 0..100.")
    elapsed_s: float = Field(description="Seconds since the build started (model loading included).")
    eta_s: float | None = Field(description="Estimated seconds left (null until two batches are timed).")


class RetrieverOut(BaseModel):
    name: str
    index: str
    kind: str
    available: bool
    status: Literal["available", "building", "unavailable"] = Field(
        description="`building`: its dense index is being built in the background (see `progress`); until it "
        "is done a request for it answers 503.")
    reason: str = Field("", description="Why it is not available (for `building`: `building, N % done ...`).")
    progress: BuildProgressOut | None = None


def _check(settings: Settings, text: str, k: int) -> Query:
    """The query to search: checked, and NFKC-normalised (``ｃｏｍｐｒｅｓｓ ﬁle`` finds what ``compress file``
    finds; the answer's ``query.text`` is what was searched)."""
    if not text or not text.strip():
        raise BadInput("query is empty")
    if "\ufffd" in text:
        raise BadInput("query is not valid UTF-8", 400)
    if len(text) > settings.max_query_chars:
        raise BadInput(f"query has {len(text):,} characters; the limit is {settings.max_query_chars:,}", 413)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        if len(text) > settings.max_query_chars:  # NFKC can lengthen a text (one character to 18)
            raise BadInput(f"query has {len(text):,} characters once NFKC-normalised; the limit is "
                           f"{settings.max_query_chars:,}", 413)
    if not 1 <= k <= settings.max_k:
        raise BadInput(f"k must be between 1 and {settings.max_k:,}, got {k}")
    return Query(text=text)


@router.post("/retrieve", response_model=Request, response_model_exclude_unset=True,
             responses=errors(400, 404, 413, 422, 502, 503, 504))
async def retrieve(body: RetrieveBody, service: RetrievalDep, settings: SettingsDep) -> Response:
    query = _check(settings, body.query, body.k)
    query.qid = body.qid
    return await retrieved(service.get(body.retriever, body.index), query, body.k)


@router.get("/retrievers", response_model=list[RetrieverOut])
def retrievers(service: RetrievalDep, settings: SettingsDep) -> list[RetrieverOut]:
    """Every index x retriever and whether it can run now; a reason names a path as `<index NAME>` or `<data
    dir>`, never the server's path (as error bodies do)."""
    infos = service.describe()
    reasons = scrub([i.reason for i in infos], settings)
    return [
        RetrieverOut(name=i.name, index=i.index, kind=i.kind, available=i.available, status=i.status,
                     reason=reason, progress=None if i.progress is None else BuildProgressOut(
                         percent=i.progress.percent, **vars(i.progress)))
        for i, reason in zip(infos, reasons)
    ]


@router.get("/{index}/search", response_model=Request, response_model_exclude_unset=True,
            responses=errors(400, 404, 413, 422, 502, 503, 504))
async def search(
    index: str,
    service: RetrievalDep,
    settings: SettingsDep,
    query: Annotated[str, Q(description="The query text.")],
    hits: Annotated[int, Q(description="Number of hits, 1..10,000.")] = 10,
    qid: Annotated[str, Q(max_length=MAX_ID_CHARS)] = "",
) -> Response:
    """Anserini's REST shape: BM25 over ``index``."""
    checked = _check(settings, query, hits)
    checked.qid = qid
    return await retrieved(service.get("bm25", index), checked, hits)
