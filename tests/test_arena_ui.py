"""The arena's UI in a real browser (Debian's chromium driven by playwright, as tests/test_arena_browser.py):

* a battle between a fast pipeline and a slow one (a scripted LLM server that answers after seconds) shows
  the fast answer first, with an elapsed-seconds wait line in the other pane and the votes closed until both
  are in; after the vote the leaderboard lists both systems as provisional, beside the style-controlled board;
  the status line counts from the click, also while the battle's request has not reached the server yet;
* citation tooltips: shown on hover and keyboard focus, gone when the pointer leaves after a click, closed by
  Escape; the page's console has no failed request (``/manifest.json`` used to 404);
* every tab at desktop (1280 px) and narrow (420 px) widths: its main elements visible, nothing wider than
  the window, the topic box full-width at 420 px; a screenshot of each under the test's tmp_path.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
from scripted_llm import scripted_llm_app
from servers import serve_app
from test_arena_browser import browser_context  # noqa: F401 - the fixture (chromium, or skip / fail in CI)

from api.main import create_app
from ragnarok.stages.generate.base import GeneratorConfig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

TOPIC = "compress a file with gzip"
FAST, SLOW = "bm25@20 | extractive", "bm25@20 | slow-llm"
SLOW_S = 15  # well above the extractive answer's time, even on a busy machine
HELD_S = 4  # how long the battle's request waits before it reaches the server
WAIT_MS = 90_000
TABS = ("Blinded battle", "Side-by-side", "Leaderboards", "JSON")


def _watch(page) -> list[str]:
    """Failed requests and console errors of a page, as they happen."""
    problems: list[str] = []
    page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on(
        "console",
        lambda m: problems.append(f"console: {m.text} {m.location.get('url')}") if m.type == "error" else None,
    )
    return problems


def test_the_fast_answer_shows_first_then_votes_provisional_and_style_boards(
    demo_settings,
    tmp_path,
    browser_context,  # noqa: F811
):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with serve_app(scripted_llm_app()) as llm:
        slow = GeneratorConfig(
            name="slow-llm",
            backend="openai",
            base_url=f"{llm}/v1",
            model=f"sleep:{SLOW_S}",
            api_key_env=None,
            max_retries=0,
            timeout_s=60,
        )
        settings = demo_settings.model_copy(
            update={
                "generators": [slow],
                "arena_pool": [FAST, SLOW],
                "database_url": f"sqlite:///{tmp_path / 'votes.db'}",
            }
        )
        with serve_app(create_app(settings)) as base:
            # warm: the first extractive answer loads MiniLM (seconds on a busy machine), which is not what is timed
            httpx.post(f"{base}/rag", json={"topic": TOPIC, "pipeline": FAST}, timeout=300).raise_for_status()
            page = browser_context.new_page()
            page.set_default_timeout(WAIT_MS)
            problems = _watch(page)
            page.goto(f"{base}/arena/")
            page.locator("#rg-topic textarea").fill(TOPIC)

            def battle_seconds() -> int:
                return int(re.search(r"(\d+) s so far", page.locator("#rg-status").inner_text()).group(1))

            # the status line counts from the click, also while the battle has not reached the server yet (as
            # in a busy queue: here its request to join Gradio's queue is held back for HELD_S)
            held: list = []
            page.route("**/queue/join*", lambda route: held.append(route))
            page.locator("#rg-go").click()
            expect(page.locator("#rg-status")).to_contain_text("Starting the battle")
            page.wait_for_timeout(HELD_S * 1000)
            assert len(held) == 1 and battle_seconds() >= HELD_S - 1
            held[0].continue_()
            page.unroute("**/queue/join*")
            started = time.monotonic()

            # the extractive answer arrives first; the slow pane waits (no per-side seconds: they would tell the
            # extractive side apart before the vote) while the status line counts the battle's; votes stay closed
            first = page.locator("#rg-pane-a .rg-answer, #rg-pane-b .rg-answer").first
            first.wait_for()
            first_at = time.monotonic() - started
            side = "a" if page.locator("#rg-pane-a .rg-answer").count() else "b"
            other = "b" if side == "a" else "a"
            waiting = page.locator(f"#rg-pane-{other} .rg-wait")
            expect(waiting).to_be_visible()
            expect(page.locator("#rg-vote-a")).to_be_disabled()
            expect(page.locator("#rg-status")).to_contain_text("Voting opens when both are in")
            assert waiting.locator(".rg-elapsed").count() == 0

            seconds = battle_seconds()
            assert seconds >= HELD_S  # the server's count goes on from the click's, not from 0
            page.wait_for_timeout(2100)
            assert battle_seconds() >= seconds + 1  # it counts
            page.screenshot(path=shots / "battle-waiting.png", full_page=True)

            expect(page.locator("#rg-vote-a")).to_be_enabled()
            both_at = time.monotonic() - started
            expect(page.locator(f"#rg-pane-{other} .rg-answer")).to_be_visible()
            assert both_at - first_at >= SLOW_S / 2, (first_at, both_at)  # shown early, not with the other
            expect(page.locator("#rg-status")).to_contain_text("Both answers are in")

            # citations: hover shows, Escape hides; a click leaves nothing open once the pointer leaves
            cite = page.locator(f"#rg-pane-{side} .rg-cite").first
            tip = cite.locator(".rg-tip")
            cite.hover()
            expect(tip).to_be_visible()
            page.keyboard.press("Escape")
            expect(tip).to_be_hidden()
            page.mouse.move(2, 2)
            cite.click()
            expect(tip).to_be_visible()
            page.mouse.move(2, 2)
            expect(tip).to_be_hidden()
            cite.focus()  # keyboard users: focus shows it, Escape closes it
            expect(tip).to_be_visible()
            page.keyboard.press("Escape")
            expect(tip).to_be_hidden()

            page.locator("#rg-vote-a").click()
            expect(page.locator("#rg-status .rg-reveal")).to_contain_text("You preferred A")

            # one vote each: provisional, no rank and no interval; the style-controlled board beside the plain one
            page.get_by_role("tab", name="Leaderboards").click()
            page.locator("#rg-refresh").click()
            board = page.locator("#rg-board-rag")
            expect(page.locator("#rg-summary .rg-total")).to_have_text("1")
            expect(board.locator(".rg-plain .rg-provisional")).to_have_count(2)
            expect(board.locator(".rg-styled")).to_contain_text("Style-controlled")
            expect(board.locator(".rg-styled .rg-provisional")).to_have_count(2)
            expect(board.locator(".rg-note")).to_contain_text("fewer than 10 votes")
            assert board.locator(".rg-intervals").count() == 0
            plain, styled = board.locator(".rg-plain").bounding_box(), board.locator(".rg-styled").bounding_box()
            assert styled["x"] > plain["x"] + plain["width"] - 1  # side by side at desktop width
            page.screenshot(path=shots / "leaderboards.png", full_page=True)
            assert problems == [], problems  # no 404 (manifest.json, favicon.ico), no console error
    assert (shots / "battle-waiting.png").stat().st_size > 10_000


def _fits(page) -> None:
    width = page.viewport_size["width"]
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"the page is {overflow} px wide in a {width} px window"


def test_every_tab_at_desktop_and_narrow_widths(demo_settings, tmp_path, browser_context):  # noqa: F811
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    settings = demo_settings.model_copy(
        update={"arena_pool": [FAST, "bm25+rm3@20 | extractive"], "database_url": f"sqlite:///{tmp_path / 'votes.db'}"}
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with serve_app(create_app(settings)) as base:
        for width in (1280, 420):
            page = browser_context.new_page()
            page.set_viewport_size({"width": width, "height": 900})
            page.set_default_timeout(WAIT_MS)
            problems = _watch(page)
            page.goto(f"{base}/arena/")
            topic = page.locator("#rg-topic textarea")
            topic.wait_for()
            for name in TABS:  # every tab reachable directly, none folded into an overflow menu
                expect(page.get_by_role("tab", name=name)).to_be_visible()
            box = page.locator("#rg-topic").bounding_box()
            assert box["width"] >= 0.6 * min(width, 1200) and box["height"] < 140, box  # not cramped
            for button in ("#rg-draw", "#rg-go"):
                b = page.locator(button).bounding_box()
                assert b["x"] >= 0 and b["x"] + b["width"] <= width
            topic.fill(TOPIC)
            page.locator("#rg-go").click()
            expect(page.locator("#rg-vote-tie")).to_be_enabled()
            a, b = page.locator("#rg-pane-a").bounding_box(), page.locator("#rg-pane-b").bounding_box()
            if width < 640:  # stacked, each as wide as the window allows
                assert b["y"] >= a["y"] + a["height"] - 1 and a["width"] > 0.8 * (width - 64)
            else:
                assert abs(a["y"] - b["y"]) < 2  # side by side
            cite = page.locator("#rg-pane-a .rg-cite").first
            cite.focus()
            tip = cite.locator(".rg-tip").bounding_box()
            assert tip["x"] >= 0 and tip["x"] + tip["width"] <= width, tip  # the tooltip stays on screen
            _fits(page)
            page.screenshot(path=shots / f"battle-{width}.png", full_page=True)
            page.keyboard.press("Escape")
            page.locator("#rg-vote-tie").click()
            expect(page.locator("#rg-new-round")).to_be_visible()

            page.get_by_role("tab", name="Side-by-side").click()
            expect(page.locator("#rg-side-b-retriever input")).to_have_value("bm25+rm3@20")
            expect(page.locator("#rg-compare")).to_be_visible()
            _fits(page)
            page.screenshot(path=shots / f"side-by-side-{width}.png", full_page=True)

            page.get_by_role("tab", name="Leaderboards").click()
            page.locator("#rg-refresh").click()
            expect(page.locator("#rg-board-rag .rg-table").first).to_be_visible()
            expect(page.locator("#rg-board-rag .rg-styled")).to_be_visible()
            _fits(page)
            page.screenshot(path=shots / f"leaderboards-{width}.png", full_page=True)

            page.get_by_role("tab", name="JSON").click()
            expect(page.locator("#rg-json")).to_contain_text("references")
            _fits(page)
            page.screenshot(path=shots / f"json-{width}.png", full_page=True)
            assert problems == [], problems
            page.close()
    for name in ("battle", "side-by-side", "leaderboards", "json"):
        for width in (1280, 420):
            assert (shots / f"{name}-{width}.png").stat().st_size > 10_000
