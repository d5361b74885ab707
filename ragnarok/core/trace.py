"""What the gateway and the stages it calls share: a stage's failure and a stage's trace.

Below the stages (core), so a stage that fails the way the gateway answers (``llmcompress``'s deadline, a 504)
raises :class:`StageError` without importing the gateway; :mod:`ragnarok.service.gateway` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class StageError(RuntimeError):
    """A stage failed: ``status`` is what the gateway answers (the stage's 4xx, 503 or 504, else 502)."""

    def __init__(self, stage: str, status: int, detail: Any, retry_after: str | None = None):
        self.stage, self.status, self.detail = stage, status, detail
        self.retry_after = retry_after  # the stage's Retry-After (a 503 while an index is being built)
        super().__init__(f"stage {stage!r} failed ({status}): {detail}")


@dataclass
class StageTrace:
    """One stage as the gateway saw it: ``latency_ms`` from the gateway's side (HTTP hop included),
    ``service_ms`` the services' own time from their ``Server-Timing`` headers (parallel calls: the longest)."""

    stage: str
    k: int
    latency_ms: float
    ranking: list[str] = field(default_factory=list)
    service_ms: float | None = None
    detail: dict[str, Any] | None = None  # query, passage and generation stages: what the stage did
