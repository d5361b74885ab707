"""What rerankers share: the protocol, errors, and the bookkeeping of returning a reordered top-k."""

from __future__ import annotations

from ragnarok.core.protocols import Reranker
from ragnarok.core.types import Request
from ragnarok.runtime.redact import redact

__all__ = ["RerankError", "Reranker", "RerankerUnavailable", "reordered"]


class RerankError(RuntimeError):
    """A reranker failed: the API answers 502 (504 when ``timeout``) naming the reranker and the cause (redacted:
    no configured key value survives into a message, an answer or a log)."""

    def __init__(self, reranker: str, cause: str, timeout: bool = False):
        self.reranker, self.cause, self.timeout = reranker, redact(cause), timeout
        super().__init__(f"reranker {reranker!r} failed: {self.cause}")


class RerankerUnavailable(RuntimeError):
    """A reranker that cannot run here (no endpoint, no key, no rank_llm): 422 saying what to set."""


def reordered(request: Request, order: list[int], k: int, scores: list[float] | None = None) -> Request:
    """The candidates at ``order`` (indices into ``request.candidates``), cut to ``k``.

    Scores are ``scores[rank]`` when given, else they descend from ``len(order)`` so that the new ranking
    survives any later sort by score (and a TREC run file written from it).
    """
    n = len(order)
    out = []
    for rank, i in enumerate(order[: max(0, k)]):
        score = scores[rank] if scores is not None else float(n - rank)
        out.append(request.candidates[i].model_copy(update={"score": score}))
    return Request(query=request.query, candidates=out)
