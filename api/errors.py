"""Every error leaves the API as JSON ``{"detail": ...}`` with a 4xx/5xx status, never as an HTML 500.

``detail`` is a message, a list of validation errors (``{loc, msg, type}``) or an object (a stage's or a
backend's failure): :class:`ErrorOut`, the one error schema, which every route declares for each status it can
answer (``responses=errors(...)``). No message quotes more than a few hundred characters of the input.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from api.body import BodyLimit
from api.store_call import RETRY_AFTER_S
from ragnarok.core.java import JavaNotFoundError
from ragnarok.core.meter import CallLimitReached, CallNotRecorded
from ragnarok.core.registry import ComponentArgumentError, UnknownComponentError
from ragnarok.core.settings import Settings, get_settings
from ragnarok.core.spec import SpecError
from ragnarok.runtime.cancel import ClientDisconnected, DeadlineExceeded, ShuttingDown
from ragnarok.runtime.quoting import QUOTE_CHARS, quote, shorten
from ragnarok.runtime.redact import redact
from ragnarok.service.gateway import StageError
from ragnarok.service.services import stage_failure
from ragnarok.stages.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.stages.rerank.base import RerankError, RerankerUnavailable
from ragnarok.stages.rerank.embedding import TooMuchWork
from ragnarok.stages.retrieve.building import IndexBuilding
from ragnarok.stages.retrieve.dense import DenseIndexNotFoundError
from ragnarok.stages.retrieve.lucene import IndexNotFoundError
from ragnarok.stages.retrieve.prebuilt import PrebuiltMissing
from ragnarok.stages.retrieve.remote import RemoteRetrievalError, RemoteTimeout

log = logging.getLogger(__name__)


class BadInput(ValueError):
    """A request that is well-formed JSON but asks for something impossible (e.g. a query too long)."""

    def __init__(self, message: str, status_code: int = 422):
        super().__init__(message)
        self.status_code = status_code


class ValidationItem(BaseModel):
    loc: list[str | int] = Field(description="Where: `body`, then the keys and indices down to the field.")
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every error response."""

    detail: str | list[ValidationItem] | dict[str, Any] = Field(
        description="A message; a list of validation errors (422); or an object naming the stage or backend "
        "that failed (502, 504)."
    )


_MEANING = {
    400: "The body is not UTF-8 JSON text (invalid UTF-8, a lone surrogate in a string), or a query parameter "
    "is not valid UTF-8.",
    404: "The request names something that does not exist (an index, a retriever, a reranker, a generator, "
    "a template, a model).",
    413: "Too large: the body, the query or topic, the number or the text of the candidates.",
    422: "Invalid input: a malformed body or pipeline, a value out of range, or a component that cannot run "
    "here (the message says what to set).",
    429: "Too many requests: wait and retry.",
    502: "A backend or a stage failed (an LLM endpoint, a remote index, one of our own stages): the detail "
    "names it and the cause.",
    503: "A resource is missing here (an index, Java, a model), is still being built (`building, N % done`, "
    "with a Retry-After header: GET /v1/retrievers shows the progress), the service database or the "
    "rate-limit store cannot be reached now (with a Retry-After header; nothing was spent), or the server is "
    "shutting down.",
    504: "No answer within the deadline.",
}
#: Each status's documented response, for the routes' ``responses=`` (see :func:`errors`).
ERRORS: dict[int, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": text} for status, text in _MEANING.items()
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that can answer ``statuses``."""
    return {status: ERRORS[status] for status in statuses}


def _short(detail: Any) -> Any:
    """``detail`` with every string cut to a few hundred characters: a safety net under the messages, which
    quote their input short themselves."""
    if isinstance(detail, str):
        return shorten(detail)
    if isinstance(detail, dict):
        return {key: _short(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_short(value) for value in detail[:50]]
    return detail


#: Environment variables whose value, when it is a path or a URL, an error body never shows (besides the
#: configured paths and URLs, and the keys :func:`ragnarok.runtime.redact.redact` masks): the Hugging Face and torch
#: caches and endpoints, and any the messages of a library might quote.
_PATH_VALUE = re.compile(r"^(?:[~/]|[A-Za-z]:[\\/]|[A-Za-z][A-Za-z0-9+.-]*://)")


def _server_values(settings: Settings) -> list[tuple[str, str]]:
    """``(value, placeholder)`` for what an error body must not show: the server's paths (data dir, home, index
    sources, model directories, the encoder cache, the Python environment), its internal URLs (the R and AG
    services, every generator's endpoint, remote indexes, RankZephyr, the model hub, the database, the rate
    limit storage) and the values of environment variables that are paths or URLs."""
    out: list[tuple[str, str]] = []

    def add(value: object, label: str) -> None:
        text = str(value or "").strip()
        if len(text) < 4 or text in {"/", "~"}:
            return
        if "://" in text:  # a URL: its address, and its host and port alone
            text = text.rstrip("/")
            out.append((text, label))
            parts = urlsplit(text)
            if parts.scheme and parts.netloc:
                out.append((f"{parts.scheme}://{parts.netloc}", label))
                host = parts.netloc.rpartition("@")[2]  # credentials go with the whole address above
                if len(host) >= 4:
                    out.append((host, label))
            return
        with contextlib.suppress(OSError, ValueError):
            if _PATH_VALUE.match(text) or text.startswith(".") or os.path.exists(text):  # a path: as written,
                for form in (text, os.path.expanduser(text), os.path.realpath(os.path.expanduser(text))):
                    if len(form) >= 4 and (form == text or _PATH_VALUE.match(form)):  # expanded, resolved
                        out.append((form, label))

    add(settings.data_dir, "<data dir>")
    for name, source in settings.index_sources().items():
        add(source, f"<index {name}>")
    for setting in ("monot5_model", "cross_encoder_model"):
        add(getattr(settings, setting), f"<{setting.removesuffix('_model').replace('_', '-')} model>")
    for name, value in settings.rerank_models.items():
        add(value, f"<model {name}>")
    add(settings.encoder_cache_dir, "<encoder cache dir>")
    add(settings.retrieval_url, "<retrieval service>")
    add(settings.generation_url, "<generation service>")
    add(settings.rankzephyr_url, "<rankzephyr endpoint>")
    add(settings.database_url, "<database>")
    if not settings.rate_limit_storage.startswith("memory://"):
        add(settings.rate_limit_storage, "<rate limit storage>")
    for name, config in settings.generator_configs().items():
        add(config.base_url, f"<generator {name}'s endpoint>")
        add(config.model_path, f"<generator {name}'s model>")
    add(os.environ.get("HF_ENDPOINT") or "https://huggingface.co", "<model hub>")
    add(sys.prefix, "<python env>")
    add(os.getcwd(), "<working dir>")
    add(os.path.expanduser("~"), "<home>")
    for name, value in sorted(os.environ.items()):
        if _PATH_VALUE.match(value.strip()):
            add(value, f"<env {name}>")
    return out


def scrub(detail: Any, settings: Settings | None = None) -> Any:
    """``detail`` (a message, or a list or object of them) with every server path, internal URL and environment
    value of :func:`_server_values` replaced by its placeholder (``<data dir>``, ``<index demo>``,
    ``<generator gpt-4o's endpoint>``; longest first, in one pass) and every configured key masked: what error
    bodies show. Logs keep the full detail."""
    found: dict[str, str] = {}
    for value, label in _server_values(settings or get_settings()):
        found.setdefault(value, label)
    pattern = re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True))) if found else None

    def clean(item: Any) -> Any:
        if isinstance(item, str):
            item = redact(item)
            return pattern.sub(lambda m: found[m.group(0)], item) if pattern else item
        if isinstance(item, dict):
            return {key: clean(value) for key, value in item.items()}
        if isinstance(item, list):
            return [clean(value) for value in item]
        return item

    return clean(detail)


def _json(status: int, detail: object, request: Request | None = None) -> JSONResponse:
    """The error response: ``detail`` cut short and scrubbed of server paths, URLs and environment values (with
    the settings of the app that answers ``request``); the full detail goes to the log when that changed it."""
    settings = getattr(request.app.state, "settings", None) if request is not None else None
    short = _short(detail)
    shown = scrub(short, settings)
    if shown != short:
        log.info("error %d (its body scrubbed of server paths and URLs): %s", status, redact(str(detail))[:2000])
    return JSONResponse(status_code=status, content={"detail": shown})


def _loc(part: Any) -> str | int:
    return part if isinstance(part, int) or (len(str(part)) <= 40 and str(part).isprintable()) else quote(str(part), 40)


def _validation_item(error: dict[str, Any]) -> dict[str, Any]:
    """One validation error without its ``input`` (which may be the whole body); keys quoted short, a key the
    schema does not have never echoed."""
    msg = error.get("msg", "")
    if error.get("type") == "json_invalid" and (cause := (error.get("ctx") or {}).get("error")):
        msg = f"{msg}: {cause}"
    loc = [_loc(p) for p in error.get("loc", ())]
    if error.get("type") == "extra_forbidden" and loc:  # the caller's own key: named by what it is, not echoed
        loc[-1] = "(an unknown key)"
    return {"loc": loc, "msg": shorten(str(msg), QUOTE_CHARS), "type": error.get("type", "")}


def install_error_handlers(app: FastAPI, max_body_bytes: int) -> None:
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _json(422, [_validation_item(e) for e in exc.errors()[:50]], _)

    @app.exception_handler(BadInput)
    async def _bad_input(_: Request, exc: BadInput) -> JSONResponse:
        response = _json(exc.status_code, str(exc), _)
        if exc.status_code == 503:  # a part the route needs is away now: when to ask again, as the store's 503s say
            response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    @app.exception_handler(IndexNotFoundError)
    async def _no_index(_: Request, exc: IndexNotFoundError) -> JSONResponse:
        return _json(503, no_index_message(exc), _)

    @app.exception_handler(RerankError)
    async def _rerank(_: Request, exc: RerankError) -> JSONResponse:
        return _json(
            504 if exc.timeout else 502, {"reranker": exc.reranker, "error": exc.cause, "message": str(exc)}, _
        )

    @app.exception_handler(GenerationError)
    async def _generation(_: Request, exc: GenerationError) -> JSONResponse:
        return _json(504 if exc.timeout else 502, _generation_detail(exc), _)

    @app.exception_handler(StageError)
    async def _stage(_: Request, exc: StageError) -> JSONResponse:
        response = _json(exc.status, _stage_detail(exc), _)
        if exc.retry_after:
            response.headers["Retry-After"] = exc.retry_after
        return response

    @app.exception_handler(IndexBuilding)
    async def _building(_: Request, exc: IndexBuilding) -> JSONResponse:
        response = _json(503, str(exc), _)
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    for error_type, status in MESSAGE_STATUS.items():
        app.add_exception_handler(error_type, _message_handler(status))

    @app.exception_handler(CallNotRecorded)
    async def _not_recorded(_: Request, exc: CallNotRecorded) -> JSONResponse:
        response = _json(503, str(exc), _)
        response.headers["Retry-After"] = str(RETRY_AFTER_S)  # as every 503 of the service database's
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug: still JSON, never the input or a traceback; the traceback goes to the log
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return _json(500, f"internal error ({type(exc).__name__}); it has been logged", request)


#: Errors whose message is the whole answer, by status: the request names something that does not exist
#: (404) or cannot run here (422: says what to set), or the server lacks a resource (503) or a backend (502).
MESSAGE_STATUS: dict[type[Exception], int] = {
    UnknownComponentError: 404,
    SpecError: 422,
    ComponentArgumentError: 422,
    GeneratorUnavailable: 422,
    RerankerUnavailable: 422,
    DenseIndexNotFoundError: 503,
    JavaNotFoundError: 503,
    PrebuiltMissing: 503,  # a catalogue index not unpacked here: the message says how to get it
    RemoteTimeout: 504,  # before RemoteRetrievalError, its base: the first match wins
    RemoteRetrievalError: 502,
    TooMuchWork: 413,  # CPU work over the per-request bound
    DeadlineExceeded: 504,  # no answer within the request's deadline
    ShuttingDown: 503,
    ClientDisconnected: 499,  # nobody reads it: the client has gone
    CallLimitReached: 429,  # a backend call past what the request reserved (api/auth.py)
    CallNotRecorded: 503,  # the service database cannot record a call first: it is not made
}


def _stage_detail(exc: StageError) -> dict[str, Any]:
    """A failed stage: its name and its service's error. A stage the request got wrong (4xx: its service's
    message says what exists or what it takes, without the caller's text) is named without the caller's text
    too: by its kind alone for an unknown name (404: ``generate``, not ``generate NAME``), by its kind and
    component without the argument otherwise (``rerank mmr``, not ``rerank mmr:ARG``)."""
    kind, _, name = exc.stage.partition(" ")
    if exc.status == 404:
        stage = kind
    elif 400 <= exc.status < 500:
        stage = f"{kind} {re.split(r'[:@]', name, maxsplit=1)[0]}".strip()
    else:
        stage = exc.stage
    return {"stage": stage, "error": exc.detail}


def _generation_detail(exc: GenerationError) -> dict[str, Any]:
    detail = {"generator": exc.generator, "error": exc.cause, "message": str(exc)}
    if deadline := getattr(exc, "deadline", None):  # a stream's (ragnarok.stages.generate.streaming)
        detail["deadline"] = deadline
    return detail


def error_detail(exc: BaseException, settings: Settings | None = None) -> tuple[int, Any]:
    """The status and scrubbed detail the API answers ``exc`` with (a streamed answer's ``error`` event says
    the same as the JSON error would have)."""
    detail: Any
    if isinstance(exc, GenerationError):
        status, detail = (504 if exc.timeout else 502), _generation_detail(exc)
    elif isinstance(exc, BadInput):
        status, detail = exc.status_code, str(exc)
    elif isinstance(exc, HTTPException):
        status, detail = exc.status_code, exc.detail
    elif isinstance(exc, StageError):
        status, detail = exc.status, _stage_detail(exc)
    elif isinstance(exc, IndexBuilding):
        status, detail = 503, str(exc)
    elif isinstance(exc, IndexNotFoundError):
        status, detail = 503, no_index_message(exc)
    elif status := next((s for kind, s in MESSAGE_STATUS.items() if isinstance(exc, kind)), 0):
        detail = public_message(exc)
    else:
        status, detail = 500, f"internal error ({type(exc).__name__}); it has been logged"
    return status, scrub(_short(detail), settings)


def no_index_message(exc: IndexNotFoundError) -> str:
    return f"{exc}; build it with `ragnarok index`"


def as_stage_error(stage: str, exc: Exception, settings: Settings | None = None) -> StageError:
    """The :class:`StageError` the gateway makes of a route's error answer to ``exc`` (over HTTP:
    :func:`ragnarok.service.services.stage_error`), for a route it calls directly in process."""
    if isinstance(exc, ValidationError):  # a body the gateway built itself: our fault, not the client's
        return StageError(stage, 502, "internal error: the stage refused the request the gateway built")
    status, detail = error_detail(exc, settings)
    if status == 500:  # a bug: the traceback goes to the log, as the API's handler logs it
        log.error("unexpected error in the stage %s", stage, exc_info=exc)
    retry_after = (
        str(exc.retry_after_s)
        if isinstance(exc, IndexBuilding)
        else str(RETRY_AFTER_S)
        if isinstance(exc, CallNotRecorded)
        else None
    )
    return stage_failure(stage, status, detail, retry_after)


def public_message(exc: BaseException) -> str:
    """What an error body says of ``exc``: its ``public`` message where it has one (an unknown name, a spec
    error: never the caller's text, which a scrubber would turn into an oracle), else its message."""
    public = getattr(exc, "public", None)
    return public if isinstance(public, str) else str(exc)


def _message_handler(status: int) -> Any:
    async def handler(_: Request, exc: Exception) -> JSONResponse:
        return _json(status, public_message(exc), _)

    return handler
