"""The public arena cannot be abused: the pool draws only generators that cost nothing unless it
lists a paid one; battles per client per minute and backend calls per day for the whole arena are capped; the
client address is the TCP peer unless the peer is a trusted proxy. Over real uvicorn servers: the API with the
arena mounted (driven through Gradio's HTTP API, as a browser's page drives it) and a counting fake paid LLM."""

from __future__ import annotations

import asyncio
import random
from contextlib import contextmanager

import httpx
from fakes import flaky_openai_app
from servers import serve_app
from sqlalchemy import text

from api.main import create_app
from ragnarok.arena.pool import free_generators, identify
from ragnarok.stages.generate.base import GeneratorConfig
from webui.arena import Arena, arena_principal
from webui.client import RagClient

TOPIC = "compress a file with gzip"
FREE, FREE2, PAID = "bm25@20 | extractive", "bm25+rocchio@20 | extractive", "bm25@20 | paid-llm"


@contextmanager
def paid_llm():
    """A counting fake OpenAI-compatible server; yields (its /v1 URL, {model: calls})."""
    app = flaky_openai_app()
    with serve_app(app) as base:
        yield f"{base}/v1", app.state.calls


def _generators(url: str) -> list[GeneratorConfig]:
    """``paid-llm`` (an OpenAI-compatible server: paid by default) and ``free-llm`` (the same, ``paid:
    false``)."""
    common = {
        "backend": "openai",
        "base_url": url,
        "model": "ok",
        "api_key_env": None,
        "max_retries": 0,
        "timeout_s": 10,
    }
    return [GeneratorConfig(name="paid-llm", **common), GeneratorConfig(name="free-llm", paid=False, **common)]


def _settings(demo_settings, tmp_path, **update):
    return demo_settings.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'arena.db'}", **update})


def _battles_stored(arena: Arena) -> int:
    with arena.store.engine.connect() as conn:
        return conn.execute(text("SELECT COUNT(*) FROM battles")).scalar()


def _gradio(base: str, forwarded_for: str | None = None):
    """A Gradio API client of the mounted arena, sending ``X-Forwarded-For`` when given."""
    from gradio_client import Client

    return Client(
        f"{base}/arena/",
        headers={"X-Forwarded-For": forwarded_for} if forwarded_for else {},
        verbose=False,
        httpx_kwargs={"timeout": 120},
    )  # the first request builds the UI (seconds)


def _status(outputs) -> str:
    """The status line of a battle's outputs over Gradio's API (pane A, pane B, the JSON, the status)."""
    return outputs[3]


def _spy_rate_keys(arena: Arena) -> list[str | None]:
    """Record the rate key each battle is counted under."""
    seen: list[str | None] = []
    admit = arena._admit

    async def spy(rate_key):
        seen.append(rate_key)
        return await admit(rate_key)

    arena._admit = spy  # type: ignore[method-assign]
    return seen


# ---- the pool ----


def test_rows_that_do_not_say_paid_count_as_paid_unless_their_backend_is_free():
    rows = [
        {"name": "extractive", "backend": "extractive", "available": True},
        {"name": "smollm2", "backend": "llama-cpp", "available": True},
        {"name": "vllm", "backend": "openai", "available": True},
        {"name": "own", "backend": "openai", "available": True, "paid": False},
        {"name": "gpt-4o", "backend": "openai", "available": True, "paid": True},
        {"name": "down", "backend": "extractive", "available": False, "paid": False},
    ]
    assert free_generators(rows) == ["extractive", "smollm2", "own"]


def test_a_paid_generator_is_drawn_only_when_the_pool_lists_it(demo_settings, tmp_path):
    with paid_llm() as (url, calls):
        settings = _settings(demo_settings, tmp_path, generators=_generators(url), arena_pool=[])
        with serve_app(create_app(settings, arena=False)) as base:
            described = {g["name"]: g for g in httpx.get(f"{base}/v1/generators", timeout=30).json()}
            assert described["paid-llm"]["available"] and described["paid-llm"]["paid"] is True
            assert described["free-llm"]["available"] and described["free-llm"]["paid"] is False
            assert described["extractive"]["paid"] is False and described["gpt-4o"]["paid"] is True

            arena = Arena(settings, RagClient(base, timeout_s=30), rng=random.Random(1))
            pool = asyncio.run(arena.pool())
            drawn = {p.generator for p in pool}
            assert {"extractive", "free-llm"} <= drawn and "paid-llm" not in drawn
            assert {p.generator for p in (asyncio.run(arena.pick()))} <= drawn
            _, _, offered = asyncio.run(arena.side_choices())  # the side-by-side dropdowns
            assert "paid-llm" not in offered and "free-llm" in offered
            # a side-by-side request naming it anyway (Gradio's API, a crafted page) is refused: nothing runs
            refused = asyncio.run(arena.compare(identify(FREE), identify(PAID), TOPIC, "", "s"))
            assert refused.battle_id is None
            assert "LLM &#x27;paid-llm&#x27; is not in the arena" in refused.status
            assert sum(calls.values()) == 0 and _battles_stored(arena) == 0

            listed = settings.model_copy(update={"arena_pool": [FREE, PAID]})
            arena = Arena(listed, RagClient(base, timeout_s=30), rng=random.Random(1))
            assert {p.generator for p in asyncio.run(arena.pool())} == {"extractive", "paid-llm"}
            assert asyncio.run(arena.side_choices())[2] == ["extractive", "paid-llm"]
            view = asyncio.run(arena.compare(identify(FREE), identify(PAID), TOPIC, "", "s"))
            assert view.votable and calls["ok"] == 1
            principal = arena_principal(listed, asyncio.run(arena.pool()))
            assert principal.generators == {"extractive", "paid-llm"}
            assert principal.budget_calls == listed.arena_calls_per_day and principal.period_s == 86400.0


# ---- battles per client per minute, and whose address counts ----


def test_battles_per_client_per_minute_are_capped_and_spoofed_forwarding_is_ignored(demo_settings, tmp_path):
    """Default RAGNAROK_TRUSTED_PROXIES (none): every battle from this peer counts under its address, whatever
    X-Forwarded-For it sends; past the cap (blinded and side by side alike) nothing runs, nothing is stored."""
    with paid_llm() as (url, calls):
        settings = _settings(
            demo_settings, tmp_path, generators=_generators(url), arena_pool=[FREE, PAID], arena_battles_per_minute=2
        )
        app = create_app(settings)
        with serve_app(app) as base:
            arena: Arena = app.state.arena
            keys = _spy_rate_keys(arena)
            statuses = [_status(_gradio(base, f"198.51.100.{i}").predict(TOPIC, api_name="/battle")) for i in (1, 2, 3)]
            assert "Both answers are in" in statuses[0] and "Both answers are in" in statuses[1]
            assert "Too many battles from your address: at most 2 a minute" in statuses[2]
            wait = int(statuses[2].split("Try again in ")[1].split(" s")[0])
            assert 1 <= wait <= 60
            assert keys == ["client:127.0.0.1"] * 3  # the spoofed header changed nothing
            assert calls["ok"] == 2 and _battles_stored(arena) == 2  # every battle pairs the paid side once
            page = _gradio(base)
            page.predict(*[None] * 6, api_name="/side_choices")  # the side-by-side tab opens: dropdowns fill
            side = page.predict(
                TOPIC, "bm25@20", "none", "extractive", "bm25@20", "none", "paid-llm", api_name="/compare"
            )
            assert "Too many battles" in _status(side)
            assert calls["ok"] == 2 and _battles_stored(arena) == 2


def test_forwarded_for_counts_only_from_a_trusted_proxy(demo_settings, tmp_path):
    """With the peer listed in RAGNAROK_TRUSTED_PROXIES, its X-Forwarded-For is the client address: each
    forwarded client has its own cap."""
    settings = _settings(
        demo_settings,
        tmp_path,
        arena_pool=[FREE, FREE2],
        arena_battles_per_minute=1,
        trusted_proxies="10.9.9.9, 127.0.0.1",
    )
    app = create_app(settings)
    with serve_app(app) as base:
        keys = _spy_rate_keys(app.state.arena)
        first, again, other = (
            _status(_gradio(base, ip).predict(TOPIC, api_name="/battle"))
            for ip in ("198.51.100.1", "198.51.100.1", "198.51.100.2")
        )
        assert "Both answers are in" in first and "Both answers are in" in other
        assert "Too many battles" in again
        assert keys == ["client:198.51.100.1", "client:198.51.100.1", "client:198.51.100.2"]


# ---- backend calls per day for the whole arena ----


def test_the_arena_makes_no_backend_call_past_its_daily_budget(demo_settings, tmp_path):
    with paid_llm() as (url, calls):
        settings = _settings(
            demo_settings,
            tmp_path,
            generators=_generators(url),
            arena_pool=[FREE, PAID],
            arena_calls_per_day=3,
            arena_battles_per_minute=100,
        )
        app = create_app(settings)
        with serve_app(app) as base:
            arena: Arena = app.state.arena
            for i in (1, 2):  # through the page's API: each battle's worst case is one paid call
                assert "Both answers are in" in _status(
                    _gradio(base, f"198.51.100.{i}").predict(TOPIC, api_name="/battle")
                )
            principal = arena_principal(settings, asyncio.run(arena.pool()))
            assert calls["ok"] == 2 and arena.auth_store.left(principal) == 1

            async def race() -> list:  # one call left, three battles at once: the /rag reservations decide
                return await asyncio.gather(
                    *(arena.battle(TOPIC, "", f"s{i}", rate_key=f"client:10.0.0.{i}") for i in range(3))
                )

            raced = asyncio.run(race())
            assert calls["ok"] == 3  # not one call past the budget
            assert sum(v.votable for v in raced) == 1
            assert all(
                "spent its backend calls" in v.status or "budget" in (v.pane_a + v.pane_b)
                for v in raced
                if not v.votable
            )

            stored = _battles_stored(arena)
            late = _status(_gradio(base, "198.51.100.9").predict(TOPIC, api_name="/battle"))
            assert "The arena has spent its backend calls for today: this battle may need 1, 0 of 3" in late
            assert calls["ok"] == 3 and _battles_stored(arena) == stored  # nothing ran, nothing stored
            # a battle that calls no paid backend still runs
            free = asyncio.run(arena.compare(identify(FREE), identify(FREE2), TOPIC, "", "s"))
            assert free.votable and calls["ok"] == 3


# ---- the standalone UI's key ----


def test_the_standalone_arena_sends_its_key_to_a_gateway_with_keys(demo_settings, tmp_path, monkeypatch):
    from ragnarok.auth.store import AuthStore
    from webui.app import standalone_app

    settings = _settings(demo_settings, tmp_path, auth="keys", arena_pool=[FREE, FREE2])
    _, secret = AuthStore.for_settings(settings).create("arena", ["retrieve", "generate"])
    with serve_app(create_app(settings, arena=False)) as base:
        monkeypatch.delenv(settings.arena_api_key_env, raising=False)
        keyless = standalone_app(settings, base).state.arena
        refused = asyncio.run(keyless.compare(identify(FREE), identify(FREE2), TOPIC, "", "s"))
        assert not refused.votable and "HTTP 401" in refused.pane_a

        monkeypatch.setenv(settings.arena_api_key_env, secret)
        keyed = standalone_app(settings, base).state.arena
        assert asyncio.run(keyed.compare(identify(FREE), identify(FREE2), TOPIC, "", "s")).votable
