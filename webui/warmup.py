"""The start-up warm-up: one answer per generator of the pool before the first battle, measured, and never in
a visitor's way.

It starts on the arena's first visit, asks each generator of the pool one question as the arena's principal,
and lets each answer's seconds stand for that generator's pipelines until battles measure them, so a slow
pipeline is drawn less from the first battle on. The first battle asked for stops it.

Design notes: docs/internals/webui.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

from ragnarok.arena.pool import PipelineId
from webui.client import PaneResult, RagClient

#: What the warm-up asks each generator (a topic the demo collection answers).
WARM_UP_TOPIC = "how do I parse command-line arguments"
WARM_UP_ID = "warm-up"

Record = Callable[[PipelineId, PaneResult, float], None]


async def answer_once(client: RagClient, pipeline: PipelineId, topic: str) -> tuple[PaneResult, float]:
    """One streamed answer (closed where it stands when cancelled) and its seconds."""
    start = time.monotonic()
    result = PaneResult(error="the answer's stream ended before the answer")
    async with contextlib.aclosing(client.stream(pipeline, topic, WARM_UP_ID)) as events:
        async for event in events:
            if event.event == "done":
                result = event.data
                break
            if event.event == "error":
                result = PaneResult(error=str(event.data))
                break
    return result, time.monotonic() - start


async def measure(
    client: RagClient, pool: list[PipelineId], record: Record, topic: str = WARM_UP_TOPIC
) -> dict[str, float]:
    """One answer per generator of ``pool`` (through its first pipeline); ``record(pipeline, result, seconds)``
    for every pool pipeline of that generator. Returns the seconds per generator."""
    seen: dict[str, float] = {}
    for p in pool:
        if p.generator in seen:
            continue
        result, seconds = await answer_once(client, p, topic)
        seen[p.generator] = seconds
        for other in pool:
            if other.generator == p.generator:
                record(other, result, seconds)
    return seen


class WarmUp:
    """The warm-up task of one arena: started once, stopped by the first visitor."""

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self.over = False  # a visitor came: no warm-up starts or goes on

    def start(self, run: Callable[[], Coroutine[Any, Any, Any]]) -> asyncio.Task[Any] | None:
        """Run ``run()`` in the background (once; not after a visitor came); its failure is left unraised."""
        if self._task is None and not self.over:
            self._task = asyncio.ensure_future(run())
            self._task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return self._task

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def give_way(self) -> None:
        """A visitor's battle is about to run: stop the warm-up (the answer it is writing is closed, its slot
        freed) and wait until it is over."""
        self.over = True
        task = self._task
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait([task])

    async def aclose(self) -> None:
        await self.give_way()


def after(first: Callable[[], asyncio.Future[Any]], then: Callable[[], object]) -> None:
    """``then()`` (the warm-up) once ``first()`` (the UI's build) is over, in the background: one after the
    other, neither slows the other down."""

    async def run() -> None:
        await asyncio.wait([first()])
        then()

    task = asyncio.ensure_future(run())
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
