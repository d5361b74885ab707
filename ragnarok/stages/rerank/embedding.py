"""CPU rerankers that run offline with a sentence-transformers model (all-MiniLM-L6-v2 by default).

* :class:`EmbeddingReranker`: cosine similarity of the query and each candidate's ``title + segment``.
* :class:`MMRReranker`: maximal marginal relevance (Carbonell & Goldstein, 1998): greedily pick the candidate
  maximising ``λ·sim(q, d) − (1 − λ)·max over picked p of sim(d, p)``; λ = 1 is the embedding ranking,
  lower λ trades relevance for diversity (overlapping segments of one document are the usual duplicates).

The encoder is shared with dense retrieval (one model per process) and loads on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ragnarok.core.types import Request
from ragnarok.stages.embed.encoder import Encoder
from ragnarok.stages.embed.vectors import text_vectors
from ragnarok.stages.rerank.base import reordered


class TooMuchWork(ValueError):
    """A CPU rerank over the per-request bound (413): checked before anything is encoded."""


def candidate_texts(request: Request) -> list[str]:
    """``title + "\\n" + segment`` of each candidate (what dense indexes encode too)."""
    return ["\n".join(p for p in (c.doc.title, c.doc.segment) if p) for c in request.candidates]


def check_work(request: Request, max_candidates: int, max_chars: int) -> None:
    """Refuse a rerank that would encode more than ``max_candidates`` texts or ``max_chars`` characters (the
    query and every candidate's text): :class:`TooMuchWork` naming the limit and its setting."""
    n = len(request.candidates)
    if n > max_candidates:
        raise TooMuchWork(
            f"{n:,} candidates; a CPU rerank takes at most {max_candidates:,} per request "
            "(RAGNAROK_CPU_RERANK_MAX_CANDIDATES)"
        )
    chars = len(request.query.text) + sum(len(c.doc.title or "") + len(c.doc.segment or "") for c in request.candidates)
    if chars > max_chars:
        raise TooMuchWork(
            f"{chars:,} characters of query and candidate text; a CPU rerank encodes at most "
            f"{max_chars:,} per request (RAGNAROK_CPU_RERANK_MAX_CHARS)"
        )


@dataclass
class EmbeddingReranker:
    """Candidates sorted by the cosine similarity of their embedding to the query's (ties keep input order)."""

    name: str = "embedding"
    model: str = "minilm"
    # a model directory a request named (allow_model_paths): its own encoder, dropped with this reranker from
    # the bounded cache of request-named models, rather than the process-wide shared one
    own_encoder: bool = False
    _encoder: Encoder | None = field(default=None, init=False, repr=False)

    def availability(self) -> str | None:
        from ragnarok.stages.embed.encoder import resolve_model  # noqa: PLC0415
        from ragnarok.stages.embed.errors import DenseIndexNotFoundError  # noqa: PLC0415

        try:
            resolve_model(self.model)
        except DenseIndexNotFoundError as exc:
            return str(exc)
        return None

    def similarities(self, request: Request) -> tuple[np.ndarray, np.ndarray]:
        """``(sim(q, d) per candidate, the candidates' normalised embeddings)``."""
        if self.own_encoder:
            self._encoder = self._encoder or Encoder(self.model)
        # the shared model: segments from the sentence store, queries and the rest cached once encoded
        encoder = self._encoder or text_vectors(self.model)
        q = encoder.encode([request.query.text], query=True)[0]
        docs = encoder.encode(candidate_texts(request))
        return docs @ q, docs

    def rerank(self, request: Request, k: int) -> Request:
        if not request.candidates or k <= 0:
            return Request(query=request.query, candidates=[])
        sims, _ = self.similarities(request)
        order = sorted(range(len(sims)), key=lambda i: (-sims[i], i))
        return reordered(request, order, k, [float(sims[i]) for i in order[:k]])


@dataclass
class MMRReranker(EmbeddingReranker):
    """Maximal marginal relevance over the same embeddings; scores descend with the selection order."""

    name: str = "mmr"
    lambda_: float = 0.7

    def __post_init__(self) -> None:
        if not 0.0 <= self.lambda_ <= 1.0:
            raise ValueError(f"MMR λ must be in [0, 1], got {self.lambda_}")

    def order(self, sims: np.ndarray, docs: np.ndarray, k: int) -> list[int]:
        """The first ``k`` picks of greedy MMR (ties go to the earlier candidate)."""
        n = len(sims)
        picked: list[int] = []
        remaining = np.ones(n, dtype=bool)
        redundancy = np.full(n, -np.inf)  # max similarity to anything picked so far
        while len(picked) < min(k, n):
            penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
            mmr = np.where(remaining, self.lambda_ * sims - (1 - self.lambda_) * penalty, -np.inf)
            best = int(np.argmax(mmr))  # first maximum: ties keep the input order
            picked.append(best)
            remaining[best] = False
            redundancy = np.maximum(redundancy, docs @ docs[best])
        return picked

    def rerank(self, request: Request, k: int) -> Request:
        if not request.candidates or k <= 0:
            return Request(query=request.query, candidates=[])
        sims, docs = self.similarities(request)
        # MMR values are not monotone along the selection; scores follow the selection order instead
        return reordered(request, self.order(sims, docs, k), k)
