"""The R service: ``POST /v1/retrieve``, Anserini's ``GET /v1/{index}/search`` and ``GET /v1/retrievers``."""

from __future__ import annotations

import asyncio
import unicodedata
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Response
from fastapi import Query as Q
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field
from pydantic_core import to_json

from api import observability
from api.body import StrictJSONRoute
from api.deps import RetrievalDep, SettingsDep
from api.errors import BadInput, as_stage_error, errors, scrub
from api.route_auth import check_scope
from ragnarok.core.registry import UnknownComponentError
from ragnarok.core.settings import Settings
from ragnarok.core.types import MAX_ID_CHARS, Id, Integer, Query, Request
from ragnarok.service.services import LocalRetrieve
from ragnarok.stages.retrieve.lucene import doc_from_raw

router = APIRouter(prefix="/v1", tags=["retrieval"], route_class=StrictJSONRoute)
DROPPED_HEADER = "Ragnarok-Dropped-Hits"


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
    noted = getattr(retriever, "retrieve_noted", None)  # dense: hits whose text the index does not hold
    if noted is not None:
        request, dropped = await run_in_threadpool(noted, query, k)
        response = json_response(request)
        if dropped:
            response.headers[DROPPED_HEADER] = f"{dropped} hits dropped: their docids are not in the index of texts"
        return response
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
        "is done a request for it answers 503."
    )
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
            raise BadInput(
                f"query has {len(text):,} characters once NFKC-normalised; the limit is {settings.max_query_chars:,}",
                413,
            )
    if not 1 <= k <= settings.max_k:
        raise BadInput(f"k must be between 1 and {settings.max_k:,}, got {k}")
    return Query(text=text)


@router.post(
    "/retrieve",
    response_model=Request,
    response_model_exclude_unset=True,
    responses=errors(400, 404, 413, 422, 502, 503, 504),
)
async def retrieve(body: RetrieveBody, service: RetrievalDep, settings: SettingsDep) -> Response:
    query = _check(settings, body.query, body.k)
    query.qid = body.qid
    return await retrieved(service.get(body.retriever, body.index), query, body.k)


def in_process(app: Any) -> LocalRetrieve:
    """``POST /v1/retrieve`` for the gateway of ``app``'s own process, called directly: the route's checks and
    work, the same bytes answered; a failure is the :class:`StageError` that the route's error answer would
    make (docs/internals/service-api.md)."""

    settings = app.state.settings

    async def answer(stage: str, fields: dict[str, Any]) -> bytes:
        try:
            check_scope("retrieve")  # the router's own dependency
            body = RetrieveBody.model_validate(fields)
            query = _check(settings, body.query, body.k)
            query.qid = body.qid
            return bytes((await retrieved(app.state.retrieval.get(body.retriever, body.index), query, body.k)).body)
        except Exception as exc:  # noqa: BLE001 - every error has the status and body the API answers it with
            raise as_stage_error(stage, exc, settings) from None

    async def call(stage: str, fields: dict[str, Any]) -> bytes:
        return await observability.in_process("/v1/retrieve", lambda: answer(stage, fields))

    return call


@router.get("/retrievers", response_model=list[RetrieverOut])
def retrievers(service: RetrievalDep, settings: SettingsDep) -> list[RetrieverOut]:
    """Every index x retriever and whether it can run now; a reason names a path as `<index NAME>` or `<data
    dir>`, never the server's path (as error bodies do)."""
    infos = service.describe()
    reasons = scrub([i.reason for i in infos], settings)
    return [
        RetrieverOut(
            name=i.name,
            index=i.index,
            kind=i.kind,
            available=i.available,
            status=i.status,
            reason=reason,
            progress=None if i.progress is None else BuildProgressOut(percent=i.progress.percent, **vars(i.progress)),
        )
        for i, reason in zip(infos, reasons)
    ]


class AnseriniQueryOut(BaseModel):
    text: str
    qid: str | int | None = None


class AnseriniCandidateOut(BaseModel):
    docid: str
    score: float
    rank: int = Field(description="1 for the best.")
    doc: dict[str, Any] | str | None = Field(
        description="The segment's fields (`parse=true`) or its stored raw document (`parse=false`)."
    )


class AnseriniSearchOut(BaseModel):
    """Anserini's RestServer 1.7.1 answer (its openapi.yaml's SearchResponse)."""

    api: Literal["v1"]
    index: str
    query: AnseriniQueryOut
    candidates: list[AnseriniCandidateOut]


class AnseriniDocOut(BaseModel):
    api: Literal["v1"]
    index: str
    docid: str
    doc: dict[str, Any] | str | None


def anserini_json(index: str, request: Request, raw: dict[str, str | None] | None = None) -> bytes:
    """A ranking in Anserini's REST shape (``raw``: each docid's stored document, for ``parse=false``)."""
    query: dict[str, Any] = {
        "text": request.query.text,
        **({"qid": request.query.qid} if request.query.qid != "" else {}),
    }
    candidates = [
        {
            "docid": c.docid,
            "score": c.score,
            "rank": rank,
            "doc": raw.get(c.docid) if raw is not None else c.doc.model_dump(mode="json", exclude_unset=True),
        }
        for rank, c in enumerate(request.candidates, 1)
    ]
    return to_json({"api": "v1", "index": index, "query": query, "candidates": candidates})


@router.get("/{index}/search", response_model=AnseriniSearchOut, responses=errors(400, 404, 413, 422, 502, 503, 504))
async def search(
    index: str,
    service: RetrievalDep,
    settings: SettingsDep,
    query: Annotated[str, Q(description="The query text.")],
    hits: Annotated[int, Q(description="Number of hits, 1..10,000.")] = 10,
    qid: Annotated[str, Q(max_length=MAX_ID_CHARS)] = "",
    parse: Annotated[bool, Q(description="The segments' fields (true) or their stored raw documents.")] = True,
) -> Response:
    """BM25 over ``index`` in Anserini's REST shape (its RestServer's ``GET /v1/{index}/search``): a client of
    one works with the other."""
    checked = _check(settings, query, hits)
    checked.qid = qid
    retriever = service.get("bm25", index)
    submit = getattr(retriever, "submit_anserini_json", None)
    if submit is not None and parse:
        return Response(await asyncio.wrap_future(submit(checked, hits, index)), media_type="application/json")
    request = await run_in_threadpool(retriever.retrieve, checked, hits)  # type: ignore[attr-defined]
    raw = None
    if not parse:
        read = getattr(retriever, "raw_doc", None)
        raw = {
            c.docid: read(c.docid) if read else c.doc.model_dump_json(exclude_unset=True) for c in request.candidates
        }
    return Response(anserini_json(index, request, raw), media_type="application/json")


@router.get("/{index}/doc/{docid}", response_model=AnseriniDocOut, responses=errors(404, 422, 502, 503))
async def document(
    index: str, docid: Annotated[str, Path(max_length=MAX_ID_CHARS)], service: RetrievalDep, parse: bool = True
) -> Response:
    """One segment by docid, as Anserini's RestServer answers ``GET /v1/{index}/doc/{docid}`` (a local or
    prebuilt index)."""
    retriever = service.get("bm25", index)
    read = getattr(retriever, "raw_doc", None)
    if read is None:
        raise BadInput(f"index {index!r} is remote: its documents are read from its own server")
    raw = await run_in_threadpool(read, docid)
    if raw is None:
        raise UnknownComponentError("document", docid, [f"a docid of index {index}"])
    doc: Any = raw if not parse else doc_from_raw(raw).model_dump(mode="json", exclude_unset=True)
    return Response(to_json({"api": "v1", "index": index, "docid": docid, "doc": doc}), media_type="application/json")
