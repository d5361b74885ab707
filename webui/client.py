"""The arena's REST client: it runs pipelines through the gateway like any other client.

``POST {base}/rag`` with ``segments: true`` answers a topic with a pipeline and returns the cited segments'
title, text and URL beside the answer. The base URL is a setting; inside the API the same code
runs over ``httpx.ASGITransport`` into the app itself (one code path, two transports).

:meth:`RagClient.stream` asks for the answer as it is written (``"stream": true``: Server-Sent Events, read
with httpx-sse); in process it goes through :class:`webui.asgi_stream.StreamingASGITransport`, which hands each
event over as the app sends it (``httpx.ASGITransport`` would hand the whole stream over at its end).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractContextManager, aclosing, nullcontext
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from ragnarok.arena.pool import PipelineId, free_generators
from ragnarok.runtime.activity import REQUESTS
from ragnarok.stages.generate.streaming import StreamEvent
from webui.asgi_stream import StreamingASGITransport


@dataclass
class PaneResult:
    """One side of a battle: the raw ``/rag`` answer and its segments, or the error that stopped it."""

    answer: dict[str, Any] | None = None
    segments: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.answer is not None


def _detail(response: httpx.Response) -> str:
    try:
        detail: Any = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text[:500]
    if isinstance(detail, dict):
        error = detail.get("error", detail)
        if isinstance(error, dict):
            error = error.get("message") or error.get("error") or error
        detail = f"{detail.get('stage', 'pipeline')}: {error}"
    return f"HTTP {response.status_code}: {detail}"


class RagClient:
    def __init__(
        self,
        base_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 300.0,
        index: str | None = None,
        api_key: str | None = None,
    ):
        self.base_url, self.transport, self.timeout_s, self.index = base_url, transport, timeout_s, index
        # a gateway with keys (RAGNAROK_AUTH=keys): the arena's key, sent as a bearer token on every request
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    @property
    def in_process(self) -> bool:
        """Whether the services are this process's own app (``httpx.ASGITransport``): its requests then run as
        the principal in the caller's context (:func:`ragnarok.auth.principal.acting_as`)."""
        return isinstance(self.transport, httpx.ASGITransport)

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url, transport=self.transport, timeout=self.timeout_s, headers=self.headers
        )

    def _work(self) -> AbstractContextManager[None]:
        """In process, an answer is work background builds give way to (:mod:`ragnarok.runtime.activity`): the
        battle's requests run in Gradio's queue, outside the HTTP request the server counted."""
        return REQUESTS.working() if self.in_process else nullcontext()

    async def run(self, pipeline: PipelineId, topic: str, topic_id: str = "") -> PaneResult:
        """Answer ``topic`` with ``pipeline``; a failure becomes ``PaneResult.error`` (never an exception)."""
        try:
            with self._work():
                async with self._client() as client:
                    answer = await self._rag(client, pipeline.spec, topic, topic_id)
        except _Failed as exc:
            return PaneResult(error=str(exc))
        except httpx.TimeoutException:
            return PaneResult(error=f"timed out after {self.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return PaneResult(error=self._unreachable(exc))
        return _result(answer)

    def _unreachable(self, exc: Exception) -> str:
        return f"cannot reach {self.base_url}: {exc.__class__.__name__}: {exc}"

    def _stream_client(self) -> httpx.AsyncClient:
        transport = self.transport
        if isinstance(transport, httpx.ASGITransport) and not isinstance(transport, StreamingASGITransport):
            transport = StreamingASGITransport(
                transport.app, transport.raise_app_exceptions, transport.root_path, transport.client
            )
        return httpx.AsyncClient(
            base_url=self.base_url, transport=transport, timeout=self.timeout_s, headers=self.headers
        )

    async def stream(self, pipeline: PipelineId, topic: str, topic_id: str = "") -> AsyncIterator[StreamEvent]:
        """:meth:`_stream`, as work background builds give way to when in process."""
        with self._work():
            async with aclosing(self._stream(pipeline, topic, topic_id)) as events:
                async for event in events:
                    yield event

    async def _stream(self, pipeline: PipelineId, topic: str, topic_id: str = "") -> AsyncGenerator[StreamEvent, None]:
        """Answer ``topic`` with ``pipeline`` as it is written: ``POST /rag`` with ``"stream": true``'s events
        (``stage``, ``references``, ``delta``, ``sentence``) as they come, then one last event: ``done`` whose
        data is the :class:`PaneResult` :meth:`run` returns, or ``error`` whose data is why it failed (the
        message :meth:`run` would give). It never raises (but for cancellation). Over the network the whole
        stream takes at most ``timeout_s``. A gateway that does not stream is still answered: one that refuses
        the field (422 naming ``stream``) is asked again without it, one that ignores it gives its answer
        whole (``done`` alone)."""
        body = {
            "topic": topic,
            "topic_id": topic_id,
            "pipeline": pipeline.spec,
            "index": self.index,
            "segments": True,
            "stream": True,
        }
        deadline = None if self.in_process else time.monotonic() + self.timeout_s
        try:
            async with self._stream_client() as client, aconnect_sse(client, "POST", "/rag", json=body) as source:
                response = source.response
                if response.status_code >= 400:
                    await response.aread()
                    if response.status_code == 422 and '"stream"' in response.text:  # an older gateway
                        result = await self.run(pipeline, topic, topic_id)
                        yield StreamEvent("done", result) if result.ok else StreamEvent("error", result.error)
                    else:
                        yield StreamEvent("error", _detail(response))
                    return
                if response.headers.get("content-type", "").startswith("application/json"):
                    await response.aread()  # a gateway that ignored `stream`: the whole answer at once
                    yield StreamEvent("done", _result(response.json()))
                    return
                events = source.aiter_sse()
                try:
                    while True:
                        left = None if deadline is None else deadline - time.monotonic()
                        if left is not None and left <= 0:
                            raise httpx.ReadTimeout("the stream's deadline passed")
                        try:
                            sse = await asyncio.wait_for(anext(events), left)
                        except StopAsyncIteration:
                            break
                        except asyncio.TimeoutError:
                            raise httpx.ReadTimeout("the stream's deadline passed") from None
                        data = json.loads(sse.data)
                        if sse.event == "done":
                            yield StreamEvent("done", _result(data))
                            return
                        if sse.event == "error":
                            yield StreamEvent("error", _event_error(data))
                            return
                        yield StreamEvent(sse.event, data)
                finally:
                    await events.aclose()
            yield StreamEvent("error", "the answer's stream ended before the answer")
        except httpx.TimeoutException:
            yield StreamEvent("error", f"timed out after {self.timeout_s:g} s")
        except (httpx.HTTPError, SSEError) as exc:
            yield StreamEvent("error", self._unreachable(exc))
        except (ValueError, TypeError, AttributeError) as exc:  # an event that is not what /rag sends
            yield StreamEvent("error", f"the answer's stream is malformed: {exc.__class__.__name__}: {exc}")

    async def _rag(self, client: httpx.AsyncClient, spec: str, topic: str, topic_id: str) -> dict[str, Any]:
        body = {"topic": topic, "topic_id": topic_id, "pipeline": spec, "index": self.index, "segments": True}
        response = await client.post("/rag", json=body)
        if response.status_code >= 400:
            raise _Failed(_detail(response))
        return response.json()

    async def get(self, path: str) -> Any:
        async with self._client() as client:
            response = await client.get(path)
        if response.status_code >= 400:
            raise RuntimeError(f"GET {self.base_url}{path}: {_detail(response)}")
        return response.json()

    async def offline_components(self, index: str) -> tuple[list[str], list[str]]:
        """Available retrievers on ``index`` and the available generators that cost nothing
        (:func:`ragnarok.arena.pool.free_generators`), as the services describe them (a retriever whose index
        is still building — ``status: building`` — is not available yet)."""
        retrievers, generators = await asyncio.gather(self.get("/v1/retrievers"), self.get("/v1/generators"))
        return (
            [r["name"] for r in retrievers if r["available"] and r["index"] == index and r.get("status") != "building"],
            free_generators(generators),
        )


class _Failed(RuntimeError):
    pass


def _result(answer: dict[str, Any]) -> PaneResult:
    """A ``/rag`` body (with ``segments``) as a pane: the answer, and the segments it cites apart."""
    segments = answer.pop("segments", None) or {}
    answer.pop("spend", None)  # a streamed answer's `done` says what it spent: not part of the answer
    cited = {ref: segments.get(ref, {}) for ref in answer.get("references", [])}
    return PaneResult(answer=answer, segments=cited)


def _event_error(data: Any) -> str:
    """A streamed ``error`` event (``stage``, ``status``, ``detail``) as :func:`_detail` words an error
    answer."""
    if not isinstance(data, dict):
        return f"the answer failed: {data}"
    detail = data.get("detail")
    if isinstance(detail, dict):
        detail = detail.get("error") or detail.get("cause") or detail.get("message") or detail
        if isinstance(detail, dict):
            detail = detail.get("message") or detail.get("error") or detail
    return f"HTTP {data.get('status', 502)}: {data.get('stage', 'pipeline')}: {detail}"
