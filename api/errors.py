"""Every error leaves the API as JSON ``{"detail": ...}`` with a 4xx/5xx status, never as an HTML 500.

``detail`` is a message, a list of validation errors (``{loc, msg, type}``) or an object (a stage's or a
backend's failure): :class:`ErrorOut`, the one error schema, which every route declares for each status it can
answer (``responses=errors(...)``). No message quotes more than a few hundred characters of the input.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.body import BodyLimit
from ragnarok.cancel import ClientDisconnected, DeadlineExceeded, ShuttingDown
from ragnarok.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.gateway import StageError
from ragnarok.java import JavaNotFoundError
from ragnarok.quoting import QUOTE_CHARS, quote, shorten
from ragnarok.spec import SpecError
from ragnarok.registry import ComponentArgumentError, UnknownComponentError
from ragnarok.rerank.base import RerankError, RerankerUnavailable
from ragnarok.rerank.embedding import TooMuchWork
from ragnarok.retrieve.building import IndexBuilding
from ragnarok.retrieve.dense import DenseIndexNotFoundError
from ragnarok.retrieve.lucene import IndexNotFoundError
from ragnarok.retrieve.remote import RemoteRetrievalError

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
        "that failed (502, 504).")


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
         "with a Retry-After header: GET /v1/retrievers shows the progress), or the server is shutting down.",
    504: "No answer within the deadline.",
}
#: Each status's documented response, for the routes' ``responses=`` (see :func:`errors`).
ERRORS: dict[int, dict[str, Any]] = {status: {"model": ErrorOut, "description": text}
                                     for status, text in _MEANING.items()}


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


def _json(status: int, detail: object) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": _short(detail)})


def _loc(part: Any) -> str | int:
    return part if isinstance(part, int) or (len(str(part)) <= 40 and str(part).isprintable()) \
        else quote(str(part), 40)


def _validation_item(error: dict[str, Any]) -> dict[str, Any]:
    """One validation error without its ``input`` (which may be the whole body); keys quoted short."""
    msg = error.get("msg", "")
    if error.get("type") == "json_invalid" and (cause := (error.get("ctx") or {}).get("error")):
        msg = f"{msg}: {cause}"
    return {"loc": [_loc(p) for p in error.get("loc", ())], "msg": shorten(str(msg), QUOTE_CHARS),
            "type": error.get("type", "")}


def install_error_handlers(app: FastAPI, max_body_bytes: int) -> None:
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _json(422, [_validation_item(e) for e in exc.errors()[:50]])

    @app.exception_handler(BadInput)
    async def _bad_input(_: Request, exc: BadInput) -> JSONResponse:
        return _json(exc.status_code, str(exc))

    @app.exception_handler(IndexNotFoundError)
    async def _no_index(_: Request, exc: IndexNotFoundError) -> JSONResponse:
        return _json(503, f"{exc}; build it with `ragnarok index`")

    @app.exception_handler(RerankError)
    async def _rerank(_: Request, exc: RerankError) -> JSONResponse:
        return _json(504 if exc.timeout else 502, {"reranker": exc.reranker, "error": exc.cause,
                                                    "message": str(exc)})

    @app.exception_handler(GenerationError)
    async def _generation(_: Request, exc: GenerationError) -> JSONResponse:
        return _json(504 if exc.timeout else 502, {"generator": exc.generator, "error": exc.cause,
                                                    "message": str(exc)})

    @app.exception_handler(StageError)
    async def _stage(_: Request, exc: StageError) -> JSONResponse:
        response = _json(exc.status, {"stage": exc.stage, "error": exc.detail})
        if exc.retry_after:
            response.headers["Retry-After"] = exc.retry_after
        return response

    @app.exception_handler(IndexBuilding)
    async def _building(_: Request, exc: IndexBuilding) -> JSONResponse:
        response = _json(503, str(exc))
        response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    for error_type, status in MESSAGE_STATUS.items():
        app.add_exception_handler(error_type, _message_handler(status))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # a bug: still JSON, never the input or a traceback; the traceback goes to the log
        log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return _json(500, f"internal error ({type(exc).__name__}); it has been logged")


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
    RemoteRetrievalError: 502,
    TooMuchWork: 413,  # CPU work over the per-request bound
    DeadlineExceeded: 504,  # no answer within the request's deadline
    ShuttingDown: 503,
    ClientDisconnected: 499,  # nobody reads it: the client has gone
}


def _message_handler(status: int) -> Any:
    async def handler(_: Request, exc: Exception) -> JSONResponse:
        return _json(status, str(exc))

    return handler
