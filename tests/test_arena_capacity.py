"""Capacity-aware pairing: two sides never share a one-slot generator at once, failed pipelines are paused.

* :func:`pick_pair` never pairs two pipelines of the embedded model (one slot) while another pair exists; when
  none does, :class:`webui.streaming.Race` runs the two sides one after the other;
* :class:`PauseBook`: a failed pipeline is not drawn during its pause (5 min, doubling to 15 min, reset by an
  answer) and is drawn again after it;
* the wiring: the arena's ``_record`` (each side's outcome) pauses a failed side, and its draws skip it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

from ragnarok.arena.health import FIRST_PAUSE_S, MAX_PAUSE_S, PauseBook, backend_failed
from ragnarok.arena.pool import PipelineId, make_pool, pair_key, pick_pair, shares_slot
from ragnarok.stages.generate.streaming import StreamEvent
from webui.arena import Arena
from webui.client import PaneResult, RagClient
from webui.streaming import Race

S1, S2 = "bm25@20 | smollm2", "bm25+rocchio@20 | smollm2"
E1, E2 = "bm25@20 | extractive", "bm25+rocchio@20 | extractive"
SERIAL = {"smollm2"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_two_pipelines_on_one_slot_are_never_drawn_together():
    pool = make_pool([S1, S2, E1, E2])
    rng = random.Random(7)
    draws = [pick_pair(pool, {}, rng, serial=SERIAL) for _ in range(3000)]
    assert not any(a.generator == b.generator == "smollm2" for a, b in draws)
    assert len({pair_key(a.spec, b.spec) for a, b in draws}) == 5  # every other pair is drawn
    assert shares_slot(pool[0], pool[1], SERIAL) and not shares_slot(pool[0], pool[2], SERIAL)
    # with no other pair, the one-slot pair is drawn (and run one side after the other)
    only = make_pool([S1, S2])
    assert {p.spec for p in pick_pair(only, {}, rng, serial=SERIAL)} == {S1, S2}


def test_a_failed_pipeline_is_paused_with_a_doubling_backoff_reset_by_an_answer():
    clock = Clock()
    book = PauseBook(clock=clock)
    pool = make_pool([S1, E1, E2])
    rng = random.Random(3)
    book.record(S1, failed=True)
    assert book.paused() == {S1: FIRST_PAUSE_S} and FIRST_PAUSE_S >= 300
    for step in range(0, int(FIRST_PAUSE_S), 10):  # never drawn while paused
        clock.now = 1000.0 + step
        assert all(S1 not in (a.spec, b.spec) for a, b in (pick_pair(pool, {}, rng, paused=book.paused()),))
    clock.now = 1000.0 + FIRST_PAUSE_S
    assert book.paused() == {}
    draws = [pick_pair(pool, {}, rng, paused=book.paused()) for _ in range(200)]
    assert any(S1 in (a.spec, b.spec) for a, b in draws)  # drawn again after it
    # a failure again doubles the pause, up to the most; an answer ends it and resets the backoff
    book.record(S1, failed=True)
    assert book.paused()[S1] == 2 * FIRST_PAUSE_S
    book.record(S1, failed=True)
    book.record(S1, failed=True)
    assert book.paused()[S1] == MAX_PAUSE_S
    book.record(S1, failed=False)
    assert book.paused() == {}
    book.record(S1, failed=True)
    assert book.paused()[S1] == FIRST_PAUSE_S


def test_with_fewer_than_two_pipelines_left_every_one_is_drawn():
    pool = make_pool([S1, E1, E2])
    rng = random.Random(1)
    drawn = {p.spec for _ in range(200) for p in pick_pair(pool, {}, rng, paused={S1, E1})}
    assert drawn == {S1, E1, E2}


def test_backend_failures_are_told_from_refusals():
    assert backend_failed("HTTP 504: generate: busy: no slot within 60 s")
    assert backend_failed("timed out after 90 s") and backend_failed("cannot reach http://x: ConnectError")
    assert not backend_failed("HTTP 429: the arena's calls for today are spent")


def test_the_arena_pauses_a_failed_side_and_its_draws_skip_it(demo_settings, tmp_path):
    settings = demo_settings.model_copy(
        update={"arena_pool": [S1, E1, E2], "database_url": f"sqlite:///{tmp_path / 'votes.db'}"}
    )
    arena = Arena(settings, RagClient("http://ragnarok.local"), rng=random.Random(2))
    clock = Clock()
    arena.pauses = PauseBook(clock=clock)
    s1 = make_pool([S1, E1])[0]
    pool = make_pool([S1, E1, E2])
    arena._record(s1, PaneResult(error="HTTP 504: generate: busy: no slot within 60 s"), 60.0)
    assert set(arena.pauses.paused_specs(pool)) == {S1}
    arena._record(s1, PaneResult(error="HTTP 429: too many battles"), 0.1)  # a refusal: still paused
    assert set(arena.pauses.paused_specs(pool)) == {S1}
    for _ in range(50):
        a, b = asyncio.run(arena.pick())
        assert S1 not in (a.spec, b.spec)
    arena._record(s1, PaneResult(answer={"answer": "ok"}), 2.0)
    assert arena.pauses.paused() == {}


def test_a_failed_generator_pauses_all_its_pipelines_and_a_failed_retrieval_one():
    pool = make_pool([S1, S2, E1, E2])
    book = PauseBook(clock=Clock())
    book.record_side(E1, "extractive", "HTTP 502: retrieve: cannot reach the index")
    assert set(book.paused_specs(pool)) == {E1}  # the retrieval failed: the generator's other pipeline is drawn
    error = "HTTP 504: smollm2: generator 'smollm2' failed: the answer took over 60 s (timeout_s)"
    book.record_side(S1, "smollm2", error)
    assert set(book.paused_specs(pool)) == {E1, S1, S2}  # the generator failed: all its pipelines wait
    book.record_side(S2, "smollm2", None)  # an answer ends the generator's pause; S1's own pause goes on
    assert set(book.paused_specs(pool)) == {E1, S1}


class OneSlot:
    """A client whose generator has one slot: a second answer while one runs fails as the backend's 504."""

    def __init__(self) -> None:
        self.running = 0

    async def stream(self, pipeline: PipelineId, topic: str, topic_id: str = "") -> AsyncIterator[StreamEvent]:
        if self.running:
            yield StreamEvent("error", "HTTP 504: generate: busy: no slot within 60 s")
            return
        self.running += 1
        try:
            await asyncio.sleep(0.5)
            yield StreamEvent("done", PaneResult(answer={"answer": [], "references": []}))
        finally:
            self.running -= 1


def test_a_race_on_one_slot_runs_its_sides_one_after_the_other():
    a, b = make_pool([S1, S2])

    async def race(one_at_a_time: bool) -> tuple[bool, bool]:
        done: list[float] = []
        run = Race(OneSlot(), {"a": a, "b": b}, "t", "", lambda p, r, s: done.append(s), one_at_a_time)  # type: ignore[arg-type]
        async for _ in run.views(0.01):
            pass
        assert len(done) == 2 and all(s < 0.95 for s in done)  # each side timed from its own start (not 1.0)
        return run.outcome("a")[0].ok, run.outcome("b")[0].ok

    assert asyncio.run(race(True)) == (True, True)
    assert asyncio.run(race(False)) == (True, False)  # at once, the second finds the slot taken


async def _pool_away() -> list:
    raise ConnectionError("the retrieval service is away")


def test_moderators_see_which_pipelines_are_paused(demo_settings, tmp_path):
    """GET /v1/arena/pool: each pipeline drawn or paused (seconds left, failures in a row); the admin scope with
    keys; a 404 naming the reason where no arena is served."""
    from fastapi.testclient import TestClient

    from api.main import create_app
    from ragnarok.auth.store import AuthStore

    settings = demo_settings.model_copy(
        update={"arena_pool": [S1, E1, E2], "database_url": f"sqlite:///{tmp_path / 'votes.db'}"}
    )
    app = create_app(settings)
    with TestClient(app) as client:
        body = client.get("/v1/arena/pool").json()
        assert body["paused"] == 0 and [p["state"] for p in body["pipelines"]] == ["drawn"] * 3
        s1 = make_pool([S1, E1])[0]
        app.state.arena._record(s1, PaneResult(error="HTTP 504: generate: busy: no slot within 60 s"), 60.0)
        body = client.get("/v1/arena/pool").json()
        row = next(p for p in body["pipelines"] if p["spec"] == S1)
        assert body["paused"] == 1 and row["state"] == "paused" and row["failures_in_a_row"] == 1
        assert FIRST_PAUSE_S - 30 < row["paused_s_left"] <= FIRST_PAUSE_S and row["one_slot_generator"]
        assert row["median_s"] == 60.0 and row["recent_misses"] == [1, 1]
        others = [p for p in body["pipelines"] if p["spec"] != S1]
        assert {p["state"] for p in others} == {"drawn"} and not any(p["one_slot_generator"] for p in others)
        app.state.arena.pool = _pool_away
        away = client.get("/v1/arena/pool")
        assert away.status_code == 503 and away.headers["Retry-After"] == "5"
        assert away.json() == {"detail": "the arena cannot build its pipeline pool: the retrieval service is away"}
    with TestClient(create_app(settings, arena=False)) as client:
        missing = client.get("/v1/arena/pool")
        assert missing.status_code == 404 and missing.json() == {"detail": "this instance serves no arena"}
    keyed = settings.model_copy(update={"auth": "keys", "database_url": f"sqlite:///{tmp_path / 'keys.db'}"})
    store = AuthStore.for_settings(keyed)
    _, reader = store.create("reader", ["retrieve", "generate"])
    _, admin = store.create("moderator", ["admin"])
    with TestClient(create_app(keyed)) as client:
        refused = client.get("/v1/arena/pool", headers={"Authorization": f"Bearer {reader}"})
        assert refused.status_code == 403 and "'admin' scope" in refused.json()["detail"]
        seen = client.get("/v1/arena/pool", headers={"Authorization": f"Bearer {admin}"})
        assert seen.status_code == 200 and len(seen.json()["pipelines"]) == 3
