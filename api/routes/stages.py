"""Routes the query and passage stages call: ``POST /v1/segments`` (R: segments by id prefix, for neighbour
windows and auto-merging) and ``POST /v1/write`` (AG: a generator writes a query stage's text or picks a
segment's sentences for the LLM compressor; cached per generator, prompt and query)."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from fastapi import APIRouter
from fastapi import Request as HttpRequest
from pydantic import BaseModel, Field

from api.body import StrictJSONRoute
from api.deps import RetrievalDep, SettingsDep
from api.errors import BadInput, errors
from ragnarok.passage.lookup import MAX_PREFIX_CHARS, MAX_PREFIXES, SegmentLookup
from ragnarok.query.stages import MAX_SELECT_SENTENCES, SELECT_MAX_TOKENS, parse_selection, select_messages
from ragnarok.retrieve.service import source_kind
from ragnarok.types import Candidate

router = APIRouter(prefix="/v1", tags=["stages"], route_class=StrictJSONRoute)


class SegmentsBody(BaseModel):
    index: str | None = Field(None, description="Index name; the configured default when omitted.")
    prefixes: list[str] = Field(description=f"Segment id prefixes such as `doc#3_` (at most {MAX_PREFIXES:,}).")


class SegmentsOut(BaseModel):
    segments: dict[str, Candidate] = Field(description="The first segment whose id starts with each prefix; "
                                                       "prefixes that match none are left out.")


@router.post("/segments", response_model=SegmentsOut, responses=errors(400, 404, 413, 422, 503))
async def segments(body: SegmentsBody, http: HttpRequest, service: RetrievalDep,
                   settings: SettingsDep) -> SegmentsOut:
    if len(body.prefixes) > MAX_PREFIXES:
        raise BadInput(f"{len(body.prefixes):,} prefixes; the limit is {MAX_PREFIXES:,}", 413)
    for p in body.prefixes:
        if not p or len(p) > MAX_PREFIX_CHARS:
            raise BadInput(f"a prefix has 1 to {MAX_PREFIX_CHARS} characters, got {len(p)}")
    index = body.index or settings.default_index
    service.get("bm25", index)  # an unknown index is a 404 naming it
    source = service.sources()[index]
    if source_kind(source) != "local":
        raise BadInput(f"index {index!r} is {source_kind(source)}: segments can only be looked up in a local "
                       "Lucene index (neighbours and automerge need one)")
    lookup = http.app.state.segment_lookups.get(source, lambda: SegmentLookup(source))
    return SegmentsOut(segments=await anyio.to_thread.run_sync(lookup.lookup, body.prefixes))


class WriteBody(BaseModel):
    task: str = Field(description="A query stage (hyde, multiquery, decompose, query2doc) or `select` (the "
                                  "LLM compressor: which of `sentences` help answer `query`).")
    generator: str = Field(description="A generator that writes text (GET /v1/generators; not extractive).")
    query: str
    n: int | None = Field(None, description="Queries to write (multiquery, decompose), 1..8.")
    sentences: list[str] | None = Field(None, description=f"For `select`: at most {MAX_SELECT_SENTENCES}.")


class WriteOut(BaseModel):
    task: str
    generator: str
    text: str = Field(description="What the generator wrote.")
    items: list[Any] = Field(description="The queries (a query stage) or 0-based sentence indices (select).")
    cached: bool = Field(description="Whether the text came from the cache (same generator, prompt, query).")
    ms: float


@router.post("/write", response_model=WriteOut, responses=errors(400, 404, 413, 422, 502, 503, 504))
async def write(body: WriteBody, http: HttpRequest, settings: SettingsDep) -> WriteOut:
    """Within the generator's deadline (504), else 502 naming the generator and what went wrong."""
    from ragnarok.components import QUERY_STAGES
    from ragnarok.query.writer import TextWriter

    if not body.query.strip():
        raise BadInput("query is empty")
    if len(body.query) > settings.max_query_chars:
        raise BadInput(f"query has {len(body.query):,} characters; the limit is {settings.max_query_chars:,}", 413)
    writer: TextWriter = http.app.state.text_writer
    start = time.perf_counter()
    if body.task == "select":
        sents = body.sentences or []
        if not 1 <= len(sents) <= MAX_SELECT_SENTENCES or sum(map(len, sents)) > settings.max_segment_chars:
            raise BadInput(f"select takes 1 to {MAX_SELECT_SENTENCES} sentences of at most "
                           f"{settings.max_segment_chars:,} characters in all", 413)
        written = await writer.write(body.generator, select_messages(body.query, sents), SELECT_MAX_TOKENS)
        items: list[Any] = parse_selection(written.text, len(sents))
    else:
        stage = QUERY_STAGES.create(body.task)
        if body.n is not None and not 1 <= body.n <= 8:
            raise BadInput(f"n must be between 1 and 8, got {body.n}")
        n = body.n or stage.default_n
        written = await writer.write(body.generator, stage.messages(body.query, n), stage.max_tokens)
        items = stage.parse(written.text, body.query, n)
    return WriteOut(task=body.task, generator=body.generator, text=written.text, items=items,
                    cached=written.cached, ms=(time.perf_counter() - start) * 1000)
