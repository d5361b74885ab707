"""The AG service: ``POST /v1/generate``, ``GET /v1/generators`` and ``GET /v1/templates``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, PrivateAttr, StrictBool, model_validator

from api import observability
from api.auth import SpendOut, reserve, spent
from api.body import StrictJSONRoute
from api.deps import GenerationDep, SettingsDep
from api.errors import BadInput, as_stage_error, errors, scrub
from api.ragnarok_shape import envelope, from_direct, is_direct
from api.route_auth import check_scope
from api.sse import EventStream, encode, primed
from api.sse import body as sse_body
from ragnarok.auth.cost import Cost
from ragnarok.core.settings import Settings
from ragnarok.core.types import MAX_ID_CHARS, Integer, Query, RagAnswer, Request
from ragnarok.runtime.cancel import CancelToken, watched
from ragnarok.service.gateway import GENERATION_K
from ragnarok.service.services import LocalGenerate
from ragnarok.stages.generate.prompts import load_templates
from ragnarok.stages.generate.service import GenerationService
from ragnarok.stages.generate.streaming import StreamEvent

router = APIRouter(prefix="/v1", tags=["generation"], route_class=StrictJSONRoute)


class GenerateBody(BaseModel):
    topic: str | None = Field(None, description="The topic text; defaults to request.query.text.")
    topic_id: str | None = Field(
        None, max_length=MAX_ID_CHARS, description="The topic id; defaults to request.query.qid."
    )
    request: Request = Field(description="Candidates as the R service returns them (rank_llm Request JSON).")
    generator: str | None = Field(None, description="A name from GET /v1/generators (default: extractive).")
    template: str | None = Field(
        None,
        description="A name from GET /v1/templates (default: the generator's "
        "own template, e.g. `small` for smollm2, else the default_template setting).",
    )
    k: Integer = Field(20, description="How many of the top candidates the generator sees, 1..100.")
    notes: StrictBool = Field(
        False,
        description="Also return what post-processing did as `notes` (beside the TREC "
        "answer; /rag shows them in the generator's trace).",
    )
    stream: StrictBool = Field(
        False,
        description="Answer as Server-Sent Events (`text/event-stream`): "
        "`references`, `delta` (text as it is written), `sentence` (each one complete, with "
        "its citations), `done` (the body this request answers without `stream`, with "
        "`spend`: the calls and tokens spent), or "
        "`error` after the stream started.",
    )
    envelope: StrictBool = Field(
        False,
        description="Answer in Ragnarök's `castorini.cli.v1` envelope (the TREC "
        "answer in `artifacts[0].data[0]`), as its `serve` does. Set by itself for "
        "Ragnarök's direct body, `{query, candidates, overrides?}`, which this route also "
        "takes (Anserini's REST answer piped in as it is, too).",
    )
    run_id: str = Field("ragnarok", max_length=MAX_ID_CHARS, description="The enveloped record's `run_id`.")
    _ignored: list[str] = PrivateAttr(default_factory=list)  # Ragnarök overrides that change nothing here

    @model_validator(mode="wrap")
    @classmethod
    def _ragnarok_direct(cls, data: Any, handler: Any) -> Any:
        if not is_direct(data):
            return handler(data)
        body = from_direct(data)  # a ValueError is the 422 that says what is wrong
        ignored = body.pop("ignored")
        model = handler(body)
        model._ignored = ignored
        return model


class GeneratorOut(BaseModel):
    name: str
    backend: str
    model: str
    available: bool
    reason: str = ""
    description: str = ""
    paid: bool = Field(
        False,
        description="Whether a call costs money (the `paid` setting; default true for the "
        "openai, azure and cohere backends): the arena's default pool leaves it out.",
    )


class TemplateOut(BaseModel):
    name: str
    description: str
    max_words: int


class GenerateOut(RagAnswer):
    notes: dict[str, Any] | None = Field(
        None,
        description="Only when asked (`notes: true`): what post-processing "
        "did (not part of the TREC answer): repeats_dropped, citations_attributed, citations_removed, "
        "citations (produced, attributed, mixed or none), contexts read, and "
        "for streamed models why generation stopped.",
    )
    spend: SpendOut | None = Field(
        None,
        description="Only in a streamed answer's `done` event: what the "
        "request spent (the Ragnarok-Backend-Calls, -Prompt-Tokens and "
        "-Completion-Tokens headers of an answer that is not streamed).",
    )


@router.post(
    "/generate",
    response_model=GenerateOut,
    response_model_exclude_none=True,
    responses={
        **errors(400, 404, 413, 422, 502, 503, 504),
        200: {"content": {"text/event-stream": {"description": "with `stream: true`"}}},
    },
)
async def generate(body: GenerateBody, http: HttpRequest, service: GenerationDep, settings: SettingsDep) -> Any:
    """Answers within the generator's `deadline_s` (504 "no answer within N s"), or 504 "busy" when none of
    its `max_concurrency` slots frees within `slot_wait_s`; a backend failure is a 502 naming it and why."""
    text = body.topic if body.topic is not None else body.request.query.text
    _check(settings, text, body.k, body.request)
    topic = Query(text=text, qid=body.topic_id if body.topic_id is not None else body.request.query.qid)
    generator = body.generator or settings.default_generator
    cost = Cost()
    cost.add(generator, 1, service.configs)
    await reserve(http, cost)
    if body.stream:
        return await _streamed(service, topic, body, generator)
    # a client that leaves frees the slot and the backend call; a shutdown leaves it the grace to answer (the
    # token is not the server's: api/shutdown.py answers 503 for it when the grace ends)
    answer = await watched(
        lambda: service.agenerate(topic, body.request, generator, body.template, body.k),
        CancelToken(),
        disconnected=http.is_disconnected,
    )
    if body.envelope:
        template = body.template or service.configs[generator].template or settings.default_template
        return JSONResponse(envelope(answer, body.run_id, generator, template, body._ignored))
    return answer_out(answer, body.notes)


def _check(settings: Settings, text: str, k: int, request: Request) -> None:
    if not text.strip():
        raise BadInput("topic is empty")
    if len(text) > settings.max_query_chars:
        raise BadInput(f"topic has {len(text):,} characters; the limit is {settings.max_query_chars:,}", 413)
    if not 1 <= k <= 100:
        raise BadInput(f"k must be between 1 and 100, got {k}")
    if len(request.candidates) > settings.max_candidates:
        raise BadInput(f"{len(request.candidates):,} candidates; the limit is {settings.max_candidates:,}", 413)
    for c in request.candidates:
        if len(c.doc.segment or "") > settings.max_segment_chars:
            raise BadInput(f"candidate {c.docid} has over {settings.max_segment_chars:,} characters", 413)


def in_process(app: Any) -> LocalGenerate:
    """``POST /v1/generate`` (``notes: true``, every candidate read) for the gateway of ``app``'s own process,
    called directly: the route's checks, then the service's answer; a failure is the :class:`StageError` that
    the route's error answer would make (the caller's reservation covers the call, as over HTTP)."""
    settings, service = app.state.settings, app.state.generation

    async def answer(stage: str, topic: Query, request: Request, generator: str, template: str | None) -> RagAnswer:
        try:
            check_scope("generate")  # the router's own dependency
            _check(settings, topic.text, GENERATION_K, request)
            return await service.agenerate(topic, request, generator, template, GENERATION_K)
        except Exception as exc:  # noqa: BLE001 - every error has the status and body the API answers it with
            raise as_stage_error(stage, exc, settings) from None

    async def call(stage: str, topic: Query, request: Request, generator: str, template: str | None) -> RagAnswer:
        return await observability.in_process(
            "/v1/generate", lambda: answer(stage, topic, request, generator, template)
        )

    return call


def answer_out(answer: RagAnswer, notes: bool) -> GenerateOut:
    return GenerateOut(**answer.model_dump(), notes=getattr(answer, "notes", None) if notes else None)


async def _streamed(service: GenerationService, topic: Query, body: GenerateBody, generator: str) -> EventStream:
    events = service.astream(topic, body.request, generator, body.template, body.k)
    head = await primed(events)

    def render(event: StreamEvent) -> bytes:
        if event.event == "done":  # the very body of the request without `stream`, and what it spent
            out = answer_out(event.data, body.notes)
            out.spend = spent()
            return encode("done", out.model_dump_json(exclude_none=True))
        return encode(event.event, event.data)

    return EventStream(sse_body(head, events, render, lambda: f"generate {generator}"))


@router.get("/generators", response_model=list[GeneratorOut])
async def generators(service: GenerationDep, settings: SettingsDep) -> list[GeneratorOut]:
    """Self-hosted servers are probed at once, each within `generator_probe_timeout_s` (cached a few s). A
    reason names an endpoint as `<generator NAME's endpoint>`, never its URL (as error bodies do)."""
    infos = await service.describe()

    def own(info: Any) -> str:  # a generator's own endpoint first (several may share one)
        base = (service.configs[info.name].base_url or "").rstrip("/")
        return info.reason.replace(base, f"<generator {info.name}'s endpoint>") if base else info.reason

    reasons = scrub([own(info) for info in infos], settings)
    return [GeneratorOut(**{**vars(info), "reason": reason}) for info, reason in zip(infos, reasons)]


@router.get("/templates", response_model=list[TemplateOut])
def templates() -> list[TemplateOut]:
    return [
        TemplateOut(name=t.name, description=t.description, max_words=t.max_words) for t in load_templates().values()
    ]
