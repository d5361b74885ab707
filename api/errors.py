"""Every error leaves the API as JSON ``{"detail": ...}`` with a 4xx/5xx status, never as an HTML 500."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ragnarok.java import JavaNotFoundError
from ragnarok.registry import UnknownComponentError
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


def install_error_handlers(app: FastAPI) -> None:
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

    @app.exception_handler(JavaNotFoundError)
    async def _no_java(_: Request, exc: JavaNotFoundError) -> JSONResponse:
        return _json(503, str(exc))

    @app.exception_handler(RemoteRetrievalError)
    async def _remote(_: Request, exc: RemoteRetrievalError) -> JSONResponse:
        return _json(502, str(exc))
