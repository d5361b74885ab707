"""The gateway's streamed half: :func:`stream_pipeline`, :meth:`ragnarok.service.gateway.PipelineRunner.run`
streamed (above the gateway: it drives a runner; the runner knows nothing of it).

A ``stage`` event as each stage before the generator finishes, then the generator's own events (``references``,
``delta``, ``sentence``) as it writes, then ``stage`` for the generator and ``done`` with the
:class:`~ragnarok.service.gateway.PipelineRun`. The AG service in this process is read directly (httpx's in-process
transport would hand a streamed body over only once complete); a remote one (``RAGNAROK_GENERATION_URL``) over
HTTP as Server-Sent Events, its events passed on as they come.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from ragnarok.core.spec import Pipeline
from ragnarok.core.types import Query, RagAnswer, Request
from ragnarok.runtime import logs, metrics
from ragnarok.service.gateway import GENERATION_K, PipelineRun, PipelineRunner, StageError, StageTrace
from ragnarok.service.services import _JSON, stage_error
from ragnarok.stages.generate.base import GenerationError, GeneratorUnavailable
from ragnarok.stages.generate.streaming import StreamEvent


async def stream_pipeline(runner: PipelineRunner, pipeline: Pipeline, topic: Query) -> AsyncIterator[StreamEvent]:
    """:meth:`run`, streamed (:mod:`ragnarok.stages.generate.streaming`): a ``stage`` event as each stage
    finishes (``stage``, ``latency_ms``, ``k_in``, ``k_out``), the generator's events as it writes, and
    ``done`` with the :class:`PipelineRun`. ``runner.stage`` names the stage running (for an error event)."""
    traces: list[StageTrace] = []
    request, k_in = None, 0
    async for item in runner.ranking(pipeline, topic):
        if isinstance(item, StageTrace):
            traces.append(item)
            yield StreamEvent("stage", stage_event(item, k_in))
            k_in = len(item.ranking)
        else:
            request = item
    assert request is not None and pipeline.generate is not None
    gen = pipeline.generate
    runner.stage = str(gen)
    start = time.perf_counter()
    top = request.model_copy(update={"candidates": request.candidates[:GENERATION_K]})
    source = (
        _stream_local(runner, topic, top, gen)
        if runner.services.local_generation is not None
        else _stream_remote(runner, topic, top, gen)
    )
    try:
        async for event in source:
            if event.event != "done":
                yield event
                continue
            answer, notes = event.data
            trace = StageTrace(
                str(gen), GENERATION_K, (time.perf_counter() - start) * 1000, answer.references, None, notes
            )
            traces.append(trace)
            metrics.observe_stage(f"generate {gen}", time.perf_counter() - start)
            yield StreamEvent("stage", stage_event(trace, len(top.candidates)))
            yield StreamEvent("done", PipelineRun(answer, top, traces))
    except (StageError, GenerationError, GeneratorUnavailable) as exc:  # counted as a plain /rag's failed stage
        status = (
            exc.status
            if isinstance(exc, StageError)
            else 422
            if isinstance(exc, GeneratorUnavailable)
            else 504
            if exc.timeout
            else 502
        )  # what the API answers for it (api.errors)
        metrics.observe_stage(f"generate {gen}", time.perf_counter() - start, status)
        raise
    finally:
        await source.aclose()


async def _stream_local(runner: PipelineRunner, topic: Query, top: Request, gen: Any) -> AsyncIterator[StreamEvent]:
    events = runner.services.local_generation.astream(topic, top, gen.name, gen.template, GENERATION_K)
    try:
        async for event in events:
            if event.event == "done":
                answer = RagAnswer(**event.data.model_dump())
                event = StreamEvent("done", (answer, getattr(event.data, "notes", None)))
            yield event
    finally:
        await events.aclose()


async def _stream_remote(runner: PipelineRunner, topic: Query, top: Request, gen: Any) -> AsyncIterator[StreamEvent]:
    """The AG service's stream over HTTP (``RAGNAROK_GENERATION_URL``), its events passed on."""
    stage = f"generate {gen}"
    client = runner.services.generation
    headers = {**_JSON, **logs.outgoing_headers(stage)}
    try:
        async with aconnect_sse(
            client,
            "POST",
            "/v1/generate",
            content=runner._generate_body(topic, top, gen, True),
            headers=headers,
            timeout=httpx.Timeout(client.timeout.connect, read=None),
        ) as source:
            if source.response.status_code >= 400:
                await source.response.aread()
                raise stage_error(stage, source.response)
            async for sse in source.aiter_sse():
                data = json.loads(sse.data)
                if sse.event == "done":
                    yield StreamEvent("done", (RagAnswer.model_validate(data), data.get("notes")))
                elif sse.event == "error":  # the AG service's: its status, message and deadline pass on
                    error = StageError(stage, int(data.get("status", 502)), data.get("detail"))
                    error.deadline = data.get("deadline")  # type: ignore[attr-defined]
                    raise error
                else:
                    yield StreamEvent(sse.event, data)
    except httpx.TimeoutException:
        raise StageError(stage, 504, "timed out") from None
    except (httpx.HTTPError, SSEError) as exc:
        raise StageError(stage, 502, f"cannot reach {client.base_url}: {exc}") from None


def stage_event(trace: StageTrace, k_in: int) -> dict[str, Any]:
    """A ``stage`` event's data: the stage, its latency, the candidates in and out."""
    return {"stage": trace.stage, "latency_ms": round(trace.latency_ms, 3), "k_in": k_in, "k_out": len(trace.ranking)}
