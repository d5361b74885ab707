"""The arena's REST client: it runs pipelines through the gateway like any other client.

``POST {base}/rag`` with ``segments: true`` answers a topic with a pipeline and returns the cited segments'
title, text and URL beside the answer. The base URL is a setting; inside the API the same code
runs over ``httpx.ASGITransport`` into the app itself (one code path, two transports).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from ragnarok.arena.pool import PipelineId, free_generators


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
        return httpx.AsyncClient(base_url=self.base_url, transport=self.transport, timeout=self.timeout_s,
                                 headers=self.headers)

    async def run(self, pipeline: PipelineId, topic: str, topic_id: str = "") -> PaneResult:
        """Answer ``topic`` with ``pipeline``; a failure becomes ``PaneResult.error`` (never an exception)."""
        try:
            async with self._client() as client:
                answer = await self._rag(client, pipeline.spec, topic, topic_id)
        except _Failed as exc:
            return PaneResult(error=str(exc))
        except httpx.TimeoutException:
            return PaneResult(error=f"timed out after {self.timeout_s:g} s")
        except httpx.HTTPError as exc:
            return PaneResult(error=f"cannot reach {self.base_url}: {exc.__class__.__name__}: {exc}")
        segments = answer.pop("segments", None) or {}
        cited = {ref: segments.get(ref, {}) for ref in answer.get("references", [])}
        return PaneResult(answer=answer, segments=cited)

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
            [r["name"] for r in retrievers
             if r["available"] and r["index"] == index and r.get("status") != "building"],
            free_generators(generators),
        )


class _Failed(RuntimeError):
    pass
