"""The gateway: ``POST /rag`` runs a pipeline through the R and AG services over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import APIRouter, Response
from fastapi import Request as HttpRequest
from pydantic import BaseModel, Field, StrictBool

from api.auth import SpendOut, reserve, spent
from api.body import StrictJSONRoute
from api.deps import SettingsDep
from api.errors import BadInput, errors
from api.sse import EventStream, encode, primed
from api.sse import body as sse_body
from ragnarok.auth.cost import pipeline_cost
from ragnarok.core.presets import DEFAULT_PIPELINES, PRESETS, default_pipeline, resolve, retrievers, saved_presets
from ragnarok.core.spec import parse
from ragnarok.core.spec_mapping import PipelineMapping, from_mapping
from ragnarok.core.types import MAX_ID_CHARS, CitedSentence, Doc, Query
from ragnarok.runtime.cancel import CancelToken, watched
from ragnarok.runtime.logs import outgoing_headers, request_id
from ragnarok.runtime.quoting import shorten
from ragnarok.service.gateway import PipelineRun, PipelineRunner, Services
from ragnarok.service.gateway_stream import stream_pipeline
from ragnarok.stages.generate.streaming import StreamEvent

router = APIRouter(tags=["rag"], route_class=StrictJSONRoute)
#: The response header that names the pipeline that ran (the default one is chosen per request).
PIPELINE_HEADER = "Ragnarok-Pipeline"
#: Set when the default pipeline fell back from the first default (``offline``): which retriever it lacked, why.
FALLBACK_HEADER = "Ragnarok-Pipeline-Fallback"


class RagBody(BaseModel):
    topic: str
    topic_id: str = Field("", max_length=MAX_ID_CHARS)
    pipeline: str | PipelineMapping | None = Field(
        None,
        description="A spec such as `bm25@100 | extractive`, a preset name (GET /v1/pipelines), or "
        "the structured form {retrieve, depth, rerank: [...], generate: {...}}. Default: `offline` when the "
        "index has its dense MiniLM index, else `bm25+rocchio@100 | extractive` (also while the dense index is "
        "still being built: the `Ragnarok-Pipeline-Fallback` header then says why); the pipeline that ran is "
        "in the `Ragnarok-Pipeline` response header.",
    )
    index: str | None = Field(None, min_length=1)
    trace: StrictBool = False
    segments: StrictBool = Field(
        False,
        description="Also return the cited segments' stored fields (title, segment, "
        "url), by segment id, as `segments`.",
    )
    stream: StrictBool = Field(
        False,
        description="Answer as Server-Sent Events (`text/event-stream`): `stage` "
        "(each stage as it finishes: stage, latency_ms, k_in, k_out), `references` (the "
        "segment ids the generator reads), `delta` (text as it is written), `sentence` "
        "(each one complete, with its citations), `done` (the body this request answers "
        "without `stream`, with `spend`: the calls and tokens spent), or `error` "
        "(stage, status, detail) after the stream started. "
        "A failure before the first piece of answer is the usual JSON error.",
    )


class TraceOut(BaseModel):
    stage: str
    k: int
    latency_ms: float = Field(description="The stage as the gateway saw it, HTTP hop included.")
    service_ms: float | None = Field(None, description="The services' own time (their Server-Timing header).")
    ranking: list[str]
    detail: dict[str, Any] | None = Field(
        None,
        description="Query and passage stages: the queries generated "
        "(and whether from the cache), candidates added, merged and dropped, "
        "text length before and after. The generator: what post-processing "
        "did (the notes of POST /v1/generate: repeats_dropped, "
        "citations_attributed, citations produced or attributed).",
    )


class RagOut(BaseModel):
    topic_id: str
    topic: str
    references: list[str]
    response_length: int
    answer: list[CitedSentence]
    trace: list[TraceOut] | None = None
    request_id: str | None = Field(
        None,
        description="With `trace`: the request's id (its X-Request-ID), "
        "which every stage call carried and every log line of the request names.",
    )
    segments: dict[str, Doc] | None = None
    spend: SpendOut | None = Field(
        None,
        description="Only in a streamed answer's `done` event: what the "
        "request spent (the Ragnarok-Backend-Calls, -Prompt-Tokens and "
        "-Completion-Tokens headers of an answer that is not streamed).",
    )


@router.post(
    "/rag",
    response_model=RagOut,
    response_model_exclude_none=True,
    responses={
        **errors(400, 404, 413, 422, 502, 503, 504),
        200: {"content": {"text/event-stream": {"description": "with `stream: true`"}}},
    },
)
async def rag(body: RagBody, http: HttpRequest, settings: SettingsDep) -> Response:
    if not body.topic.strip():
        raise BadInput("topic is empty")
    if len(body.topic) > settings.max_query_chars:
        raise BadInput(f"topic has {len(body.topic):,} characters; the limit is {settings.max_query_chars:,}", 413)
    fallback = None
    if body.pipeline is None:
        spec, fallback = await _default_pipeline(http.app.state.services, body.index or settings.default_index)
    else:
        spec = body.pipeline
    pipeline = (
        parse(resolve(spec, settings.data_dir), settings.max_k)
        if isinstance(spec, str)
        else from_mapping(spec, max_depth=settings.max_k)
    )
    if pipeline.generate is None:
        raise BadInput("the pipeline has no generation stage: end it with a generator, e.g. `| extractive`")
    runner = PipelineRunner(http.app.state.services, body.index)
    runner.check(pipeline)  # unknown stages are a 404/422 before anything is reserved
    await reserve(http, pipeline_cost(pipeline, http.app.state.generation.configs))
    headers = {PIPELINE_HEADER: str(pipeline)}
    if fallback:
        headers[FALLBACK_HEADER] = fallback
    headers = {k: v.encode("ascii", "backslashreplace").decode() for k, v in headers.items()}
    topic = Query(text=body.topic, qid=body.topic_id)
    if body.stream:
        events = stream_pipeline(runner, pipeline, topic)
        head = await primed(events)

        def render(event: StreamEvent) -> bytes:
            if event.event == "done":  # the very body of the request without `stream`, and what it spent
                return encode("done", _out(event.data, body, spent()))
            return encode(event.event, event.data)

        return EventStream(sse_body(head, events, render, lambda: runner.stage), headers=headers)
    # a client that leaves frees the backends' slots and calls; a shutdown leaves them the grace (the token is
    # not the server's; its CPU stages still stop at once with their own tokens)
    run = await watched(lambda: runner.run(pipeline, topic), CancelToken(), disconnected=http.is_disconnected)
    return Response(_out(run, body), media_type="application/json", headers=headers)


def _out(run: PipelineRun, body: RagBody, spend: SpendOut | None = None) -> str:
    """The answer's JSON, serialised once by pydantic-core (a response_model would validate it again)."""
    out = RagOut.model_construct(
        **dict(run.result),
        trace=[TraceOut(**vars(t)) for t in run.traces] if body.trace else None,
        segments=run.cited_docs() if body.segments else None,
        request_id=request_id() if body.trace else None,
        spend=spend,
    )
    return out.model_dump_json(exclude_none=True)


async def _default_pipeline(services: Services, index: str) -> tuple[str, str | None]:
    """The preset that runs when the request names none (:func:`ragnarok.core.presets.default_pipeline`), chosen
    from the retrievers the R service can run on ``index`` now (GET /v1/retrievers), and, when it is not the
    first default, why (``offline needs dense:minilm: building, 42 % done (...)``; the header's value)."""
    try:
        response = await services.retrieval.get("/v1/retrievers", headers=outgoing_headers())
        response.raise_for_status()
        listed = {r["name"]: r for r in response.json() if r["index"] == index}
        available = {name for name, r in listed.items() if r["available"]}
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return default_pipeline(None), None  # the retrieval stage will say what is wrong
    chosen, first = default_pipeline(available), DEFAULT_PIPELINES[0]
    if chosen == first:
        return chosen, None
    lacking = [name for name in retrievers(first) if name not in available]
    why = "; ".join(f"{name}: {listed[name]['reason'] if name in listed else 'not built'}" for name in lacking)
    return chosen, shorten(f"{first} needs {why}", 300)


@router.get("/v1/pipelines")
def pipelines(settings: SettingsDep) -> dict[str, str]:
    """The named pipeline presets: the built-in ones and those saved in the data directory (`ragnarok optimize`
    saves its best pipeline as one); a built-in name wins."""
    return {**saved_presets(settings.data_dir), **PRESETS}
