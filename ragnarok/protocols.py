"""The small typed interfaces each role implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ragnarok.types import Query, Request


@runtime_checkable
class Retriever(Protocol):
    """Query in, ranked candidates (a rank_llm Request) out."""

    name: str

    def retrieve(self, query: Query, k: int) -> Request: ...
