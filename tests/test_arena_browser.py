"""The arena in a real browser: Debian's chromium driven by playwright, against the API + arena served by
uvicorn.

Type a topic, see two answers with no pipeline name on the page, focus a citation, vote, see the reveal, see
the leaderboard count move; one screenshot per tab under the test's tmp_path. Without chromium the test skips
locally and fails in CI.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from servers import serve_app

from api.main import create_app

pytestmark = [
    pytest.mark.slow,
    # pandas deprecations raised inside Gradio's queue, not ours
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
POOL = ["bm25@20 | extractive", "bm25+rocchio@20 | extractive", "bm25+rm3@20 | extractive"]
NAMES = ["bm25", "rocchio", "rm3", "extractive"]
TOPIC = "compress a file with gzip"
WAIT_MS = 90_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture
def browser_context(tmp_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        if _in_ci():
            pytest.fail(f"playwright is not installed: {exc}")
        pytest.skip("playwright is not installed")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        if _in_ci():
            pytest.fail(f"{CHROMIUM} is missing: CI must install Debian's chromium for the arena browser test")
        pytest.skip(f"{CHROMIUM} not found")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def _leaks(text: str) -> list[str]:
    return [name for name in NAMES if name in text.lower()]


def test_blinded_battle_vote_reveal_and_leaderboard(demo_settings, tmp_path, browser_context):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    settings = demo_settings.model_copy(
        update={"arena_pool": POOL, "database_url": f"sqlite:///{tmp_path / 'votes.db'}"}
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with serve_app(create_app(settings)) as base:
        page = browser_context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{base}/arena/")
        topic = page.locator("#rg-topic textarea")
        topic.wait_for()

        # the leaderboard before any vote
        page.get_by_role("tab", name="Leaderboards").click()
        expect(page.locator("#rg-summary .rg-total")).to_have_text("0")
        page.screenshot(path=shots / "leaderboards-before.png", full_page=True)

        # a blinded battle: two answers, no pipeline name anywhere on the page
        page.get_by_role("tab", name="Blinded battle").click()
        topic.fill(TOPIC)
        page.locator("#rg-go").click()
        page.locator("#rg-pane-a .rg-answer").wait_for()
        page.locator("#rg-pane-b .rg-answer").wait_for()
        expect(page.locator("#rg-vote-a")).to_be_enabled()
        body = page.locator("body").inner_text()
        assert "gzip" in body
        assert _leaks(body) == [], f"pipeline names on the page before the vote: {_leaks(body)}"
        panes = page.locator("#rg-pane-a").inner_html() + page.locator("#rg-pane-b").inner_html()
        assert _leaks(panes) == []

        # a citation is focusable and its tooltip shows the segment's title, text and URL
        cite = page.locator("#rg-pane-a .rg-cite").first
        tip = cite.locator(".rg-tip")
        expect(tip).to_be_hidden()
        cite.focus()
        expect(tip).to_be_visible()
        expect(tip.locator(".rg-tip-title")).not_to_be_empty()
        expect(tip.locator(".rg-tip-url")).to_contain_text("https://docs.python.org/")
        page.screenshot(path=shots / "battle.png", full_page=True)

        page.get_by_role("tab", name="JSON").click()
        raw = page.locator("#rg-json")
        expect(raw).to_contain_text("references")
        assert _leaks(raw.inner_text()) == []
        page.screenshot(path=shots / "json.png", full_page=True)

        # vote, see the reveal, vote buttons off, a new round offered
        page.get_by_role("tab", name="Blinded battle").click()
        page.locator("#rg-vote-a").click()
        reveal = page.locator("#rg-status .rg-reveal")
        expect(reveal).to_contain_text("You preferred A")
        revealed = re.findall(r"(bm25\S*@20 \| extractive)", reveal.inner_text())
        assert len(revealed) == 2 and set(revealed) <= set(POOL) and revealed[0] != revealed[1]
        expect(page.locator("#rg-vote-b")).to_be_disabled()
        expect(page.locator("#rg-new-round")).to_be_visible()
        page.screenshot(path=shots / "reveal.png", full_page=True)

        # the leaderboard counts the vote
        page.get_by_role("tab", name="Leaderboards").click()
        page.locator("#rg-refresh").click()
        expect(page.locator("#rg-summary .rg-total")).to_have_text("1")
        expect(page.locator("#rg-board-rag .rg-plain .rg-table")).to_contain_text(revealed[0])
        expect(page.locator("#rg-board-rag .rg-votes").first).to_have_text("1")
        page.screenshot(path=shots / "leaderboards-after.png", full_page=True)

        # side-by-side: chosen pipelines, named, the vote stored as unblinded
        page.get_by_role("tab", name="Side-by-side").click()
        page.locator("#rg-side-topic textarea").fill(TOPIC)
        expect(page.locator("#rg-side-b-retriever input")).to_have_value("bm25+rocchio@20")
        page.locator("#rg-compare").click()
        page.locator("#rg-side-pane-b .rg-answer").wait_for()
        page.locator("#rg-side-vote-tie").click()
        expect(page.locator("#rg-side-status .rg-reveal")).to_contain_text("bm25+rocchio@20 | extractive")
        page.screenshot(path=shots / "side-by-side.png", full_page=True)

        page.get_by_role("tab", name="Leaderboards").click()
        page.locator("#rg-refresh").click()
        expect(page.locator("#rg-summary .rg-total")).to_have_text("1")  # blinded only by default
        page.locator("#rg-include-unblinded input").check()
        expect(page.locator("#rg-summary")).to_contain_text("blinded and unblinded")
        expect(page.locator("#rg-summary .rg-total")).to_have_text("2")

    for name in ("leaderboards-before", "battle", "json", "reveal", "leaderboards-after", "side-by-side"):
        assert (shots / f"{name}.png").stat().st_size > 10_000


def test_the_json_tab_and_the_boards_at_420_px(demo_settings, tmp_path, browser_context):
    """As a phone shows them: the JSON tab's long strings wrap instead of being clipped, each board
    table's Votes column is in view, every column is reachable (a table wider than the screen shows a fade
    and a hint, and scrolls to its last column), and the interval plot's labels keep a readable size. A
    second battle shows the click's clock, counting while its request has not reached the server, and never
    Gradio's ETA from the first battle's length."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    settings = demo_settings.model_copy(
        update={"arena_pool": POOL, "arena_min_votes": 1, "database_url": f"sqlite:///{tmp_path / 'votes.db'}"}
    )
    with serve_app(create_app(settings)) as base:
        page = browser_context.new_page()
        page.set_viewport_size({"width": 420, "height": 860})
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{base}/arena/")
        page.locator("#rg-topic textarea").fill(TOPIC)
        page.locator("#rg-go").click()
        expect(page.locator("#rg-vote-a")).to_be_enabled()

        page.get_by_role("tab", name="JSON").click()
        raw = page.locator("#rg-json")
        expect(raw).to_contain_text("segments")  # the cited segments, as POST /rag returned them
        clipped = page.evaluate("""() => [...document.querySelectorAll('#rg-json *')]
            .filter(e => e.children.length === 0 && e.textContent.length > 60)
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                         || e.scrollWidth > e.clientWidth + 1).length""")
        assert clipped == 0
        page.screenshot(path=tmp_path / "json-420.png", full_page=True)

        page.get_by_role("tab", name="Blinded battle").click()
        page.locator("#rg-vote-a").click()
        expect(page.locator("#rg-status .rg-reveal")).to_be_visible()
        page.get_by_role("tab", name="Leaderboards").click()
        page.locator("#rg-refresh").click()
        expect(page.locator("#rg-summary .rg-total")).to_have_text("1")
        board = page.locator("#rg-board-rag")
        votes = board.locator(".rg-plain th", has_text="Votes")
        expect(votes).to_be_visible()
        box = votes.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420, box
        label = board.locator(".rg-intervals text").first
        expect(label).to_be_visible()
        assert label.bounding_box()["height"] >= 10  # 11 px text, not scaled down to a third
        page.screenshot(path=tmp_path / "boards-420.png", full_page=True)

        # every column reachable: in view, or the table says it scrolls sideways
        wrap = board.locator(".rg-plain .rg-scroll-wrap")
        scroller, hint = wrap.locator(".rg-scroll"), wrap.locator(".rg-scroll-hint")
        elo = board.locator(".rg-plain th", has_text="Elo")
        if scroller.evaluate("b => b.scrollWidth <= b.clientWidth + 1"):
            assert elo.bounding_box()["x"] + elo.bounding_box()["width"] <= 420
            expect(hint).to_be_hidden()
        else:
            expect(hint).to_be_visible()
        # a table wider than the screen (longer names than the demo's): the fade and the hint, and scrolling
        # brings the last column into view
        page.add_style_tag(content="#rg-board-rag .rg-plain .rg-table { min-width: 900px; }")
        expect(hint).to_be_visible()
        expect(wrap).to_have_class(re.compile(r"\brg-overflows\b"))
        expect(wrap).not_to_have_class(re.compile(r"\brg-at-end\b"))
        assert wrap.evaluate("w => getComputedStyle(w, '::after').backgroundImage").startswith("linear-gradient")
        assert elo.bounding_box()["x"] >= 420  # off the screen until scrolled to
        page.screenshot(path=tmp_path / "boards-420-wide.png", full_page=True)
        scroller.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
        expect(wrap).to_have_class(re.compile(r"\brg-at-end\b"))
        assert wrap.evaluate("w => getComputedStyle(w, '::after').content") == "none"  # no fade at the end
        box = elo.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 420, box

        # a second battle: right after the click the status line counts (Gradio's ETA, from the first battle's
        # length, is never shown); every text the page shows meanwhile is recorded in the page
        page.get_by_role("tab", name="Blinded battle").click()
        page.evaluate(RECORD_TEXTS)
        held: list = []  # the battle's request to Gradio's queue, held back: the server has not seen the click
        page.route("**/gradio_api/queue/join*", lambda route: held.append(route))
        page.locator("#rg-go").click()
        status = page.locator("#rg-status")
        expect(status).to_contain_text("s so far")
        expect(status.locator(".rg-secs")).to_have_text(re.compile(r"^[1-9]\d*$"))  # counting, from the click
        assert len(held) == 1
        held[0].continue_()
        page.unroute("**/gradio_api/queue/join*")
        expect(page.locator("#rg-vote-a")).to_be_enabled()
        statuses, etas = page.evaluate("() => [window.__rgStatuses, window.__rgEtas]")
        assert len(statuses) > 1 and re.search(r"\d+ s so far", statuses[1]), statuses  # [0]: the reveal
        assert etas == [], etas


#: Records in the page each text ``#rg-status`` shows and any Gradio ETA (``1.3/127.9s``) on the page that is not
#: hidden from screen readers (Gradio keeps a hidden progress's text in the page at opacity 0: that still counts).
RECORD_TEXTS = """() => {
  window.__rgStatuses = [document.querySelector("#rg-status").innerText.trim()]; window.__rgEtas = [];
  const shown = (e) => e.checkVisibility({ visibilityProperty: true });
  new MutationObserver(() => {
    const status = document.querySelector("#rg-status").innerText.trim();
    if (status && status !== window.__rgStatuses.at(-1)) window.__rgStatuses.push(status);
    const texts = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (texts.nextNode()) {
      const eta = texts.currentNode.textContent.match(/\\d+\\.\\d\\s*\\/\\s*\\d+\\.\\d\\s*s/);
      if (eta && shown(texts.currentNode.parentElement)) window.__rgEtas.push(eta[0]);
    }
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""
