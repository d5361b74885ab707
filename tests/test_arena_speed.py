"""The arena keeps battles fast and shows progress: latency-aware pairing (pure), panes that fill as each
pipeline finishes (over the real API, with a scripted slow LLM server), and a pool that follows what the
services report (a dense index that finishes building joins it, with its fusion)."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter

import httpx
import pytest
from fastapi import FastAPI
from scripted_llm import scripted_llm_app
from servers import serve_app

from api.main import create_app
from ragnarok.arena.pool import LatencyBook, identify, make_pool, pair_key, pick_pair, speed_weights
from ragnarok.stages.generate.base import GeneratorConfig
from webui import arena as arena_module
from webui.arena import Arena
from webui.client import RagClient

TOPIC = "compress a file with gzip"
FAST, FAST2, SLOW = "bm25@20 | extractive", "bm25+rocchio@20 | extractive", "bm25@20 | slow-llm"


# ---- pure: the latency book and speed weights ----


def test_latency_book_keeps_a_recent_window():
    book = LatencyBook(window=3)
    for seconds in (100, 1, 2, 3):
        book.record("p", seconds)
    assert book.medians() == {"p": 2}  # the 100 s run fell out of the window
    assert LatencyBook().medians() == {}


def test_slow_pipelines_are_drawn_less_or_left_out():
    pool = make_pool([FAST, FAST2, "bm25+rm3@20 | extractive"])
    fast, fast2, slow = (p.spec for p in pool)
    budget = 10.0
    # unmeasured or within budget: 1; above it: (budget / median)^2
    assert speed_weights(pool, {fast: 2.0}, budget) == {fast: 1.0, fast2: 1.0, slow: 1.0}
    assert speed_weights(pool, {slow: 20.0}, budget)[slow] == pytest.approx(0.25)
    # far above (beyond 4x the budget): left out, since two others remain
    assert speed_weights(pool, {fast: 2.0, slow: 98.0}, budget)[slow] == 0.0
    rng = random.Random(3)
    speed = speed_weights(pool, {fast: 2.0, fast2: 3.0, slow: 98.0}, budget)
    draws = Counter(pair_key(a.spec, b.spec) for a, b in (pick_pair(pool, {}, rng, speed) for _ in range(500)))
    assert set(draws) == {pair_key(fast, fast2)}
    # 20 s (weight 1/4): its pairs come up about a quarter as often as the fast pair
    speed = speed_weights(pool, {slow: 20.0}, budget)
    draws = Counter(pair_key(a.spec, b.spec) for a, b in (pick_pair(pool, {}, rng, speed) for _ in range(4000)))
    assert 0.15 < draws[pair_key(fast, slow)] / draws[pair_key(fast, fast2)] < 0.35
    # never fewer than two pipelines: a two-pipeline pool keeps its slow one (drawn, just less)
    two = make_pool([FAST, FAST2])
    assert speed_weights(two, {two[1].spec: 500.0}, budget)[two[1].spec] > 0
    assert {p.spec for p in pick_pair(two, {}, rng, {FAST: 0.0, FAST2: 0.0})} == {FAST, FAST2}


def test_two_sides_on_a_one_at_a_time_generator_take_their_sum():
    """Two SmolLM2 pipelines in one battle run one after the other (the embedded model has one
    slot): drawn only when no other pair can be, a pair whose summed medians pass the budget weighs less,
    and beyond 4x nothing."""
    from ragnarok.arena.pool import serial_factor

    pool = make_pool(["bm25@20 | smollm2", "bm25+rocchio@20 | smollm2", "bm25@20 | extractive"])
    s1, s2, ext = pool
    budget = 30.0
    assert serial_factor(s1, s2, {s1.spec: 12.0, s2.spec: 12.0}, budget, {"smollm2"}) == 1.0
    assert serial_factor(s1, s2, {s1.spec: 20.0, s2.spec: 20.0}, budget, {"smollm2"}) == pytest.approx(0.5625)
    assert serial_factor(s1, s2, {s1.spec: 70.0, s2.spec: 70.0}, budget, {"smollm2"}) == 0.0
    assert serial_factor(s1, ext, {s1.spec: 70.0, ext.spec: 1.0}, budget, {"smollm2"}) == 1.0  # not shared
    assert serial_factor(s1, s2, {s1.spec: 70.0, s2.spec: 70.0}, budget, set()) == 1.0  # not one-at-a-time
    medians = {s1.spec: 25.0, s2.spec: 25.0, ext.spec: 1.0}  # each within the budget, the pair's sum not
    speed = speed_weights(pool, medians, budget)
    rng = random.Random(5)
    draws = Counter(
        pair_key(a.spec, b.spec)
        for a, b in (pick_pair(pool, {}, rng, speed, medians, budget, {"smollm2"}) for _ in range(3000))
    )
    assert draws[pair_key(s1.spec, s2.spec)] == 0  # never drawn while another pair can be
    only = make_pool(["bm25@20 | smollm2", "bm25+rocchio@20 | smollm2"])
    assert {p.spec for p in pick_pair(only, {}, rng, None, medians, budget, {"smollm2"})} == {s1.spec, s2.spec}


def test_the_warm_up_measures_each_generator_before_the_first_draw(demo_settings, tmp_path):
    """One answer per generator, its time recorded for every pool pipeline that uses it."""
    settings = demo_settings.model_copy(
        update={
            "arena_pool": [FAST, FAST2, "bm25+rm3@20 | extractive"],
            "database_url": f"sqlite:///{tmp_path / 'votes.db'}",
        }
    )
    app = create_app(settings, arena=False)
    arena = Arena(settings, RagClient("http://ragnarok.local", transport=httpx.ASGITransport(app=app)))
    seen = asyncio.run(arena.warm_up())
    assert set(seen) == {"extractive"} and seen["extractive"] > 0
    assert set(arena.latency.medians()) == {FAST, FAST2, "bm25+rm3@20 | extractive"}


# ---- over the real API: progress as each pipeline finishes ----


@pytest.fixture(scope="module")
def llm_url():
    with serve_app(scripted_llm_app()) as base:
        yield f"{base}/v1"


def _settings(demo_settings, tmp_path, llm_url, seconds: float, **update):
    slow = GeneratorConfig(
        name="slow-llm",
        backend="openai",
        base_url=llm_url,
        model=f"sleep:{seconds}",
        api_key_env=None,
        max_retries=0,
        timeout_s=30,
    )
    return demo_settings.model_copy(
        update={
            "generators": [slow],
            "arena_pool": [FAST, SLOW],
            "database_url": f"sqlite:///{tmp_path / 'v.db'}",
            **update,
        }
    )


def _arena(settings) -> Arena:
    client = RagClient(
        "http://ragnarok.test", transport=httpx.ASGITransport(app=create_app(settings, arena=False)), timeout_s=60
    )
    return Arena(settings, client, rng=random.Random(5))


async def _views(stream):
    out = []
    async for view in stream:
        out.append(view)
    return out


def _seconds(status: str) -> int:
    """The battle's seconds in a status line (the number is in a ``rg-secs`` span the page updates)."""
    return int(re.search(r"(\d+) s so far", re.sub(r"<[^>]+>", "", status)).group(1))


def test_a_pane_fills_as_soon_as_its_pipeline_is_done(demo_settings, tmp_path, llm_url):
    """The fast pane shows its answer while the slow one is still going; no view before the vote times a side
    (the status line counts the battle's seconds, the same for both); the vote reveals each side's time."""
    arena = _arena(_settings(demo_settings, tmp_path, llm_url, 8))
    views = asyncio.run(_views(arena.compare_stream(identify(FAST), identify(SLOW), TOPIC, "", "s", tick_s=0.25)))
    progress, final = views[:-1], views[-1]
    assert all(not v.done and not v.votable and v.battle_id is None for v in progress)
    # the fast pane shows its answer while the slow one has not answered yet (waiting, or its first words
    # streaming in: on a loaded machine either may be what the view holds)
    early = next(i for i, v in enumerate(progress) if v.pane_a and "rg-answer" in v.pane_a)
    assert "rg-answer" not in (progress[early].pane_b or "")
    assert "Voting opens when both are in" in progress[early].status
    later = progress[early + 1 :]
    assert later and all(v.pane_a is None for v in later)  # the answered pane is left alone
    # no per-side timing before the final view: no seconds in a pane, one battle clock in the status line
    sent = [p for v in progress for p in (v.pane_a or "", v.pane_b or "")]
    assert not [p for p in sent if re.search(r"\d\s*s\b|first token|rg-elapsed|rg-timing", p)]
    counted = [_seconds(v.status) for v in progress]
    assert counted == sorted(counted) and counted[-1] >= 4  # it counted while the slow side ran
    assert final.done and final.votable and final.battle_id and "rg-answer" in final.pane_b
    medians = arena.latency.medians()
    assert medians[SLOW] >= 8 and medians[SLOW] > medians[FAST]


def test_no_timing_tells_the_sides_apart_before_the_vote(demo_settings, tmp_path, llm_url):
    """A blinded battle of an extractive side (0 s) and a slow one: its final view says when both are in and
    no more; the vote reveals both pipelines with their seconds."""
    arena = _arena(_settings(demo_settings, tmp_path, llm_url, 2))
    final = asyncio.run(arena.battle(TOPIC, "", "s"))
    assert final.votable and not final.revealed
    shown = final.pane_a + final.pane_b + final.status
    assert not re.search(r"\bA in \d|\bB in \d|first token|\d\.\d s|rg-timing", shown), final.status
    reveal = arena.vote(final.battle_id, "tie", "s", "client:test").status
    times = [float(t) for t in re.findall(r"(\d+\.\d) s</span>", reveal)]
    assert len(times) == 2 and max(times) >= 2, reveal  # A's and B's seconds, the slow one's included


def test_blinded_battles_leave_a_measured_slow_pipeline_out(demo_settings, tmp_path, llm_url):
    settings = _settings(demo_settings, tmp_path, llm_url, 1.5, arena_time_budget_s=0.3, arena_pool=[FAST, FAST2, SLOW])
    arena = _arena(settings)
    for _ in range(5):  # fast ones measured before (their median holds on a busy machine too)
        arena.latency.record(FAST, 0.1)
        arena.latency.record(FAST2, 0.1)
    first = asyncio.run(arena.compare(identify(FAST), identify(SLOW), TOPIC, "", "s"))
    assert first.votable and arena.latency.medians()[SLOW] > 4 * 0.3
    pairs = [asyncio.run(arena.pick()) for _ in range(40)]
    assert all(SLOW not in (a.spec, b.spec) for a, b in pairs)


# ---- the default pool follows the services ----


def _services(state: dict) -> FastAPI:
    """GET /v1/retrievers and /v1/generators as the R and AG services answer them, the dense index
    building (with the status field ragnarok serve reports while it builds) until ``state["dense"]``."""
    app = FastAPI()

    @app.get("/v1/retrievers")
    def retrievers() -> list[dict]:
        dense = {
            "name": "dense:minilm",
            "index": "demo",
            "kind": "dense",
            "available": state["dense"],
            "reason": "" if state["dense"] else "building, 40 % done",
        }
        if not state["dense"]:
            dense["status"] = "building"
        return [
            {"name": n, "index": "demo", "kind": "lucene", "available": True, "reason": ""}
            for n in ("bm25", "bm25+rocchio")
        ] + [dense]

    @app.get("/v1/generators")
    def generators() -> list[dict]:
        return [
            {"name": "extractive", "backend": "extractive", "available": True, "paid": False},
            {"name": "gpt-4o", "backend": "openai", "available": False, "paid": True},
        ]

    return app


def test_the_default_pool_gains_dense_and_fused_once_the_index_is_built(tmp_path, monkeypatch):
    from ragnarok.core.settings import Settings

    state = {"dense": False}
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'v.db'}")
    arena = Arena(settings, RagClient("http://svc.test", transport=httpx.ASGITransport(app=_services(state))))
    before = {p.spec for p in asyncio.run(arena.pool())}
    assert before == {"bm25@20 | extractive", "bm25+rocchio@20 | extractive"}
    state["dense"] = True
    assert {p.spec for p in asyncio.run(arena.pool())} == before  # reused for POOL_TTL_S
    monkeypatch.setattr(arena_module, "POOL_TTL_S", 0.0)
    after = {p.spec for p in asyncio.run(arena.pool())}
    assert after == before | {"dense:minilm@20 | extractive", "rrf(bm25+rocchio, dense:minilm)@20 | extractive"}
