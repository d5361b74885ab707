"""Running a pipeline over many topics, in process, through the same gateway code as ``POST /rag``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ragnarok.gateway import PipelineRunner, Services
from ragnarok.settings import Settings
from ragnarok.spec import Pipeline
from ragnarok.topics import Topic
from ragnarok.types import Query, RagAnswer, Request

Result = RagAnswer | Request


def local_services(settings: Settings) -> tuple[Services, Any]:
    """Clients for R and AG: remote URLs from settings, else an app in this process."""
    from api.main import create_app  # noqa: PLC0415 - the API layer is only needed here

    from ragnarok.auth.principal import LOCAL  # noqa: PLC0415

    app = create_app(settings, arena=False, principal=LOCAL)  # the operator's own command: no keys, no bounds
    return app.state.services, app


async def run_topics(
    pipeline: Pipeline, topics: Sequence[Topic], settings: Settings, index: str | None = None,
    concurrency: int = 4, on_result: Callable[[Topic, Result], Awaitable[None] | None] | None = None,
) -> dict[str, Result]:
    """Every topic through ``pipeline`` with at most ``concurrency`` in flight; ``on_result`` sees each one
    as it finishes (to write it out at once)."""
    services, _app = local_services(settings)
    runner = PipelineRunner(services, index)
    slots = asyncio.Semaphore(max(1, concurrency))
    results: dict[str, Result] = {}

    async def one(topic: Topic) -> None:
        async with slots:
            result = (await runner.run(pipeline, Query(text=topic.text, qid=topic.qid))).result
        results[topic.qid] = result
        if on_result is not None:
            maybe = on_result(topic, result)
            if asyncio.iscoroutine(maybe):
                await maybe

    await asyncio.gather(*(one(t) for t in topics))
    return results
