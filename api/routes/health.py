from __future__ import annotations

from fastapi import APIRouter

from api.body import StrictJSONRoute

router = APIRouter(tags=["health"], route_class=StrictJSONRoute)


@router.get("/healthz")
async def healthz() -> dict[str, str]:  # async: liveness never waits for a worker thread
    return {"status": "ok"}
