"""Every error leaves the API as JSON ``{"detail": ...}`` with a 4xx/5xx status, never as an HTML 500."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ragnarok.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.gateway import StageError
from ragnarok.java import JavaNotFoundError
from ragnarok.spec import SpecError
from ragnarok.registry import UnknownComponentError
from ragnarok.rerank.base import RerankError, RerankerUnavailable
from ragnarok.retrieve.dense import DenseIndexNotFoundError
from ragnarok.retrieve.lucene import IndexNotFoundError
from ragnarok.retrieve.remote import RemoteRetrievalError

log = logging.getLogger(__name__)


class BadInput(ValueError):
    """A request that is well-formed JSON but asks for something impossible (e.g. a query too long)."""

    def __init__(self, message: str, status_code: int = 422):
        super().__init__(message)
        self.status_code = status_code


def _json(status: int, detail: object) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail})


class BodyLimit:
    """Pure ASGI middleware: a declared body over the limit is refused with 413 before it is read."""

    def __init__(self, app: Any, max_body_bytes: int):
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_body_bytes:
                detail = f"request body of {int(length):,} bytes; the limit is {self.max_body_bytes:,}"
                await _json(413, detail)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def install_error_handlers(app: FastAPI, max_body_bytes: int) -> None:
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return _json(422, errors)

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
        return _json(exc.status, {"stage": exc.stage, "error": exc.detail})

    for error_type, status in MESSAGE_STATUS.items():
        app.add_exception_handler(error_type, _message_handler(status))


#: Errors whose message is the whole answer, by status: the request names something that does not exist
#: (404) or cannot run here (422: says what to set), or the server lacks a resource (503) or a backend (502).
MESSAGE_STATUS: dict[type[Exception], int] = {
    UnknownComponentError: 404,
    SpecError: 422,
    GeneratorUnavailable: 422,
    RerankerUnavailable: 422,
    DenseIndexNotFoundError: 503,
    JavaNotFoundError: 503,
    RemoteRetrievalError: 502,
}


def _message_handler(status: int) -> Any:
    async def handler(_: Request, exc: Exception) -> JSONResponse:
        return _json(status, str(exc))

    return handler
