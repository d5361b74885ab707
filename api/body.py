"""What a request body may be, checked once for every route before any model sees it.

* At most ``max_body_bytes``, counted as the bytes stream in (:class:`BodyLimit`): a declared
  ``Content-Length`` over the limit is refused before anything is read, and a body sent without one
  (``Transfer-Encoding: chunked``) as soon as the count passes the limit, without reading the rest.
* JSON (:class:`StrictJSONRoute`) that is UTF-8 text whose strings hold no lone surrogates (400), with finite
  numbers of reasonable length and no ``NaN``/``Infinity`` (422), nested at most ``MAX_NESTING`` levels (422).
  Errors name the field, quoting at most a few characters of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from ragnarok.runtime.quoting import quote

MAX_NESTING = 32  # levels of objects and arrays in a request body
MAX_NUMBER_CHARS = 100  # characters of one number
_SURROGATE = re.compile("[\ud800-\udfff]")


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a body passes the limit; FastAPI answers it as a 413 JSON error."""

    def __init__(self, limit: int):
        super().__init__(
            413, f"request body over {limit:,} bytes; the limit is {limit:,}", headers={"connection": "close"}
        )


class BodyLimit:
    """Pure ASGI middleware: a request body over ``max_body_bytes`` is answered 413 (JSON), declared or not."""

    def __init__(self, app: Any, max_body_bytes: int):
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            detail = f"request body of {int(length):,} bytes; the limit is {limit:,}"
            await JSONResponse({"detail": detail}, 413, headers={"connection": "close"})(scope, receive, send)
            return
        received, started = 0, False

        async def counted_receive() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge as exc:  # an app that let it through (FastAPI routes answer it themselves)
            if started:
                raise
            await JSONResponse({"detail": exc.detail}, 413, headers=exc.headers)(scope, receive, send)


class BadBody(HTTPException):
    """A body that is not acceptable JSON text (see the module docstring)."""


def _number(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise BadBody(422, f"a number in the body has {len(text):,} characters; the limit is {MAX_NUMBER_CHARS}")
    return text


def _int(text: str) -> int:
    return int(_number(text))


def _float(text: str) -> float:
    value = float(_number(text))
    if value in (float("inf"), float("-inf")):
        raise BadBody(422, f"the number {text} in the body is out of range")
    return value


def _constant(name: str) -> None:
    raise BadBody(422, f"{name} is not JSON: numbers in the body must be finite")


def _where(path: list[Any]) -> str:
    """``body.request.candidates.0.doc``; a key that is long or not printable is quoted (escaped, cut)."""
    return ".".join(
        [
            "body",
            *(str(p) if not isinstance(p, str) or (len(p) <= 40 and p.isprintable()) else quote(p, 40) for p in path),
        ]
    )


def check_json(value: Any, path: list[Any] | None = None) -> None:
    """Raise :class:`BadBody` naming the field of ``value`` that holds a lone surrogate or that nests deeper
    than ``MAX_NESTING`` (recursion stops there, so it is bounded)."""
    path = [] if path is None else path
    if isinstance(value, str):
        if not value.isascii() and (m := _SURROGATE.search(value)):
            raise BadBody(
                400,
                f"{_where(path)} holds a lone surrogate {ascii(m.group())} at character "
                f"{m.start():,}: strings must be valid Unicode text",
            )
        return
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    if len(path) >= MAX_NESTING:
        raise BadBody(422, f"{_where(path[:4])}… is nested deeper than {MAX_NESTING} levels")
    for key, item in items:
        path.append(key)
        if isinstance(key, str):
            check_json(key, path)
        check_json(item, path)
        path.pop()


def decode_json(body: bytes) -> Any:
    """``body`` parsed and checked (:class:`BadBody` otherwise; malformed JSON raises ``JSONDecodeError``)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadBody(400, f"request body is not valid UTF-8 (byte {exc.start:,})") from None
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except RecursionError:
        raise BadBody(422, f"request body is nested deeper than {MAX_NESTING} levels") from None
    check_json(value)
    return value


class StrictJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = decode_json(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """The route class of every router: request bodies are decoded by :func:`decode_json`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJSONRequest(request.scope, request.receive))

        return strict_handler
