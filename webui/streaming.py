"""A battle as its answers are written: both sides streamed into their panes at once.

:class:`Race` runs both sides of a battle and :meth:`Race.views` yields what the two panes and the status
line show while they run, whenever something changed and at least every ``tick_s``. A view holds the answers'
text only (no per-side timing, no stage names), so streaming does not break the battle's blinding.

Design notes: docs/internals/webui.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ragnarok.arena.pool import PipelineId
from webui import render
from webui.client import PaneResult, RagClient

log = logging.getLogger(__name__)
#: The least time between two views (text that arrives meanwhile is shown together).
MIN_GAP_S = 0.2
SIDES = ("a", "b")


def result_html(result: PaneResult) -> str:
    """A finished side's pane: its answer with citations, or its error."""
    if result.ok:
        return render.answer_html(result.answer or {}, result.segments)
    return render.error_html(result.error or "unknown error")


@dataclass
class Side:
    """One side of a race as it goes: the text written so far, when its first token came, and its result and
    seconds once done."""

    pipeline: PipelineId
    start: float
    text: str = ""
    first_token_s: float | None = None
    result: PaneResult | None = None
    seconds: float | None = None
    shown: bool = False  # its final pane went out in a view

    def timing(self) -> str:
        """Its time to first token and to the answer (:func:`webui.render.timing_text`; none for an error)."""
        if self.result is None or not self.result.ok or self.seconds is None:
            return ""
        return render.timing_text(self.first_token_s, self.seconds)

    def pane(self) -> str:
        assert self.result is not None
        return result_html(self.result)


class Race:
    """Both sides of a battle, streamed at once. Construct it in the context the sides must run in (the
    arena's principal): each side's task copies the context as it is created. ``on_done(pipeline, result,
    seconds)`` is called as each side finishes (not when the race is abandoned). With ``one_at_a_time`` (both
    sides on a one-slot generator) a side starts when the one before it is done, its seconds counted from then."""

    def __init__(
        self,
        client: RagClient,
        pipelines: dict[str, PipelineId],
        topic: str,
        topic_id: str,
        on_done: Callable[[PipelineId, PaneResult, float], None] | None = None,
        one_at_a_time: bool = False,
    ):
        self.on_done = on_done
        self.start = time.monotonic()
        self.sides = {key: Side(p, self.start) for key, p in pipelines.items()}
        self._changed = asyncio.Event()
        self.tasks: dict[str, asyncio.Future[None]] = {}
        before: asyncio.Future[None] | None = None
        for key, side in self.sides.items():
            self.tasks[key] = asyncio.ensure_future(self._run(side, client, topic, topic_id, before))
            before = self.tasks[key] if one_at_a_time else None

    @property
    def finished(self) -> bool:
        return all(task.done() for task in self.tasks.values())

    def outcome(self, key: str) -> tuple[PaneResult, float]:
        side = self.sides[key]
        assert side.result is not None and side.seconds is not None
        return side.result, side.seconds

    async def _run(
        self, side: Side, client: RagClient, topic: str, topic_id: str, after: asyncio.Future[None] | None
    ) -> None:
        if after is not None:
            await asyncio.wait([after])
            side.start = time.monotonic()
        try:
            async with contextlib.aclosing(client.stream(side.pipeline, topic, topic_id)) as events:
                async for event in events:
                    now = time.monotonic() - side.start
                    if event.event == "delta":
                        text = str((event.data or {}).get("text", ""))
                        if text and side.first_token_s is None:
                            side.first_token_s = now
                        side.text += text
                    elif event.event in ("done", "error"):
                        done = event.event == "done"
                        side.result = event.data if done else PaneResult(error=str(event.data))
                        side.seconds = now
                        self._changed.set()
                        break  # the stream is closed here (its spend settled) before the side counts as done
                    else:
                        continue  # stage (it names the pipeline), references, sentence: nothing shown
                    self._changed.set()
        except asyncio.CancelledError:
            raise  # the race was abandoned (the page went away): nothing to record
        except Exception as exc:  # noqa: BLE001 - a bug here must still end as a pane, never crash the battle
            log.exception("a streamed side of a battle failed")
            side.result = PaneResult(error=f"{exc.__class__.__name__}: {exc}")
        if side.result is None:
            side.result = PaneResult(error="the answer's stream ended before the answer")
        if side.seconds is None:
            side.seconds = time.monotonic() - side.start
        if self.on_done is not None:
            self.on_done(side.pipeline, side.result, side.seconds)
        self._changed.set()

    async def views(
        self, tick_s: float, min_gap_s: float = MIN_GAP_S
    ) -> AsyncIterator[tuple[str | None, str | None, str]]:
        """``(pane_a, pane_b, status)`` while a side runs (see the module docstring); it ends when both sides
        are done. Leaving it early cancels both sides."""
        last = time.monotonic()
        try:
            while not self.finished:
                if not self._changed.is_set():
                    with contextlib.suppress(asyncio.TimeoutError):
                        wait = max(0.0, last + tick_s - time.monotonic())
                        await asyncio.wait_for(self._changed.wait(), wait)
                gap = last + min_gap_s - time.monotonic()
                if gap > 0 and not self.finished:
                    # text arriving meanwhile goes out with this view; both sides done ends the wait at once
                    await asyncio.wait(list(self.tasks.values()), timeout=gap)
                if self.finished:
                    break
                self._changed.clear()
                last = time.monotonic()
                yield self._view(last - self.start)
        finally:
            for task in self.tasks.values():
                task.cancel()

    def _view(self, elapsed: float) -> tuple[str | None, str | None, str]:
        panes: list[str | None] = []
        for key in SIDES:
            side = self.sides[key]
            if side.result is not None:
                panes.append(None if side.shown else side.pane())
                side.shown = True
            elif side.first_token_s is not None:
                panes.append(render.streaming_html(side.text))
            else:
                panes.append(render.waiting_html())
        done = sum(side.result is not None for side in self.sides.values())
        which = "one answer" if done else "both answers"
        status = render.counter_html(f"Waiting for {which}: ", elapsed, " s so far. Voting opens when both are in.")
        return panes[0], panes[1], status
