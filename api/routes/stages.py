"""Routes the query and passage stages call: ``POST /v1/segments`` (R: segments by id prefix, for neighbour
windows and auto-merging) and ``POST /v1/write`` (AG: a generator writes a query stage's text, picks a
segment's sentences, or writes the LLM compressor's summaries; cached per generator, prompt and input)."""

from __future__ import annotations

import time
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends
from fastapi import Request as HttpRequest
from pydantic import BaseModel, Field

from api.auth import needs, reserve
from api.body import StrictJSONRoute
from api.deps import RetrievalDep, SettingsDep
from api.errors import BadInput, errors
from ragnarok.auth.cost import Cost
from ragnarok.core.types import Candidate, Integer
from ragnarok.stages.passage.llmcompress import (
    MAX_WRITE_CHARS,
    MAX_WRITE_TEXTS,
    SUMMARY_MAX_TOKENS,
    parse_summary,
    refine_messages,
    summarize_messages,
)
from ragnarok.stages.passage.lookup import MAX_PREFIX_CHARS, MAX_PREFIXES, SegmentLookup
from ragnarok.stages.query.stages import MAX_SELECT_SENTENCES, SELECT_MAX_TOKENS, parse_selection, select_messages

router = APIRouter(prefix="/v1", tags=["stages"], route_class=StrictJSONRoute)


class SegmentsBody(BaseModel):
    index: str | None = Field(None, min_length=1, description="Index name; the configured default when omitted.")
    prefixes: list[str] = Field(description=f"Segment id prefixes such as `doc#3_` (at most {MAX_PREFIXES:,}).")


class SegmentsOut(BaseModel):
    segments: dict[str, Candidate] = Field(
        description="The first segment whose id starts with each prefix; prefixes that match none are left out."
    )


@router.post(
    "/segments",
    response_model=SegmentsOut,
    responses=errors(400, 404, 413, 422, 503),
    dependencies=[Depends(needs("retrieve"))],
)
async def segments(body: SegmentsBody, http: HttpRequest, service: RetrievalDep, settings: SettingsDep) -> SegmentsOut:
    if len(body.prefixes) > MAX_PREFIXES:
        raise BadInput(f"{len(body.prefixes):,} prefixes; the limit is {MAX_PREFIXES:,}", 413)
    for p in body.prefixes:
        if not p or len(p) > MAX_PREFIX_CHARS:
            raise BadInput(f"a prefix has 1 to {MAX_PREFIX_CHARS} characters, got {len(p)}")
    index = body.index or settings.default_index
    service.get("bm25", index)  # an unknown index is a 404 naming it
    source = service.text_dir(index)
    if source is None:
        raise BadInput(
            f"index {index!r} is remote: segments can only be looked up in a local or prebuilt "
            "Lucene index (neighbours and automerge need one)"
        )
    # keyed by the rebuilds of the index noticed so far: a rebuilt index is looked up in its new commit
    key = (source, service.generation(index))
    lookups = http.app.state.segment_lookups
    lookups.drop(lambda held: held[0] == source and held != key)
    lookup = lookups.get(key, lambda: SegmentLookup(source))
    return SegmentsOut(segments=await anyio.to_thread.run_sync(lookup.lookup, body.prefixes))


class WriteBody(BaseModel):
    task: str = Field(
        description="A query stage (hyde, multiquery, decompose, query2doc), or one of the LLM "
        "compressor's: `select` (which of `sentences` help answer `query`), "
        "`summarize` (a summary of `texts` for `query`), `refine` (`summary` rewritten "
        "with what `texts[0]` adds)."
    )
    generator: str = Field(description="A generator that writes text (GET /v1/generators; not extractive).")
    query: str
    n: Integer | None = Field(None, description="Queries to write (multiquery, decompose), 1..8.")
    sentences: list[str] | None = Field(None, description=f"For `select`: at most {MAX_SELECT_SENTENCES}.")
    texts: list[str] | None = Field(
        None,
        description=f"For `summarize` (1 to {MAX_WRITE_TEXTS}) and `refine` "
        f"(exactly 1); at most {MAX_WRITE_CHARS:,} characters in all.",
    )
    summary: str | None = Field(None, description="For `refine`: the summary so far (non-empty).")


class WriteOut(BaseModel):
    task: str
    generator: str
    text: str = Field(description="What the generator wrote.")
    items: list[Any] = Field(
        description="The queries (a query stage), 0-based sentence indices (select), or "
        "the summary, cleaned (summarize, refine; empty when none was written)."
    )
    cached: bool = Field(description="Whether the text came from the cache (same generator, prompt, query).")
    ms: float


@router.post(
    "/write",
    response_model=WriteOut,
    responses=errors(400, 404, 413, 422, 502, 503, 504),
    dependencies=[Depends(needs("generate"))],
)
async def write(body: WriteBody, http: HttpRequest, settings: SettingsDep) -> WriteOut:
    """Within the generator's deadline (504), else 502 naming the generator and what went wrong."""
    from ragnarok.stages.components import QUERY_STAGES
    from ragnarok.stages.query.writer import TextWriter

    if not body.query.strip():
        raise BadInput("query is empty")
    if len(body.query) > settings.max_query_chars:
        raise BadInput(f"query has {len(body.query):,} characters; the limit is {settings.max_query_chars:,}", 413)
    writer: TextWriter = http.app.state.text_writer
    cost = Cost()
    cost.add(body.generator, 1, http.app.state.generation.configs)
    await reserve(http, cost)
    start = time.perf_counter()
    if body.task == "select":
        sents = body.sentences or []
        if not 1 <= len(sents) <= MAX_SELECT_SENTENCES or sum(map(len, sents)) > settings.max_segment_chars:
            raise BadInput(
                f"select takes 1 to {MAX_SELECT_SENTENCES} sentences of at most "
                f"{settings.max_segment_chars:,} characters in all",
                413,
            )
        written = await writer.write(body.generator, select_messages(body.query, sents), SELECT_MAX_TOKENS)
        items: list[Any] = parse_selection(written.text, len(sents))
    elif body.task in ("summarize", "refine"):
        texts = body.texts or []
        count = (1, 1) if body.task == "refine" else (1, MAX_WRITE_TEXTS)
        if not count[0] <= len(texts) <= count[1] or not all(t.strip() for t in texts):
            raise BadInput(
                f"{body.task} takes {'1' if count[1] == 1 else f'1 to {count[1]}'} non-empty "
                f"text(s) in `texts`, got {len(texts)}"
            )
        if body.task == "refine" and not (body.summary or "").strip():
            raise BadInput("refine takes the summary so far in `summary` (non-empty)")
        if sum(map(len, texts)) + len(body.summary or "") > MAX_WRITE_CHARS:
            raise BadInput(f"{body.task} takes at most {MAX_WRITE_CHARS:,} characters of text in all", 413)
        messages = (
            summarize_messages(body.query, texts)
            if body.task == "summarize"
            else refine_messages(body.query, body.summary or "", texts[0])
        )
        written = await writer.write(body.generator, messages, SUMMARY_MAX_TOKENS)
        summary = parse_summary(written.text)
        items = [summary] if summary else []
    else:
        stage = QUERY_STAGES.create(body.task)
        if body.n is not None and not 1 <= body.n <= 8:
            raise BadInput(f"n must be between 1 and 8, got {body.n}")
        n = body.n or stage.default_n
        written = await writer.write(body.generator, stage.messages(body.query, n), stage.max_tokens)
        items = stage.parse(written.text, body.query, n)
    return WriteOut(
        task=body.task,
        generator=body.generator,
        text=written.text,
        items=items,
        cached=written.cached,
        ms=(time.perf_counter() - start) * 1000,
    )
