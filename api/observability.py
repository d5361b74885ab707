"""Request ids, metrics and access lines for every request; ``GET /metrics``.

* :func:`install` adds asgi-correlation-id's middleware (``X-Request-ID`` on every answer: the request's own
  when it carries a valid one, else a fresh one; the gateway passes it on to every stage call, so a ``/rag``
  and its stage calls share one id) outside :class:`RequestMetrics`, outside everything else.
* :class:`RequestMetrics` (pure ASGI) counts each HTTP request by method, route template and status, observes
  its latency (a call made in process while a request runs, such as a gateway's stage call, is not one: the
  gateway observes it in ``ragnarok_stage_duration_seconds``), and, at ``RAGNAROK_LOG_LEVEL=info``, logs one access line (logger ``ragnarok.access``: method,
  path, status, ms) carrying the request id, the route and, for a gateway stage call, the stage
  (:mod:`ragnarok.runtime.logs`).
* ``GET /metrics``: the Prometheus text format (:mod:`ragnarok.runtime.metrics`), behind the ``admin`` scope
  (with ``RAGNAROK_AUTH=off``, which ``ragnarok serve`` allows on loopback only, every caller has it).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgi_correlation_id import CorrelationIdMiddleware
from fastapi import APIRouter, Depends, FastAPI, Response
from starlette.routing import compile_path

from api.auth import needs
from api.body import StrictJSONRoute
from api.sse import OUTCOME
from ragnarok.core.settings import Settings
from ragnarok.core.trace import StageError
from ragnarok.runtime import metrics
from ragnarok.runtime.activity import REQUESTS, is_work
from ragnarok.runtime.logs import REQUEST_ID_HEADER, STAGE_HEADER, route_var, stage_var, valid_request_id

access = logging.getLogger("ragnarok.access")
T = TypeVar("T")
log = logging.getLogger(__name__)
#: Methods counted by name (a label value); any other is ``other``, so a client cannot add label values.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_STAGE_HEADER = STAGE_HEADER.lower().encode()
router = APIRouter(tags=["operations"], route_class=StrictJSONRoute)


@router.get(
    "/metrics",
    dependencies=[Depends(needs("admin"))],
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def prometheus_metrics() -> Response:
    """Prometheus metrics (needs the `admin` scope with keys): requests and latency by route, pipeline stages,
    backend calls, failures and tokens per generator, slot waits, dense builds, arena battles and votes, cache
    hit rates."""
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


def route_label(scope: dict, templates: Callable[[], list[tuple[re.Pattern, str]]]) -> str:
    """The route template the request matched (bounded: never the raw path), ``/arena`` for the arena's
    pages, ``unmatched`` for a 404 that matched no route. A request answered before routing (a 401, a 429)
    is matched here against ``templates()``: the app's paths (from its OpenAPI document)."""
    path = scope.get("path", "")
    if path == "/arena" or path.startswith("/arena/"):
        return "/arena"
    template = getattr(scope.get("route"), "path", None)
    if template is None:
        template = next((t for regex, t in templates() if regex.match(path)), "unmatched")
    return template


class RequestIds(CorrelationIdMiddleware):
    """asgi-correlation-id's middleware without its Sentry hook (it tags Sentry's scope on every request when
    sentry-sdk is installed, as a dependency of a dependency is here: a cost on every request for nothing), and
    without its WARNING per request that carries an invalid ``X-Request-ID`` (anyone could flood the log, and it
    quotes the header): such a header is dropped before the library sees it (a fresh id is made), said once per
    process at WARNING (without the value) and at DEBUG after that."""

    def __post_init__(self) -> None:
        self.sentry_extension = _no_sentry
        self._header = self.header_name.lower().encode("latin-1")
        self._warned = False

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = scope["headers"]
            for name, value in headers:
                if name == self._header and not valid_request_id(value.decode("latin-1")):
                    self._invalid()
                    scope = {**scope, "headers": [h for h in headers if h[0] != self._header]}
                    break
        await super().__call__(scope, receive, send)

    def _invalid(self) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "a request's %s was invalid (1-128 letters, digits and ._:@+/=-): a fresh id replaced it; "
                "later ones are logged at DEBUG only",
                self.header_name,
            )
        else:
            log.debug("an invalid %s was replaced by a fresh id", self.header_name)


def _no_sentry(_: str) -> None:
    return None


def _new_id() -> str:
    """32 random hex digits, as ``uuid4().hex`` (a quarter of its cost)."""
    return os.urandom(16).hex()


class RequestMetrics:
    """Pure ASGI middleware (see the module's docstring)."""

    def __init__(self, app: Any):
        self.app = app
        self._templates: list[tuple[re.Pattern, str]] | None = None
        self._asgi_app: Any = None  # the FastAPI app (scope["app"]), for its paths
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # label lookups, once per combination

    def templates(self) -> list[tuple[re.Pattern, str]]:
        if self._templates is None:
            try:
                paths = self._asgi_app.openapi().get("paths", {}) if self._asgi_app is not None else {}
            except Exception:  # noqa: BLE001 - a label is not worth failing a request for
                log.exception("the routes' templates could not be read for the metrics")
                paths = {}
            self._templates = [(compile_path(path)[0], path) for path in paths]
        return self._templates

    def _count(self, scope: dict, method: str, status: int, seconds: float) -> None:
        self._asgi_app = self._asgi_app or scope.get("app")
        route = route_label(scope, self.templates)
        children = self._children.get((method, route, status))
        if children is None:
            children = self._children[method, route, status] = (
                metrics.REQUESTS.labels(method, route, str(status)),
                metrics.REQUEST_SECONDS.labels(method, route),
            )
        children[0].inc()
        children[1].observe(seconds)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # a call made in process while a request runs (a gateway stage call through httpx.ASGITransport runs in
        # the request's context): logged, but not an HTTP request (its time is ragnarok_stage_duration_seconds)
        internal = route_var.get() is not None
        start, status = time.perf_counter(), 500
        stage = None
        for name, value in scope["headers"]:
            if name == _STAGE_HEADER:
                stage = value.decode("latin-1")[:200]
                break
        route_token = route_var.set(scope.get("path"))
        stage_token = stage_var.set(stage) if stage is not None else None

        async def counted_send(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        work = not internal and is_work(scope.get("method", ""), scope.get("path", ""))
        if work:
            REQUESTS.begin()  # background builds give way while requests come (ragnarok.runtime.activity)
        try:
            await self.app(scope, receive, counted_send)
        finally:
            if work:
                REQUESTS.end()
            seconds = time.perf_counter() - start
            status = scope.get(OUTCOME, status)  # a stream's: what its client saw at its end (api/sse.py)
            method = scope.get("method", "")
            method = method if method in METHODS else "other"
            if not internal:
                self._count(scope, method, status, seconds)
            if access.isEnabledFor(logging.INFO):
                raw = scope.get("raw_path") or scope.get("path", "").encode("unicode_escape")  # no newlines
                access_line(method, raw.decode("latin-1"), status, seconds)
            if stage_token is not None:
                stage_var.reset(stage_token)
            route_var.reset(route_token)


def access_line(method: str, path: str, status: int, seconds: float) -> None:
    """The access line of a request (logger ``ragnarok.access``, at info)."""
    if access.isEnabledFor(logging.INFO):
        ms = round(seconds * 1000, 3)
        # makeRecord + handle: what access.info does, less looking up the caller's frame
        access.handle(
            access.makeRecord(
                access.name,
                logging.INFO,
                __file__,
                0,
                "%s %s %d %.1f ms",
                (method, path, status, ms),
                None,
                extra={"status": status, "latency_ms": ms},
            )
        )


async def in_process(path: str, call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, a route's work called directly by the gateway of this process, logged as a request to
    ``path`` made through the app is: its log lines name the route, and one access line says ``POST path
    status ms`` (a failure's status: the :class:`StageError`'s)."""
    start, status = time.perf_counter(), 500
    token = route_var.set(path)
    try:
        result = await call()
        status = 200
        return result
    except StageError as exc:
        status = exc.status
        raise
    finally:
        access_line("POST", path, status, time.perf_counter() - start)
        route_var.reset(token)


def install(app: FastAPI, settings: Settings) -> None:
    """The metrics and request id middlewares (call after every other ``add_middleware``: they go outside)
    and ``GET /metrics``; ``settings.metrics`` off leaves out the metrics (the middleware and the route),
    ``settings.request_ids`` off the request ids."""
    if settings.metrics:
        app.add_middleware(RequestMetrics)
        app.include_router(router)
    if settings.request_ids:
        app.add_middleware(RequestIds, header_name=REQUEST_ID_HEADER, validator=valid_request_id, generator=_new_id)
