"""Background work gives way to requests: the server's request middleware marks every request that is
work (a POST, Anserini's GET search), and the background dense build waits between its encoder batches while
they come, for a bounded time per batch."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from api.main import create_app
from ragnarok.runtime.activity import REQUESTS, Activity, is_work
from ragnarok.stages.retrieve.building import QUIET_S, DenseBuild


def test_what_counts_as_work():
    assert is_work("POST", "/v1/retrieve") and is_work("POST", "/rag") and is_work("POST", "/arena/gradio_api/x")
    assert is_work("GET", "/v1/demo/search")
    assert not any(is_work("GET", p) for p in ("/healthz", "/v1/retrievers", "/metrics", "/arena/", "/docs"))


def test_the_middleware_marks_work_and_not_polls(demo_settings):
    with TestClient(create_app(demo_settings, arena=False)) as client:
        assert client.post("/v1/retrieve", json={"query": "gzip", "k": 3}).status_code == 200
        time.sleep(0.3)
        assert client.get("/v1/retrievers").status_code == 200 and client.get("/healthz").status_code == 200
        assert REQUESTS.quiet_s() >= 0.3  # a progress poll or a health check is not work
        assert client.get("/v1/demo/search", params={"query": "gzip", "hits": 2}).status_code == 200
        assert REQUESTS.quiet_s() < 0.3


def test_a_background_build_waits_while_requests_come_but_not_forever(tmp_path):
    activity = Activity()
    build = DenseBuild(tmp_path, activity=activity, give_way_s=0.6)
    build._give_way()  # nothing ever came: no wait
    assert build.gave_way_s < QUIET_S
    activity.begin()  # a request in flight: the build waits, for its bound at most
    build._give_way()
    assert build.gave_way_s >= 0.6
    activity.end()  # it just ended: the build waits until QUIET_S have passed without one
    before = build.gave_way_s
    build._give_way()
    assert activity.quiet_s() >= QUIET_S and build.gave_way_s - before >= QUIET_S - 0.15


def test_the_arena_ui_is_built_once_the_server_is_quiet():
    """`ragnarok serve` builds the arena's UI (Gradio's import and the build: seconds of CPU) only once no work
    request has come for a while: a burst of searches right after start-up does not share the CPU with it."""
    import asyncio

    from fastapi import FastAPI

    from webui.lazy import LazyUI

    async def run() -> None:
        ui = LazyUI(FastAPI)
        REQUESTS.begin()  # a search in flight
        try:
            building = asyncio.ensure_future(ui.warm_when_quiet(quiet_s=0.2, poll_s=0.05))
            await asyncio.sleep(1.0)
            assert not ui.built and not building.done()
        finally:
            REQUESTS.end()
        await asyncio.wait_for(building, 120)  # quiet now: built
        assert ui.built
        await ui.aclose()

    asyncio.run(run())


def test_an_arena_battle_in_process_is_work(demo_settings):
    """The arena's answers run in Gradio's queue, in a context a page request left (so its in-process calls
    look internal to the middleware): the client itself marks them as work, from the first event to the last."""
    import asyncio

    from ragnarok.arena.pool import identify
    from ragnarok.runtime.logs import route_var

    app = create_app(demo_settings)
    client = app.state.arena.client
    seen: list[float] = []

    async def battle_side() -> None:
        route_var.set("/arena/")  # as Gradio's worker inherits it
        async for _ in client.stream(identify("bm25@5 | extractive"), "how do I compress a file with gzip"):
            seen.append(REQUESTS.quiet_s())

    with TestClient(app):
        asyncio.run(battle_side())
        time.sleep(0.05)
        assert seen and max(seen) == 0.0  # in flight all along
        assert REQUESTS.quiet_s() > 0  # and over once the stream ended
