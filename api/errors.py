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

    @app.exception_handler(UnknownComponentError)
    async def _unknown(_: Request, exc: UnknownComponentError) -> JSONResponse:
        return _json(404, str(exc))

    @app.exception_handler(IndexNotFoundError)
    async def _no_index(_: Request, exc: IndexNotFoundError) -> JSONResponse:
        return _json(503, f"{exc}; build it with `ragnarok index`")

    @app.exception_handler(DenseIndexNotFoundError)
    async def _no_dense(_: Request, exc: DenseIndexNotFoundError) -> JSONResponse:
        return _json(503, str(exc))

    @app.exception_handler(RerankError)
    async def _rerank(_: Request, exc: RerankError) -> JSONResponse:
        return _json(504 if exc.timeout else 502, {"reranker": exc.reranker, "error": exc.cause,
                                                    "message": str(exc)})

    @app.exception_handler(RerankerUnavailable)
    async def _rerank_unavailable(_: Request, exc: RerankerUnavailable) -> JSONResponse:
        return _json(422, str(exc))

    @app.exception_handler(JavaNotFoundError)
    async def _no_java(_: Request, exc: JavaNotFoundError) -> JSONResponse:
        return _json(503, str(exc))

    @app.exception_handler(RemoteRetrievalError)
    async def _remote(_: Request, exc: RemoteRetrievalError) -> JSONResponse:
        return _json(502, str(exc))

    @app.exception_handler(GenerationError)
    async def _generation(_: Request, exc: GenerationError) -> JSONResponse:
        return _json(504 if exc.timeout else 502, {"generator": exc.generator, "error": exc.cause,
                                                    "message": str(exc)})

    @app.exception_handler(GeneratorUnavailable)
    async def _unavailable(_: Request, exc: GeneratorUnavailable) -> JSONResponse:
        return _json(422, str(exc))  # the request names a component that cannot run here: say how to fix it

    @app.exception_handler(StageError)
    async def _stage(_: Request, exc: StageError) -> JSONResponse:
        return _json(exc.status, {"stage": exc.stage, "error": exc.detail})

    @app.exception_handler(SpecError)
    async def _spec(_: Request, exc: SpecError) -> JSONResponse:
        return _json(422, str(exc))
