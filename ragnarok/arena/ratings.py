"""Ratings as pure functions over a list of battles (the raw battles are the truth; ratings are derived).

Conventions (as Chatbot Arena's): a battle is ``(a, b, winner)`` with winner ``"a"``, ``"b"``, ``"tie"`` or
``"bothbad"``; ties and both-bad votes count as half a win for each side (``include_bothbad=False`` drops
both-bad votes instead). Ratings are on the Elo scale: base 10, scale 400, initial 1000.

* :func:`online_elo`: sequential Elo with K (default 4), in battle order.
* :func:`bradley_terry`: maximum-likelihood Bradley–Terry scores (order-independent), fitted on the battles
  aggregated per (a, b) pair, with a tiny L2 term that fixes the scale's origin; mean rating 1000.
* :func:`bootstrap_bt`: 95 % intervals from ``rounds`` multinomial resamples of the battles (100 by default).
* :func:`leaderboard`: ratings, intervals, vote counts and a rank that respects the intervals
  (1 + the number of systems whose lower bound is above this one's upper bound).
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

SCALE, BASE, INIT = 400.0, 10.0, 1000.0
OUTCOMES = ("a", "b", "tie", "bothbad")


@dataclass(frozen=True)
class Battle:
    a: str
    b: str
    winner: str

    def __post_init__(self) -> None:
        if self.winner not in OUTCOMES:
            raise ValueError(f"winner must be one of {OUTCOMES}, got {self.winner!r}")
        if self.a == self.b:
            raise ValueError(f"a battle needs two different systems, got {self.a!r} twice")


def _score(winner: str) -> float:
    return 1.0 if winner == "a" else 0.0 if winner == "b" else 0.5


def _kept(battles: Iterable[Battle], include_bothbad: bool) -> list[Battle]:
    return [b for b in battles if include_bothbad or b.winner != "bothbad"]


def online_elo(battles: Sequence[Battle], k: float = 4.0, include_bothbad: bool = True) -> dict[str, float]:
    ratings: dict[str, float] = {}
    for battle in _kept(battles, include_bothbad):
        ra, rb = ratings.setdefault(battle.a, INIT), ratings.setdefault(battle.b, INIT)
        expected_a = 1.0 / (1.0 + BASE ** ((rb - ra) / SCALE))
        delta = k * (_score(battle.winner) - expected_a)
        ratings[battle.a], ratings[battle.b] = ra + delta, rb - delta
    return ratings


def _pairs(battles: Sequence[Battle], names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate to unique (i, j, score) rows with counts."""
    index = {n: i for i, n in enumerate(names)}
    counts = Counter((index[b.a], index[b.b], _score(b.winner)) for b in battles)
    rows = np.array([(i, j, s) for (i, j, s) in counts], dtype=float).reshape(-1, 3)
    return rows[:, :2].astype(int), rows[:, 2], np.array(list(counts.values()), dtype=float)


def _fit(pairs: np.ndarray, scores: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Weighted BT log-likelihood in natural units (ln), minimised with L-BFGS."""
    i, j = pairs[:, 0], pairs[:, 1]
    ridge = 1e-6 * weights.sum()

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        diff = theta[i] - theta[j]
        p = 1.0 / (1.0 + np.exp(-diff))
        eps = 1e-12
        loss = -np.sum(weights * (scores * np.log(p + eps) + (1 - scores) * np.log(1 - p + eps)))
        g_diff = weights * (p - scores)
        grad = np.bincount(i, g_diff, n) - np.bincount(j, g_diff, n)
        return loss + ridge * float(theta @ theta), grad + 2 * ridge * theta

    result = minimize(objective, np.zeros(n), jac=True, method="L-BFGS-B")
    theta = result.x - result.x.mean()
    return INIT + SCALE * theta / math.log(BASE)


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """L-BFGS-B on a few dozen parameters calls BLAS on tiny vectors: a BLAS thread pool only adds overhead
    (measured 3-20x slower on a busy 2-core machine), so fits run with one BLAS thread."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415 - optional (scikit-learn's dependency)
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def bradley_terry(battles: Sequence[Battle], include_bothbad: bool = True) -> dict[str, float]:
    kept = _kept(battles, include_bothbad)
    names = sorted({b.a for b in kept} | {b.b for b in kept})
    if not names:
        return {}
    pairs, scores, weights = _pairs(kept, names)
    with _one_blas_thread():
        return dict(zip(names, _fit(pairs, scores, weights, len(names)).tolist()))


def bootstrap_bt(battles: Sequence[Battle], rounds: int = 100, seed: int = 0,
                 include_bothbad: bool = True) -> dict[str, tuple[float, float]]:
    """95 % percentile intervals of BT ratings over ``rounds`` resamples (with replacement) of the battles."""
    kept = _kept(battles, include_bothbad)
    names = sorted({b.a for b in kept} | {b.b for b in kept})
    if not names:
        return {}
    pairs, scores, weights = _pairs(kept, names)
    rng = np.random.default_rng(seed)
    with _one_blas_thread():
        samples = np.array([
            _fit(pairs, scores, rng.multinomial(int(weights.sum()), weights / weights.sum()).astype(float),
                 len(names))
            for _ in range(rounds)
        ])
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    return {n: (float(lo), float(hi)) for n, lo, hi in zip(names, low, high)}


@dataclass(frozen=True)
class Row:
    name: str
    rank: int
    bt: float
    lower: float
    upper: float
    elo: float
    votes: int


def leaderboard(battles: Sequence[Battle], k: float = 4.0, rounds: int = 100, seed: int = 0,
                include_bothbad: bool = True) -> list[Row]:
    kept = _kept(battles, include_bothbad)
    bt = bradley_terry(kept)
    intervals = bootstrap_bt(kept, rounds, seed)
    elo = online_elo(kept, k)
    votes = Counter([b.a for b in kept] + [b.b for b in kept])
    rows = []
    for name in bt:
        lower, upper = intervals[name]
        rank = 1 + sum(1 for other in bt if intervals[other][0] > upper)
        rows.append(Row(name, rank, bt[name], lower, upper, elo[name], votes[name]))
    return sorted(rows, key=lambda r: (r.rank, -r.bt, r.name))


def win_rates(battles: Sequence[Battle], include_bothbad: bool = True) -> dict[str, dict[str, float]]:
    """Row system's share of wins over column system (ties count half), over their battles in either order."""
    wins: Counter[tuple[str, str]] = Counter()
    games: Counter[tuple[str, str]] = Counter()
    for b in _kept(battles, include_bothbad):
        s = _score(b.winner)
        wins[(b.a, b.b)] += s
        wins[(b.b, b.a)] += 1 - s
        games[(b.a, b.b)] += 1
        games[(b.b, b.a)] += 1
    names = sorted({x for pair in games for x in pair})
    return {r: {c: wins[(r, c)] / games[(r, c)] for c in names if games[(r, c)]} for r in names}
