"""The public arena deployed as docs/deploying.md says: with keys on and the default pool its own calls
run as the arena; the start-up warm-up never holds a slot a visitor needs and calls no paid generator the pool
does not list; a pipeline whose recent answers miss the time budget is drawn less, and the visitor is told.

Over the real API (demo index, real Lucene), real uvicorn servers, Gradio's own API client, and local
OpenAI-compatible servers (tests/scripted_llm.py: a chosen latency; tests/fakes.py: a counting paid LLM).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

import httpx
import pytest
from scripted_llm import scripted_llm_app
from servers import serve_app
from test_arena_browser import browser_context  # noqa: F401 - the fixture (chromium, or skip / fail in CI)
from test_arena_public import _gradio, _status, paid_llm

from api.main import create_app
from ragnarok.arena.pool import identify, make_pool, miss_factor, pair_key, pick_pair, speed_weights
from ragnarok.stages.generate.base import GeneratorConfig
from webui.arena import Arena
from webui.client import RagClient

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

TOPIC = "compress a file with gzip"
FAST, FAST2 = "bm25@20 | extractive", "bm25+rocchio@20 | extractive"
#: The embedded model left out of the default pool (marked paid), so that battles here are extractive and
#: fast on a busy machine; the pool logic under test is the same.
NO_SMOLLM2 = GeneratorConfig(name="smollm2", backend="llama-cpp", model="SmolLM2-135M-Instruct", paid=True)


def keys_settings(demo_settings, tmp_path, **update):
    """Keys on, the default pool (nothing in ``arena_pool``): as a public deployment runs."""
    return demo_settings.model_copy(
        update={
            "auth": "keys",
            "arena_pool": [],
            "generators": [NO_SMOLLM2],
            "database_url": f"sqlite:///{tmp_path / 'arena.db'}",
            **update,
        }
    )


@pytest.fixture(scope="module")
def llm():
    """The scripted OpenAI-compatible server: (its app, its /v1 URL)."""
    app = scripted_llm_app()
    with serve_app(app) as base:
        yield app, f"{base}/v1"


def _one_slot(url: str, seconds: float, **config) -> GeneratorConfig:
    """A self-hosted LLM that answers one request at a time (as the embedded model: one slot), in
    ``seconds``."""
    return GeneratorConfig(
        name="one-slot",
        backend="openai",
        base_url=url,
        model=f"sleep:{seconds}",
        api_key_env=None,
        paid=False,
        max_concurrency=1,
        max_retries=0,
        **{"timeout_s": 60, **config},
    )


async def _until(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for a condition"
        await asyncio.sleep(0.05)


# ---- keys on, the default pool ----


def test_with_keys_the_default_pool_battles_through_gradios_api(demo_settings, tmp_path):
    """RAGNAROK_AUTH=keys and no RAGNAROK_ARENA_POOL: a visitor's battle (no key: the arena is open) builds
    the pool and runs both sides as the arena, over Gradio's API as a page drives it; the side-by-side tab gets
    the pool's choices; a caller without a key still gets 401 from the API itself."""
    settings = keys_settings(demo_settings, tmp_path)
    app = create_app(settings)
    with serve_app(app) as base:
        assert httpx.get(f"{base}/v1/retrievers", timeout=30).status_code == 401
        page = _gradio(base)
        outputs = page.predict(TOPIC, None, api_name="/battle")
        status = _status(outputs)
        assert "HTTP 401" not in status and "cannot build its pipeline pool" not in status, status
        assert "Both answers are in" in status and "rg-answer" in outputs[0] and "rg-answer" in outputs[1]
        assert {p.spec for p in asyncio.run(app.state.arena.pool())} >= {FAST, FAST2}
        choices = page.predict(*[None] * 6, api_name="/side_choices")  # the side-by-side tab opens
        assert choices[0]["value"] == "bm25@20" and choices[2]["value"] == "extractive", choices
        side = page.predict(
            TOPIC, "bm25@20", "none", "extractive", "bm25+rocchio@20", "none", "extractive", api_name="/compare"
        )
        assert "Both answers are in" in _status(side), _status(side)


# ---- the start-up warm-up ----


def test_the_first_battle_does_not_wait_behind_the_warm_up_for_a_slot(demo_settings, tmp_path, llm, slowdown):
    """The warm-up is writing its answer on a one-slot LLM when the first visitor's battle comes: it gives
    way (its answer closed, the slot freed) instead of leaving the visitor's side "busy: no slot"."""
    app, url = llm
    seconds = 5.0
    settings = demo_settings.model_copy(
        update={
            "generators": [NO_SMOLLM2, _one_slot(url, seconds, slot_wait_s=1.0)],
            "arena_pool": [FAST, "bm25@20 | one-slot"],
            "database_url": f"sqlite:///{tmp_path / 'v.db'}",
        }
    )
    arena = Arena(
        settings,
        RagClient(
            "http://ragnarok.test", timeout_s=120, transport=httpx.ASGITransport(app=create_app(settings, arena=False))
        ),
    )
    slow = identify("bm25@20 | one-slot")

    async def scenario():
        asked = app.state.requests
        arena.start_warm_up()
        await _until(lambda: app.state.requests > asked, 60 * slowdown)  # its answer holds the one slot now
        return await arena.compare(identify(FAST), slow, TOPIC, "", "s")

    view = asyncio.run(scenario())
    assert view.votable, (view.pane_b, view.status)
    assert "no slot" not in view.pane_b
    assert not arena.warming.running and arena.warming.over
    assert arena.latency.medians()[slow.spec] >= seconds  # measured by the battle: the warm-up's was closed
    assert arena.start_warm_up() is not None and not arena.warming.running  # never started again


def test_the_first_battle_after_start_up_gets_the_slot_the_warm_up_held(demo_settings, tmp_path, llm, slowdown):
    """As `ragnarok serve` runs it (the UI built at start-up, the warm-up on the arena's first visit), keys
    on: the first visitor's battle, over Gradio's API, comes while the warm-up's answer holds the one-slot LLM,
    and is answered. Before that visit no warm-up answer is asked for (start-up work)."""
    app, url = llm
    settings = demo_settings.model_copy(
        update={
            "auth": "keys",
            "generators": [NO_SMOLLM2, _one_slot(url, 5.0, slot_wait_s=1.0)],
            "arena_pool": [FAST, "bm25@20 | one-slot"],
            "database_url": f"sqlite:///{tmp_path / 'v.db'}",
        }
    )
    api = create_app(settings)
    api.state.arena_ui.build_at_start = True  # as `ragnarok serve` sets it
    asked = app.state.requests
    with serve_app(api) as base:
        deadline = time.monotonic() + 120 * slowdown
        while not api.state.arena_ui.built:  # the UI is built at start-up, without a visit
            assert time.monotonic() < deadline, "the arena's UI was not built at start-up"
            time.sleep(0.05)
        time.sleep(0.5)
        assert app.state.requests == asked and not api.state.arena.warming.running  # nobody came: no warm-up
        assert httpx.get(f"{base}/arena/", timeout=60).status_code == 200  # the first visit
        while app.state.requests == asked:  # now the warm-up's answer takes the slot
            assert time.monotonic() < deadline, "the warm-up never asked the one-slot LLM"
            time.sleep(0.05)
        status = _status(_gradio(base).predict(TOPIC, None, api_name="/battle"))
        assert "Both answers are in" in status and "no slot" not in status, status


def test_the_warm_up_calls_no_paid_generator_the_pool_does_not_list(demo_settings, tmp_path):
    """The default pool leaves a paid generator out, and so does the warm-up: no call reaches it."""
    from test_arena_public import _generators

    with paid_llm() as (url, calls):
        settings = keys_settings(demo_settings, tmp_path, generators=[NO_SMOLLM2, *_generators(url)[:1]])
        transport = httpx.ASGITransport(app=create_app(settings, arena=False))  # in process, as the arena
        arena = Arena(settings, RagClient("http://ragnarok.test", transport=transport, timeout_s=60))
        seen = asyncio.run(arena.warm_up())
        assert set(seen) == {"extractive"} and sum(calls.values()) == 0
        assert arena.latency.medians().keys() == {p.spec for p in asyncio.run(arena.pool())}


# ---- pipelines that miss the time budget ----


def test_recent_misses_make_a_pipeline_drawn_less():
    pool = make_pool([FAST, FAST2, "bm25+rm3@20 | extractive"])
    fast, fast2, late = (p.spec for p in pool)
    assert miss_factor(0) == 1.0 and miss_factor(2) == pytest.approx(0.25)
    # its median is within the budget (its misses were quick failures): the misses alone count
    weights = speed_weights(pool, {fast: 1.0, fast2: 1.0, late: 1.0}, 30.0, {late: (2, 3)})
    assert weights == {fast: 1.0, fast2: 1.0, late: pytest.approx(0.25)}
    rng = random.Random(7)
    pairs = (pick_pair(pool, {}, rng, weights) for _ in range(3000))
    draws = Counter(pair_key(a.spec, b.spec) for a, b in pairs)
    with_late = draws[pair_key(fast, late)] + draws[pair_key(fast2, late)]
    assert 0.25 < with_late / 3000 < 0.42  # (0.25 + 0.25) / 1.5 = 1/3, not 2/3


def test_a_pipeline_that_runs_out_of_time_is_drawn_less_and_the_visitor_is_told(demo_settings, tmp_path, llm):
    """Its answers fail for lack of time (a 504 well within the arena's budget, as "busy: no slot" does):
    each is a miss, so blinded battles draw it less, the failed battle's reveal says so, and a later battle
    says how many pipelines are drawn less (naming none before the vote)."""
    _, url = llm
    late = "bm25@20 | one-slot"
    settings = demo_settings.model_copy(
        update={
            "generators": [NO_SMOLLM2, _one_slot(url, 10, timeout_s=0.5, first_token_s=0.5)],
            "arena_pool": [FAST, FAST2, late],
            "database_url": f"sqlite:///{tmp_path / 'v.db'}",
        }
    )
    arena = Arena(
        settings,
        RagClient(
            "http://ragnarok.test", timeout_s=120, transport=httpx.ASGITransport(app=create_app(settings, arena=False))
        ),
        rng=random.Random(3),
    )
    for _ in range(2):
        failed = asyncio.run(arena.compare(identify(FAST), identify(late), TOPIC, "", "s"))
        assert not failed.votable and "HTTP 504" in failed.pane_b, failed.pane_b
    assert "B missed the arena&#x27;s 30 s time budget (2 of its last 2 answers did)" in failed.status
    assert "draw it less often" in failed.status
    assert arena.latency.misses()[late] == (2, 2)
    pairs = [asyncio.run(arena.pick()) for _ in range(300)]
    with_late = sum(late in (a.spec, b.spec) for a, b in pairs)
    assert with_late / 300 < 0.45  # 1/3 expected; 2/3 when its misses are not counted
    view = asyncio.run(arena.compare(identify(FAST), identify(FAST2), TOPIC, "", "s"))
    assert view.votable and "1 of the 3 pipelines is drawn less often for now" in view.status


# ---- a real browser at 420 px, keys on, the default pool ----

#: Every word of the visible elements matched by a selector that is split across lines (one word, two lines).
SPLIT_WORDS = """(selector) => {
  const split = [];
  for (const el of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const rects = [...range.getClientRects()].filter(r => r.width > 0);
        const tops = new Set(rects.map(r => Math.round(r.top)));
        if (tops.size > 1) split.push(m[0]);
      }
    }
  }
  return split;
}"""
#: How many lines each visible element matched by a selector takes (its text's distinct line tops).
LINES = """(selector) => [...document.querySelectorAll(selector)].filter(e => e.offsetParent).map(e => {
  const range = document.createRange();
  range.selectNodeContents(e);
  return new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top))).size;
})"""
#: Focus each visible citation in turn; the tooltip's box (once shown and placed), the viewport's width, and
#: where the tooltip would have ended unshifted (its citation's left + its width).
TIPS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = [];
  for (const cite of document.querySelectorAll(".rg-cite")) {
    if (!cite.offsetParent) continue;
    cite.scrollIntoView({block: "center"});
    cite.focus();
    await frame();
    const tip = cite.querySelector(".rg-tip").getBoundingClientRect();
    out.push({left: tip.left, right: tip.right, width: document.documentElement.clientWidth,
              unshifted: cite.getBoundingClientRect().left + tip.width});
    cite.blur();
  }
  return out;
}"""


@pytest.mark.slow
def test_the_public_arena_at_420_px_with_keys(demo_settings, tmp_path, browser_context):
    """Keys on, the default pool, a phone's width: a battle answers (no 401), no word of a pipeline's name
    breaks across lines, a 95 % interval takes one line, the interval plot fits the screen (labels readable),
    and every citation's tooltip stays inside the viewport, at 420 px and on a desktop's width."""
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)
    settings = keys_settings(demo_settings, tmp_path, arena_min_votes=1)
    with serve_app(create_app(settings)) as base:
        page = browser_context.new_page()
        page.set_viewport_size({"width": 420, "height": 860})
        page.set_default_timeout(90_000)
        page.goto(f"{base}/arena/")
        page.locator("#rg-topic textarea").fill(TOPIC)
        page.locator("#rg-go").click()
        expect(page.locator("#rg-vote-a")).to_be_enabled()
        assert "401" not in page.locator("#rg-status").inner_text()
        assert page.locator(".rg-answer").count() == 2

        tips = page.evaluate(TIPS)
        assert tips and all(t["left"] >= 0 and t["right"] <= t["width"] for t in tips), tips
        page.screenshot(path=tmp_path / "battle-420.png", full_page=True)
        page.set_viewport_size({"width": 1024, "height": 860})
        tips = page.evaluate(TIPS)
        assert any(t["unshifted"] > t["width"] for t in tips), tips  # one near the right edge: it was shifted
        assert all(t["left"] >= 0 and t["right"] <= t["width"] for t in tips), tips
        page.set_viewport_size({"width": 420, "height": 860})

        page.locator("#rg-vote-a").click()
        expect(page.locator("#rg-status .rg-reveal")).to_be_visible()
        assert page.evaluate(SPLIT_WORDS, "#rg-status .rg-reveal code") == []
        page.get_by_role("tab", name="Leaderboards").click()
        page.locator("#rg-refresh").click()
        expect(page.locator("#rg-summary .rg-total")).to_have_text("1")
        board = page.locator("#rg-board-rag")
        expect(board.locator(".rg-plain .rg-ci").first).to_be_visible()
        assert page.evaluate(SPLIT_WORDS, "#rg-board-rag code") == []
        assert set(page.evaluate(LINES, "#rg-board-rag .rg-ci")) == {1}
        plot = board.locator(".rg-intervals-narrow")
        expect(plot).to_be_visible()
        expect(board.locator(".rg-intervals-wide")).to_be_hidden()
        box = plot.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420, box
        assert plot.locator("text").first.bounding_box()["height"] >= 10  # labels stay readable
        scroller = plot.locator("xpath=..")
        assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # nothing to scroll to
        page.screenshot(path=tmp_path / "boards-420.png", full_page=True)


def test_an_idle_arena_does_not_poll_every_millisecond(demo_settings):
    """Gradio's queue looks for work every 1 ms when it has none (~1,100 wake-ups a second with its progress
    loop: 4-5 % of a core on an idle server); the arena's looks every 50 ms."""
    from webui.app import build
    from webui.lazy import QUEUE_POLL_S

    blocks = build(Arena(demo_settings, RagClient("http://ragnarok.test", timeout_s=10)))
    assert blocks._queue.sleep_when_free == QUEUE_POLL_S >= 0.05
    assert blocks._queue.progress_update_sleep_when_free >= QUEUE_POLL_S
