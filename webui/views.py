"""What the arena hands the UI: a battle's view and a vote's (no Gradio here), and the small pieces of HTML
they are made of."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragnarok.arena.pool import PipelineId
from ragnarok.arena.store import StoredBattle
from webui import render
from webui.client import PaneResult


@dataclass
class BattleView:
    """What the browser gets for a battle: no pipeline names unless ``revealed``. A progress view (``done``
    False) has ``None`` for a pane that has not changed since the previous view."""

    battle_id: str | None
    pane_a: str | None
    pane_b: str | None
    raw: dict[str, Any]
    votable: bool
    status: str
    revealed: bool = False
    done: bool = True


@dataclass
class VoteView:
    status: str
    voted: bool
    raw: dict[str, Any] = field(default_factory=dict)


async def last(views: AsyncIterator[BattleView]) -> BattleView:
    last = None
    async for view in views:
        last = view
    assert last is not None  # every stream yields its final view
    return last


def raw(result: PaneResult) -> dict[str, Any]:
    """A side as ``POST /rag`` answered it: the answer with its cited ``segments`` (the client keeps them
    apart for the pane), or the error."""
    return {**(result.answer or {}), "segments": result.segments} if result.ok else {"error": result.error}


def refusal(message: str) -> BattleView:
    placeholder = render.placeholder_html()
    return BattleView(None, placeholder, placeholder, {}, False, render.message_html(message, "error"))


def reveal(stored: StoredBattle, note: str, timings: tuple[str, str] = ("", "")) -> str:
    a, b = (
        PipelineId(p["spec"], p["retriever"], p["reranker"], p["generator"])
        for p in (stored.pipeline_a, stored.pipeline_b)
    )
    return render.reveal_html(a, b, stored.winner, note, timings=timings)


def timing(text: str) -> str:
    return f'<p class="rg-timing">{text}</p>' if text else ""


def out_of_time(error: str) -> bool:
    """Whether a side's error says it ran out of time (the gateway's 504, the client's time-out)."""
    return error.startswith(("HTTP 504", "timed out"))


def slow_notes(
    sides: tuple[tuple[str, PipelineId, PaneResult, float], ...], budget_s: float, misses: Mapping[str, tuple[int, int]]
) -> tuple[str, ...]:
    """For the reveal: each side (``(name, pipeline, result, seconds)``) that missed the time budget — late, or
    out of time — and that blinded battles now draw it less (``misses``: its recent misses, of how many)."""
    notes = []
    for side, p, result, seconds in sides:
        if seconds > budget_s or (not result.ok and out_of_time(result.error or "")):
            missed, of = misses.get(p.spec, (1, 1))
            notes.append(
                f"{side} missed the arena's {budget_s:g} s time budget ({missed} of its last {of} "
                "answers did): blinded battles now draw it less often."
            )
    return tuple(notes)


def drawn_less(weights: Mapping[str, float], budget_s: float) -> str:
    """How many pool pipelines are drawn less for their speed (sampling factor below 1), in words (empty when
    none): it names none, so it says nothing of a battle's sides."""
    slow = sum(w < 1.0 for w in weights.values())
    if not slow:
        return ""
    verb = "is" if slow == 1 else "are"
    return (
        f" {slow} of the {len(weights)} pipelines {verb} drawn less often for now: their recent answers "
        f"took longer than {budget_s:g} s."
    )
