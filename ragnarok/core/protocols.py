"""The small typed interfaces each role implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ragnarok.core.types import Candidate, PromptTemplate, Query, RagAnswer, Request


@runtime_checkable
class Retriever(Protocol):
    """Query in, ranked candidates (a rank_llm Request) out."""

    name: str

    def retrieve(self, query: Query, k: int) -> Request: ...


@runtime_checkable
class Generator(Protocol):
    """Topic and candidates in, a cited RAG answer out."""

    name: str

    def availability(self) -> str | None:
        """None when the generator can run here now; otherwise why not (no key, no server, no model)."""
        ...

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer: ...


@runtime_checkable
class Reranker(Protocol):
    """A ranking in, the top-k of a better ranking out (always a subset of the input candidates)."""

    name: str

    def availability(self) -> str | None: ...

    def rerank(self, request: Request, k: int) -> Request: ...
