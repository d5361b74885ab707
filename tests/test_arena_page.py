"""The arena page's browser-side wiring, without a browser: each battle event starts the click's clock first and
hides Gradio's own progress (its queue text and its ETA from earlier battles); the status lines' seconds are
marked for the clock; a board table sits in a box with a scroll hint. tests/test_arena_ui.py and
tests/test_arena_browser.py check the same in chromium."""

from __future__ import annotations

import re

from ragnarok.arena.ratings import Row
from ragnarok.core.settings import Settings
from webui import boards, page, render
from webui.arena import Arena

POOL = ["bm25@20 | extractive", "bm25+rm3@20 | extractive"]


def test_each_battle_event_starts_the_clock_first_and_hides_gradios_progress(tmp_path):
    from webui.app import build

    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'v.db'}", arena_pool=POOL)
    blocks = build(Arena(settings, client=None))  # type: ignore[arg-type] - building calls no service
    deps = blocks.get_config_file()["dependencies"]
    at = {d["api_name"]: i for i, d in enumerate(deps)}
    for name, status in (("battle", "rg-status"), ("compare", "rg-side-status")):
        for event in (name, f"{name}_on_enter" if name == "battle" else f"{name}_again"):
            run, clock = deps[at[event]], deps[at[f"{event}_clock"]]
            assert run["show_progress"] == "hidden" and run["js"] is None
            # the same trigger, the clock first: the page runs a trigger's events in order
            assert clock["targets"] == run["targets"] and at[f"{event}_clock"] < at[event]
            assert clock["backend_fn"] is False and f'"{status}"' in clock["js"]
            assert clock["api_visibility"] == "private"
            for after in (f"{event}_over", f"{event}_failed"):  # the clock's run ends with the battle's
                assert deps[at[after]]["trigger_after"] == run["id"] and "busy" in deps[at[after]]["js"]
            assert deps[at[f"{event}_failed"]]["trigger_only_on_failure"]


def test_status_lines_mark_their_seconds_for_the_clock():
    line = render.counter_html("Waiting for both answers: ", 12.4, " s so far. <ok>")
    assert '<span class="rg-secs">12</span>' in line and "&lt;ok&gt;" in line
    assert re.search(r"\d+ s so far", re.sub(r"<[^>]+>", "", page.clock_html()))
    assert "rg-secs" in page.HEAD and "rg-overflows" in page.HEAD and "rg-at-end" in page.CSS


def test_a_board_table_scrolls_in_a_box_with_a_hint():
    row = Row(name="bm25@20 | extractive", bt=1000.0, elo=1000.0, lower=990.0, upper=1010.0, votes=12, rank=1)
    html = boards.table_html(boards.Board("rag", 12, [row], {}))
    wrap = re.search(r'<div class="rg-scroll-wrap"><div class="rg-scroll"><table.*</table></div>(.*)</div>$', html)
    assert wrap and 'class="rg-scroll-hint"' in wrap.group(1) and "Scroll sideways" in wrap.group(1)
    assert html.count("<th>") == 6 and "<th>Elo</th>" in html
