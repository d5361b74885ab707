"""The arena's day cap is reserved, not read: a battle reserves both sides' worst case before it runs anything,
both sides spend that reservation, and what the battle did not spend is given back however it ends.

In process (the arena over the API app's own ASGI transport, the demo index, real Lucene) with a counting fake
OpenAI-compatible LLM: 20 battles racing for a cap that fits only some of them make no backend call past it,
every battle admitted gets both its answers and a refused one calls nothing; a battle that fails, and one
cancelled midway, leave the cap less what they spent.
"""

from __future__ import annotations

import asyncio
import random
import time

import httpx
from fakes import flaky_openai_app
from servers import serve_app
from sqlalchemy import text

from api.main import create_app
from ragnarok.arena.pool import identify, make_pool
from ragnarok.stages.generate.base import GeneratorConfig
from webui.arena import Arena, arena_principal
from webui.client import RagClient

TOPIC = "compress a file with gzip"
PAID, PAID2 = "bm25@20 | paid-llm", "bm25+rocchio@20 | paid-llm"


def _llm(name: str, url: str, model: str, retries: int = 0) -> GeneratorConfig:
    """An OpenAI-compatible generator of the fake (paid by default); its worst case is ``1 + retries`` calls."""
    return GeneratorConfig(
        name=name, backend="openai", base_url=url, model=model, api_key_env=None, max_retries=retries, timeout_s=10
    )


def _arena(demo_settings, tmp_path, generators, pool, cap) -> Arena:
    settings = demo_settings.model_copy(
        update={
            "generators": generators,
            "arena_pool": pool,
            "arena_calls_per_day": cap,
            "arena_battles_per_minute": 1000,
            "database_url": f"sqlite:///{tmp_path / 'arena.db'}",
        }
    )
    app = create_app(settings, arena=False)
    client = RagClient("http://ragnarok.test", transport=httpx.ASGITransport(app=app), timeout_s=60)
    return Arena(settings, client, rng=random.Random(5))


def _left(arena: Arena) -> int:
    """The arena's calls left today (its pool is explicit: no discovery)."""
    return arena.auth_store.left(arena_principal(arena.settings, make_pool(arena.settings.arena_pool)))


def _held(arena: Arena) -> int:
    """The arena's reservations still in the database (a battle in flight holds one)."""
    with arena.auth_store.engine.connect() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM key_reservations WHERE owner = 'arena'")).scalar()


def _stored(arena: Arena) -> list[tuple]:
    with arena.store.engine.connect() as conn:
        return conn.execute(text("SELECT answer_a, answer_b, error_a, error_b FROM battles")).all()


def test_racing_battles_reserve_the_day_cap_whole_battles_only(demo_settings, tmp_path):
    backend = flaky_openai_app()
    with serve_app(backend) as base:
        # each side of the one pair makes at most 1 call: a battle needs 2, and 9 calls fit 4 battles
        arena = _arena(demo_settings, tmp_path, [_llm("paid-llm", f"{base}/v1", "ok")], [PAID, PAID2], cap=9)
        asyncio.run(arena.client.run(identify(PAID), TOPIC))  # warm the retrievers: not as the arena, no spend
        before = backend.state.calls["ok"]

        async def race() -> list:
            return await asyncio.gather(*(arena.battle(TOPIC, "", f"s{i}") for i in range(20)))

        raced = asyncio.run(race())
        calls = backend.state.calls["ok"] - before
        admitted = [v for v in raced if v.votable]
        refused = [v for v in raced if not v.votable]
        assert calls <= 9 and len(admitted) == 4 and calls == 2 * len(admitted)  # both sides each, no more
        assert all("The arena has spent its backend calls for today" in v.status for v in refused)
        assert all("rg-answer" not in v.pane_a + v.pane_b for v in refused)  # refused before any side ran
        stored = _stored(arena)  # only admitted battles are stored, each with both answers
        assert len(stored) == 4 and all(a and b and not ea and not eb for a, b, ea, eb in stored)
        assert _left(arena) == 1 and _held(arena) == 0
        arena.auth_store.flush()
        rows = arena.auth_store.audit_rows("arena")
        assert len(rows) == 4 and {r["calls"] for r in rows} == {2} and {r["status"] for r in rows} == {200}


def test_a_battle_that_fails_or_is_cancelled_gives_back_what_it_did_not_spend(demo_settings, tmp_path):
    backend = flaky_openai_app()
    with serve_app(backend) as base:
        url = f"{base}/v1"
        generators = [
            _llm("ok-llm", url, "ok", 1),
            _llm("bad-llm", url, "echo-key", 1),
            _llm("hang-llm", url, "hang", 1),
        ]
        ok, bad, hang = "bm25@20 | ok-llm", "bm25@20 | bad-llm", "bm25@20 | hang-llm"
        arena = _arena(demo_settings, tmp_path, generators, [ok, bad, hang], cap=10)
        asyncio.run(arena.client.run(identify(ok), TOPIC))  # warm the retrievers: not as the arena, no spend

        # a side fails (a 401 is not retried): 4 calls reserved (2 attempts a side), 2 spent
        failed = asyncio.run(arena.compare(identify(ok), identify(bad), TOPIC, "", "s"))
        spent = backend.state.calls["ok"] - 1 + backend.state.calls["echo-key"]
        assert not failed.votable and "cannot be voted" in failed.status
        assert spent == 2 and _left(arena) == 10 - spent and _held(arena) == 0

        async def cancelled() -> int:  # one side answered, the other waits on its backend: the page goes away
            battle = asyncio.ensure_future(arena.compare(identify(ok), identify(hang), TOPIC, "", "s"))
            deadline = time.monotonic() + 60
            while backend.state.hanging["hang"] == 0 or backend.state.calls["ok"] < 3:
                assert time.monotonic() < deadline and not battle.done()
                await asyncio.sleep(0.05)
            assert _held(arena) == 1 and _left(arena) == 10 - spent - 4  # the battle's worst case is held
            battle.cancel()
            await asyncio.gather(battle, return_exceptions=True)
            return backend.state.calls["ok"] - 1 + backend.state.calls["echo-key"] + backend.state.calls["hang"]

        spent = asyncio.run(cancelled())
        assert spent == 4 and _held(arena) == 0 and _left(arena) == 10 - spent
        arena.auth_store.flush()
        statuses = sorted(r["status"] for r in arena.auth_store.audit_rows("arena"))
        assert statuses == [499, 502]
