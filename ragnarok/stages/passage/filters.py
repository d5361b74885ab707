"""Passage stages that keep, drop or reorder candidates without changing their text: near-duplicate
collapse, cutoffs (score threshold, score percentile, embedding similarity) and long-context reorder.

Cutoffs keep at least one candidate (the best), so the generator always has something to ground on; a
cutoff keeps the input's order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.types import Candidate, Request
from ragnarok.runtime.quoting import quote
from ragnarok.stages.passage.base import Detail, StageContext, change, number
from ragnarok.stages.passage.spans import piece

#: Pairs of shingle sets compared at most per request (beyond it only same-document overlap is checked).
MAX_PAIRS = 200_000


def _shingles(text: str, n: int = 3) -> set[str]:
    words = re.findall(r"\w+", text.lower())
    return {" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))} if words else set()


@dataclass
class Collapse:
    """``collapse:T@k``: a candidate is dropped when a better-ranked kept one is the same text: a window of
    the same document that overlaps it (by offsets: MS MARCO V2.1 windows overlap by design), or any text
    whose word-trigram Jaccard similarity with it is at least T (default 0.8)."""

    name: str = "collapse"
    threshold: float = 0.8

    @classmethod
    def create(cls, arg: str | None = None) -> Collapse:
        return cls(threshold=number(arg, "collapse:T", 0.0, 1.0, 0.8))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        kept: list[Candidate] = []
        spans: list[tuple[str, int, int]] = []
        sets: list[set[str]] = []
        pairs, overlap, similar = 0, 0, 0
        for c in request.candidates:
            if len(kept) == k:
                break
            p = piece(c)
            if p is not None and any(b == p.base and s < p.end and p.start < e for b, s, e in spans):
                overlap += 1
                continue
            shingles = _shingles(c.doc.segment or "")
            if pairs + len(sets) <= MAX_PAIRS:
                pairs += len(sets)
                if shingles and any(len(shingles & o) >= self.threshold * len(shingles | o) for o in sets if o):
                    similar += 1
                    continue
            kept.append(c)
            sets.append(shingles)
            if p is not None:
                spans.append((p.base, p.start, p.end))
        out = request.model_copy(update={"candidates": kept})
        return out, {**change(request, out), "overlapping": overlap, "similar": similar}


@dataclass
class Cutoff:
    """``cutoff:T@k``: keeps candidates whose score, min-max normalised over the input ranking, is at least
    T (0..1; scores of BM25, dense and fused rankings differ in scale, so the threshold is relative)."""

    name: str = "cutoff"
    threshold: float = 0.5

    @classmethod
    def create(cls, arg: str | None = None) -> Cutoff:
        return cls(threshold=number(arg, "cutoff:T", 0.0, 1.0, 0.5))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        scores = [c.score for c in request.candidates if math.isfinite(c.score)]
        if not scores:
            out = request.model_copy(update={"candidates": request.candidates[:k]})
            return out, change(request, out)
        low, high = min(scores), max(scores)
        keep = [c for c in request.candidates if high == low or (c.score - low) / (high - low) >= self.threshold]
        out = request.model_copy(update={"candidates": (keep or request.candidates[:1])[:k]})
        return out, {**change(request, out), "threshold_score": low + self.threshold * (high - low)}


@dataclass
class Percentile:
    """``percentile:P@k``: keeps candidates whose score is at or above the P-th percentile of the input's
    scores (``percentile:75`` keeps the best quarter)."""

    name: str = "percentile"
    percent: float = 50.0

    @classmethod
    def create(cls, arg: str | None = None) -> Percentile:
        return cls(percent=number(arg, "percentile:P", 0.0, 100.0, 50.0))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        scores = sorted(c.score for c in request.candidates)
        if not scores:
            return request, change(request, request)
        # nearest-rank percentile
        rank = max(1, math.ceil(self.percent / 100 * len(scores)))
        bar = scores[rank - 1] if self.percent > 0 else scores[0]
        keep = [c for c in request.candidates if c.score >= bar]
        out = request.model_copy(update={"candidates": (keep or request.candidates[:1])[:k]})
        return out, {**change(request, out), "threshold_score": bar}


@dataclass
class SimilarityCutoff:
    """``simcutoff:T@k``: keeps candidates whose MiniLM embedding has cosine similarity at least T (-1..1,
    default 0.3) with the query's (scored by the R service's ``embedding`` reranker)."""

    name: str = "simcutoff"
    threshold: float = 0.3

    @classmethod
    def create(cls, arg: str | None = None) -> SimilarityCutoff:
        return cls(threshold=number(arg, "simcutoff:T", -1.0, 1.0, 0.3))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        if not request.candidates:
            return request, change(request, request)
        scored = await ctx.rerank("embedding", request, len(request.candidates))
        similarity = {c.docid: c.score for c in scored.candidates}
        keep = [c for c in request.candidates if similarity.get(c.docid, -2.0) >= self.threshold]
        out = request.model_copy(update={"candidates": (keep or request.candidates[:1])[:k]})
        return out, change(request, out)


@dataclass
class Reorder:
    """``reorder@k``: long-context reorder (Liu et al., "Lost in the middle"): of the top k, the best
    candidates go to both ends of the prompt and the weakest to the middle (ranks 1, 3, 5, … then …, 6, 4,
    2). Scores are kept, so a run file sorted by score does not change."""

    name: str = "reorder"

    @classmethod
    def create(cls, arg: str | None = None) -> Reorder:
        if arg is not None:
            raise ComponentArgumentError(f"reorder takes no argument, got {quote(arg, 40)}")
        return cls()

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        top = request.candidates[:k]
        order = top[0::2] + top[1::2][::-1]
        out = request.model_copy(update={"candidates": order})
        return out, change(request, out)
