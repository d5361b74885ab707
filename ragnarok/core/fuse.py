"""Fusion of rankings, as pure functions over ``{docid: score}`` maps.

RRF (Cormack et al., 2009), and AutoRAG's convex combination (min-max normalised) and DBSF (3-sigma
normalised). Ties are broken by docid so fused rankings are deterministic, and fused scores are always finite
whatever the inputs (bounded weights, non-finite scores clamped, normalisation that cannot overflow).

Design notes: docs/internals/core.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

Ranking = dict[str, float]
RRF_K = 60
MAX_WEIGHT = 1e6  # weights of cc and dbsf are finite numbers from 0 to this


def ranked(run: Ranking) -> list[tuple[str, float]]:
    """``run`` sorted by score (descending), ties by docid."""
    return sorted(run.items(), key=lambda item: (-item[1], item[0]))


def rrf(runs: Sequence[Ranking], k: int = RRF_K, depth: int | None = None) -> Ranking:
    fused: Ranking = {}
    for run in runs:
        for rank, (docid, _) in enumerate(ranked(run)[:depth], start=1):
            fused[docid] = fused.get(docid, 0.0) + 1.0 / (k + rank)
    return fused


def _scaled(run: Ranking) -> Ranking:
    """``run`` with finite scores (see the module docstring) and, when they are huge, divided by their largest
    magnitude (so that differences and sums of scores cannot overflow)."""
    finite = [s for s in run.values() if math.isfinite(s)]
    if len(finite) < len(run):
        high, low = (max(finite), min(finite)) if finite else (0.0, 0.0)
        run = {d: s if math.isfinite(s) else (high if s > 0 else low) for d, s in run.items()}
    top = max((abs(s) for s in run.values()), default=0.0)
    return {d: s / top for d, s in run.items()} if top > 1e150 else run


def minmax(run: Ranking) -> Ranking:
    if not run:
        return {}
    run = _scaled(run)
    low, high = min(run.values()), max(run.values())
    if high == low:
        return {d: 1.0 for d in run}
    return {d: (s - low) / (high - low) for d, s in run.items()}


def three_sigma(run: Ranking) -> Ranking:
    if not run:
        return {}
    run = _scaled(run)
    mu, sigma = statistics.fmean(run.values()), statistics.pstdev(run.values())
    if sigma == 0:
        return {d: 0.5 for d in run}
    return {d: (s - (mu - 3 * sigma)) / (6 * sigma) for d, s in run.items()}


def _combine(runs: Sequence[Ranking], weights: Sequence[float] | None, norm: Callable[[Ranking], Ranking]) -> Ranking:
    weights = list(weights) if weights is not None else [1.0 / len(runs)] * len(runs)
    if len(weights) != len(runs):
        raise ValueError(f"{len(runs)} rankings but {len(weights)} weights")
    if not all(math.isfinite(w) and 0 <= w <= MAX_WEIGHT for w in weights):
        raise ValueError(f"weights must be finite numbers from 0 to {MAX_WEIGHT:g}, got {weights}")
    fused: Ranking = {}
    for weight, run in zip(weights, runs):
        for docid, score in norm(run).items():
            fused[docid] = fused.get(docid, 0.0) + weight * score
    return fused


def cc(runs: Sequence[Ranking], weights: Sequence[float] | None = None) -> Ranking:
    """Convex combination of min-max normalised scores (equal weights by default)."""
    return _combine(runs, weights, minmax)


def dbsf(runs: Sequence[Ranking], weights: Sequence[float] | None = None) -> Ranking:
    """Convex combination of 3-sigma normalised scores (equal weights by default)."""
    return _combine(runs, weights, three_sigma)


FUSIONS: dict[str, Callable[..., Ranking]] = {"rrf": rrf, "cc": cc, "dbsf": dbsf}
