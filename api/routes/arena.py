"""``GET /v1/arena/pool``: the moderators' view of the arena's pool (needs the ``admin`` scope with keys):
which pipelines battles draw now and which are paused after their backend failed, for how long."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi import Request as HttpRequest
from pydantic import BaseModel, Field

from api.body import StrictJSONRoute
from api.errors import BadInput, errors
from ragnarok.arena.health import pool_status

router = APIRouter(prefix="/v1", tags=["arena"], route_class=StrictJSONRoute)
#: The pool is listed from the services (in process): this long at most.
POOL_S = 10.0


class PoolPipeline(BaseModel):
    spec: str
    retriever: str
    reranker: str
    generator: str
    state: str = Field(description="`drawn` (battles may draw it) or `paused` (its backend failed lately).")
    paused_s_left: float | None = Field(description="Seconds until a paused pipeline is drawn again.")
    failures_in_a_row: int = Field(description="Its backend's failures since its last answer (the pause doubles).")
    median_s: float | None = Field(description="Median seconds of its recent answers in this instance.")
    recent_misses: list[int] | None = Field(description="Of its last answers: [missed the time budget, of how many].")
    one_slot_generator: bool = Field(description="Its generator answers one request at a time.")


class PoolOut(BaseModel):
    pipelines: list[PoolPipeline]
    paused: int = Field(description="How many pipelines are paused now.")


@router.get("/arena/pool", response_model=PoolOut, responses=errors(404, 503))
async def arena_pool(http: HttpRequest) -> dict[str, Any]:
    """The arena's pool as this instance draws it now: each pipeline drawn or paused (a pipeline whose backend
    failed or missed its deadline is paused for 5 min, doubling to 15 min, until it answers again), with its
    recent speed. 404 when this instance serves no arena."""
    arena = getattr(http.app.state, "arena", None)
    if arena is None:
        raise BadInput("this instance serves no arena", status_code=404)
    try:
        async with asyncio.timeout(POOL_S):
            pool = await arena.pool()
    except TimeoutError:
        raise BadInput(f"the arena's pool was not listed within {POOL_S:g} s", status_code=503) from None
    except Exception as exc:  # noqa: BLE001 - the services are down or the pool is misconfigured: say so
        raise BadInput(f"the arena cannot build its pipeline pool: {exc}", status_code=503) from None
    rows = pool_status(pool, arena.pauses, arena.latency, arena.serial_generators())
    return {"pipelines": rows, "paused": sum(r["state"] == "paused" for r in rows)}
