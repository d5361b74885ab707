"""Liveness (``/healthz``: the process answers) and readiness (``/readyz``: it can serve now), for a proxy's,
Docker's or Kubernetes' probes."""

from __future__ import annotations

import time

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.body import StrictJSONRoute
from api.store_call import store_call
from ragnarok.arena.db import StoreError

router = APIRouter(tags=["health"], route_class=StrictJSONRoute)
#: Each readiness check's deadline: a store that does not answer in this long is not ready.
CHECK_S = 2.0


class ReadyOut(BaseModel):
    ready: bool
    checks: dict[str, str] = Field(description="Each check's outcome: `ok`, or why not.")


@router.get("/healthz")
async def healthz() -> dict[str, str]:  # async: liveness never waits for a worker thread
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: {"model": ReadyOut, "description": "Not ready: a store unreachable, the default index missing."}},
)
async def readyz(http: Request) -> JSONResponse:
    """200 when this instance can serve: the service database answers (with keys on), the rate-limit store
    answers (when it is Redis), and the default index is there; else 503 with ``Retry-After`` and what failed.
    Each check answers within 2 s; nothing is written."""
    settings, checks = http.app.state.settings, {}
    start = time.monotonic()
    if settings.auth == "keys":
        try:
            await store_call(http.app.state.auth.store.ping, deadline_s=CHECK_S)
            checks["database"] = "ok"
        except StoreError as exc:
            checks["database"] = str(exc).split(":", 1)[0] if "did not answer" not in str(exc) else str(exc)
        checks["rate_limit_store"] = await _rate_store(http)
    infos = [i for i in http.app.state.retrieval.describe() if i.index == settings.default_index and i.name == "bm25"]
    checks["index"] = "ok" if infos and infos[0].available else "the default index is not available"
    ready = all(v == "ok" for v in checks.values())
    body = ReadyOut(ready=ready, checks=checks).model_dump()
    body["checks"]["seconds"] = f"{time.monotonic() - start:.3f}"
    return JSONResponse(body, status_code=200 if ready else 503, headers={} if ready else {"Retry-After": "2"})


async def _rate_store(http: Request) -> str:
    url = http.app.state.settings.rate_limit_storage
    if url.startswith("memory://"):
        return "ok"
    limiter = http.app.state.auth.limiter()
    try:
        with anyio.fail_after(CHECK_S):
            healthy = await anyio.to_thread.run_sync(limiter.storage.check, abandon_on_cancel=True)
    except TimeoutError:
        return f"the rate-limit store did not answer within {CHECK_S:g} s"
    return "ok" if healthy else "the rate-limit store is unreachable"
