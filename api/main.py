"""The app factory: ``create_app(settings)`` builds the API with its state; nothing happens at import time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
import httpx
from fastapi import Depends, FastAPI

from api import observability
from api.auth import Auth, AuthMiddleware, needs
from api.errors import install_error_handlers
from api.routes import arena as arena_routes
from api.routes import evaluate, generate, health, rag, rerank, retrieve, stages
from api.shutdown import ShutdownAnswer
from api.store_call import sweep_forever
from api.timing import ServerTiming
from ragnarok.auth.principal import Principal, forwarded_credentials
from ragnarok.core.registry import Instances
from ragnarok.core.settings import Settings, get_settings
from ragnarok.judge.cache import JudgeCache
from ragnarok.runtime.blas import limit_blas_threads
from ragnarok.runtime.cancel import InFlight
from ragnarok.runtime.proxies import ForwardedFor
from ragnarok.service.gateway import Services
from ragnarok.service.retrieval_service import RerankService, RetrievalService
from ragnarok.stages.generate.service import GenerationService
from ragnarok.stages.query.writer import TextWriter

#: The least time the audit rows and the background builds each get at shutdown, however little time is left.
MIN_STEP_S = 0.1
#: The shutdown's last steps end within the grace plus this (the process leaves at the grace plus 0.9 s:
#: ragnarok.cli.serving.EXIT_MARGIN_S).
LAST_STEPS_S = 0.6


def create_app(settings: Settings | None = None, arena: bool = True, principal: Principal | None = None) -> FastAPI:
    """The API; with ``arena`` (the default) the Gradio arena is mounted at ``/arena``. ``principal``: every
    request runs as it, keys or not (the operator's commands running the app in process pass ``LOCAL``)."""
    settings = settings or get_settings()
    app = FastAPI(
        title="ragnarok",
        version="0.1.0",
        summary="Retrieval (R) and augmented generation (AG) for TREC RAG-style pipelines.",
        lifespan=_lifespan,
        # FastAPI's native OpenTelemetry off: the service reports through Prometheus (GET /metrics), request ids
        # and access lines; left on, it looked up OpenTelemetry's providers in os.environ on every request
        # (4 % of a loaded server's GIL time)
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.retrieval = RetrievalService(settings)
    app.state.reranking = RerankService(settings)
    app.state.generation = GenerationService(settings)
    app.state.text_writer = TextWriter(app.state.generation.configs)  # query stages, LLM compressor
    app.state.segment_lookups = Instances()  # neighbours, automerge: segments by id prefix, per index
    app.state.services = _services(app, settings)
    app.state.judge_cache = JudgeCache(settings.data_dir / "judgments.db")  # POST /v1/evaluate (opened on use)
    app.state.inflight = InFlight()  # cancel tokens of the CPU work in progress (cancelled on shutdown)
    install_error_handlers(app, settings.max_body_bytes)
    app.add_middleware(ServerTiming)
    app.add_middleware(ShutdownAnswer)  # requests cut off by shutdown: the JSON 503 (api/shutdown.py)
    app.state.auth = Auth(settings, default=principal)
    app.add_middleware(AuthMiddleware, auth=app.state.auth)  # keys, rates and the spend meter (api/auth.py)
    # the client's address: X-Forwarded-For believed from the trusted proxies only (uvicorn's own is off);
    # an address from it that is not an IP is a 400 (api/auth.py)
    app.add_middleware(ForwardedFor, trusted_hosts=settings.trusted_proxy_list())
    observability.install(app, settings)  # outermost: request ids, metrics, access lines; GET /metrics
    # the scope each router's routes need with keys (api/auth.py); /v1/write and /v1/segments declare their own
    app.include_router(health.router)
    app.include_router(retrieve.router, dependencies=[Depends(needs("retrieve"))])
    app.include_router(rerank.router, dependencies=[Depends(needs("retrieve"))])
    app.include_router(generate.router, dependencies=[Depends(needs("generate"))])
    app.include_router(rag.router, dependencies=[Depends(needs("retrieve", "generate"))])
    app.include_router(stages.router)
    app.include_router(evaluate.router, dependencies=[Depends(needs("evaluate"))])
    app.include_router(arena_routes.router, dependencies=[Depends(needs("admin"))])
    if arena:
        from webui.app import mount  # noqa: PLC0415 - Gradio loads only when the arena is served

        mount(app, settings, "/arena")
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Starts the background builds the server was given (``RetrievalService.build_dense``: ``ragnarok
    serve`` gives the demo's dense index) and stops them on shutdown (cancelled with the in-flight work, then
    waited for, so they remove their temporary files, for what is left of the shutdown grace since SIGTERM: the
    process leaves within the grace), once the audit log has every request's row (:meth:`api.auth.Auth.drain`)."""
    builds, inflight = app.state.retrieval.builds, app.state.inflight
    limit_blas_threads(app.state.settings.blas_threads)
    builds.start_all(inflight)
    await anyio.to_thread.run_sync(app.state.auth.open_limiter)  # once, before the first request
    sweep = None
    if app.state.settings.auth == "keys":  # the reservations of processes that died: settled with their calls
        sweep = asyncio.create_task(sweep_forever(app.state.auth.store))
    try:
        yield
    finally:
        if sweep is not None:
            sweep.cancel()
        grace_s = app.state.settings.shutdown_grace_s

        def left_s() -> float:  # the rows of the requests cut at the grace's end still fit
            since = time.monotonic() - inflight.closed_at if inflight.closed_at is not None else 0.0
            return grace_s + LAST_STEPS_S - since

        await app.state.auth.drain(max(MIN_STEP_S, left_s()))  # the rows of the requests cut off, first
        await anyio.to_thread.run_sync(builds.stop_all, max(MIN_STEP_S, left_s()))


def _services(app: FastAPI, settings: Settings) -> Services:
    """Clients for the R and AG services: remote URLs when configured, else this app in process."""
    local = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ragnarok.local", timeout=settings.gateway_timeout_s
    )

    async def forward_key(request: httpx.Request) -> None:  # the caller's key goes on to the remote service
        if (credentials := forwarded_credentials()) and "authorization" not in request.headers:
            request.headers["authorization"] = credentials

    def client(url: str | None) -> httpx.AsyncClient:
        return (
            httpx.AsyncClient(base_url=url, timeout=settings.gateway_timeout_s, event_hooks={"request": [forward_key]})
            if url
            else local
        )

    return Services(
        retrieval=client(settings.retrieval_url),
        generation=client(settings.generation_url),
        local_generation=None if settings.generation_url else app.state.generation,
        local_retrieve=None if settings.retrieval_url else retrieve.in_process(app),
        local_generate=None if settings.generation_url else generate.in_process(app),
    )
