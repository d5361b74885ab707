"""The passage-stage contract and what a stage may ask the services for (through the gateway)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.types import Candidate, Query, Request
from ragnarok.runtime.quoting import quote

Detail = dict[str, Any]


@dataclass
class StageContext:
    """What a passage stage may call: ``segments`` looks segments up by id prefix in the pipeline's index
    (the R service's ``POST /v1/segments``), ``rerank`` runs a reranker (``POST /v1/rerank``), ``write``
    has a generator write text for a task (the AG service's ``POST /v1/write``: body in, JSON out; cached)."""

    topic: Query
    segments: Callable[[list[str]], Awaitable[dict[str, Candidate]]]
    rerank: Callable[[str, Request, int], Awaitable[Request]]
    write: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class PassageStage(Protocol):
    name: str

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        """The new ranking (at most ``k`` candidates) and what the trace shows about the change."""
        ...


def number(arg: str | None, what: str, low: float, high: float, default: float, integer: bool = False) -> float:
    """A stage's numeric argument within ``[low, high]``, or a :class:`ComponentArgumentError` naming it."""
    if arg is None:
        return default
    try:  # ASCII only: int() and float() also read other scripts' digits ("１０", "١٠")
        value = float("nan") if not arg.isascii() else float(arg) if not integer else float(int(arg))
    except ValueError:
        value = float("nan")
    if not low <= value <= high:  # NaN fails too
        kind = "an integer" if integer else "a number"
        raise ComponentArgumentError(f"{what} takes {kind} from {low:g} to {high:g}, got {quote(arg, 40)}")
    return value


def text_chars(request: Request) -> int:
    return sum(len(c.doc.segment or "") for c in request.candidates)


def change(before: Request, after: Request) -> Detail:
    """Candidates dropped and added (by id), and the text length before and after."""
    old = {c.docid for c in before.candidates}
    new = {c.docid for c in after.candidates}
    return {
        "in": len(before.candidates),
        "out": len(after.candidates),
        "dropped": len(old - new),
        "added": len(new - old),
        "chars_before": text_chars(before),
        "chars_after": text_chars(after),
    }
