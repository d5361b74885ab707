"""A battle's final view, once both sides are in: votable when both answered, else over at once and revealed.

Blinding decides what it holds: a votable blinded battle shows both answers and the status line, and names no
pipeline and no timing (a late side is announced without saying which one); an unblinded battle names its
pipelines, so its timings go with them; a battle where a side failed cannot be voted on, so its pipelines are
shown with the error.
"""

from __future__ import annotations

from ragnarok.arena.pool import PipelineId
from webui import render
from webui.client import PaneResult
from webui.streaming import result_html as _pane
from webui.views import BattleView, raw, timing


def final_view(
    mode: str,
    battle_id: str,
    pipelines: tuple[PipelineId, PipelineId],
    results: tuple[PaneResult, PaneResult],
    slow: tuple[str, ...],
    timings: tuple[str, str],
    budget_s: float,
    drawn_less: str = "",
) -> BattleView:
    """The view of a recorded battle; ``slow``: the notes on the sides that missed the time budget,
    ``drawn_less``: what the status line says of the pool pipelines drawn less for it."""
    (a, b), (result_a, result_b) = pipelines, results
    body = {"battle": battle_id, "A": raw(result_a), "B": raw(result_b)}
    if result_a.ok and result_b.ok:
        late = (
            f" One answer took longer than the arena's {budget_s:g} s budget: which one is shown after your vote."
            if slow
            else ""
        )
        status = (
            "Both answers are in. Read both (hover or focus a citation to see its source), then "
            "vote." + late + drawn_less
        )
        panes = (_pane(result_a), _pane(result_b))
        if mode == "unblinded":  # the pipelines are named: their timings tell nothing more
            body["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
            panes = (panes[0] + timing(timings[0]), panes[1] + timing(timings[1]))
        return BattleView(battle_id, *panes, body, True, render.message_html(status), revealed=mode == "unblinded")
    body["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
    reveal = render.reveal_html(
        a, b, None, "A pipeline failed, so this battle cannot be voted on.", failed=True, timings=timings, notes=slow
    )
    return BattleView(battle_id, _pane(result_a), _pane(result_b), body, False, reveal, revealed=True)
