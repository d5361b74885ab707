"""The gateway's calls to the R and AG services, with the standardized JSON: over HTTP to the services' URLs
(a distributed deployment), or, when they run in the gateway's own process, called directly.

A direct call gives what the route answers over HTTP (retrieval: the same bytes; generation: the same answer
and notes), and a failure the same :class:`StageError` (status and detail), without HTTP's framing and the
middleware an in-process request passes through (1.7 ms or more a call, quiet: docs/BENCHMARKS.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ragnarok.core.trace import StageError
from ragnarok.core.types import Query, RagAnswer, Request
from ragnarok.runtime import logs, metrics
from ragnarok.runtime.quoting import shorten

log = logging.getLogger(__name__)
T = TypeVar("T")
_JSON = {"content-type": "application/json"}
#: ``POST /v1/retrieve`` in process: (stage, the body's fields) in, the route's JSON answer out, or the
#: :class:`StageError` the route's error answer makes.
LocalRetrieve = Callable[[str, dict[str, Any]], Awaitable[bytes]]
#: ``POST /v1/generate`` (``notes: true``) in process: (stage, topic, candidates, generator, template) in, the
#: answer (its ``notes`` attribute: what post-processing did) out, or the :class:`StageError` the route's
#: error answer makes.
LocalGenerate = Callable[[str, Query, Request, str, "str | None"], Awaitable[RagAnswer]]


def server_time_ms(headers: Any) -> float | None:
    """The ``app;dur=`` figure of a ``Server-Timing`` header (set by the API's middleware), if any."""
    for part in (headers.get("server-timing") or "").split(","):
        name, _, params = part.strip().partition(";")
        if name == "app" and params.startswith("dur="):
            try:
                return float(params[4:])
            except ValueError:
                return None
    return None


def json_body(fields: dict[str, Any], **models: BaseModel) -> bytes:
    """``fields`` as a JSON object with each model spliced in, serialised once by pydantic-core (the
    candidates' text is most of every body; a ``model_dump`` + ``json.dumps`` round costs several ms)."""
    parts = [json.dumps(fields)[1:-1]] if fields else []
    parts += [f"{json.dumps(key)}: {model.model_dump_json(exclude_none=True)}" for key, model in models.items()]
    return ("{" + ", ".join(parts) + "}").encode()


@dataclass
class Services:
    """Clients for the R and AG services (the same client when one app serves both), and the services
    themselves when they run in this process."""

    retrieval: httpx.AsyncClient
    generation: httpx.AsyncClient
    #: The AG service when it runs in this process (streams are read from it directly: httpx's in-process
    #: transport would hand over a streamed body only once it is complete)
    local_generation: Any = None
    local_retrieve: LocalRetrieve | None = None
    local_generate: LocalGenerate | None = None

    async def retrieve(self, stage: str, fields: dict[str, Any]) -> tuple[bytes, float | None]:
        """The R service's answer to ``POST /v1/retrieve`` with ``fields``, and its own time in ms."""
        if self.local_retrieve is not None:
            start, local = time.perf_counter(), self.local_retrieve
            data = await self._observed(stage, lambda: local(stage, fields))
            return data, (time.perf_counter() - start) * 1000
        return await self.post(self.retrieval, stage, "/v1/retrieve", json_body(fields))

    async def generate(
        self, stage: str, topic: Query, top: Request, generator: str, template: str | None, body: bytes
    ) -> tuple[RagAnswer, Any, float | None]:
        """The AG service's answer to ``body`` (``POST /v1/generate``), its notes and its own time in ms; in
        process, called directly with the same topic, candidates, generator and template (never twice: a
        generator's call may cost money)."""
        if self.local_generate is not None:
            start, local = time.perf_counter(), self.local_generate
            answer = await self._observed(stage, lambda: local(stage, topic, top, generator, template))
            notes = getattr(answer, "notes", None)
            return RagAnswer(**answer.model_dump()), notes, (time.perf_counter() - start) * 1000
        data, ms = await self.post(self.generation, stage, "/v1/generate", body)
        return RagAnswer.model_validate_json(data), json.loads(data).get("notes"), ms

    async def post(self, client: httpx.AsyncClient, stage: str, path: str, body: bytes) -> tuple[bytes, float | None]:
        """The stage's JSON answer (raw) and its own time in ms (None when its service does not say)."""
        return await self._observed(stage, lambda: self._post(client, stage, path, body))

    async def _observed(self, stage: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call()`` timed as the stage's (its log lines name the stage and the request id); a stage that fails
        with a 5xx is logged (stage, status, latency, cause)."""
        start = time.perf_counter()
        token = logs.stage_var.set(stage)
        try:
            answer = await call()
        except StageError as exc:
            metrics.observe_stage(stage, time.perf_counter() - start, exc.status)
            if exc.status >= 500:
                log.warning(
                    "stage %r failed with HTTP %d after %.0f ms: %s",
                    stage,
                    exc.status,
                    (time.perf_counter() - start) * 1000,
                    shorten(json.dumps(exc.detail, default=str), 600),
                )
            raise
        finally:
            logs.stage_var.reset(token)
        metrics.observe_stage(stage, time.perf_counter() - start)
        return answer

    async def _post(self, client: httpx.AsyncClient, stage: str, path: str, body: bytes) -> tuple[bytes, float | None]:
        try:
            response = await client.post(path, content=body, headers={**_JSON, **logs.outgoing_headers(stage)})
        except httpx.TimeoutException:
            raise StageError(stage, 504, "timed out") from None
        except httpx.HTTPError as exc:
            raise StageError(stage, 502, f"cannot reach {client.base_url}: {exc}") from None
        if response.status_code >= 400:
            raise stage_error(stage, response)
        return response.content, server_time_ms(response.headers)


def stage_error(stage: str, response: httpx.Response) -> StageError:
    """A stage's error answer (its body read) as the :class:`StageError` the gateway answers with."""
    try:
        payload = response.json()
        detail = payload.get("detail", response.text) if isinstance(payload, dict) else response.text[:500]
    except ValueError:
        detail = response.text[:500]
    if response.status_code == 422 and isinstance(detail, list):
        # a validation error of a body the gateway built itself: our fault, not the client's
        return StageError(
            stage,
            502,
            "internal error: the stage refused the request the gateway built: " + shorten(json.dumps(detail), 300),
        )
    return stage_failure(stage, response.status_code, detail, response.headers.get("retry-after"))


def stage_failure(stage: str, status: int, detail: Any, retry_after: str | None = None) -> StageError:
    """A stage's error answer (``status``, ``detail``) as the gateway passes it on: a 4xx, a 503 (a missing
    index: the detail says how to build it) and a 504 as they are, any other 5xx as a 502."""
    return StageError(stage, status if status < 500 or status in (503, 504) else 502, detail, retry_after)
