"""Ratings as pure functions over a list of battles (the raw battles are the truth; ratings are derived).

Chatbot Arena's conventions and methods: online Elo, Bradley-Terry fits, bootstrap intervals, a leaderboard
whose ranks respect the intervals (with provisional entries for systems with few votes), and style control
that takes answer length and citation count out of a system's rating. Keeping them pure means a leaderboard
can always be recomputed from the vote log.

Design notes: docs/internals/arena.md.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

SCALE, BASE, INIT = 400.0, 10.0, 1000.0
#: How strongly a provisional system's rating is shrunk towards INIT: as many tied games against an INIT system.
PRIOR_GAMES = 2.0
OUTCOMES = ("a", "b", "tie", "bothbad")


#: The style covariates, in the order of :attr:`Battle.style_a` / :attr:`Battle.style_b`.
STYLE_FEATURES = ("words", "citations")
#: The style-controlled fit's L2 penalty, FastChat's ``reg`` (``fastchat/serve/monitor/rating_systems.py``):
#: ``STYLE_REG / 2`` times the squared norm of the ratings and the coefficients, added to the summed log loss.
#: It keeps the fit bounded when a style feature goes with a group of systems (length with the generator).
STYLE_REG = 0.5


@dataclass(frozen=True)
class Battle:
    a: str
    b: str
    winner: str
    #: each side's style features (:data:`STYLE_FEATURES`), when known
    style_a: tuple[float, ...] | None = None
    style_b: tuple[float, ...] | None = None

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


def _fit(
    pairs: np.ndarray, scores: np.ndarray, weights: np.ndarray, n: int, start: np.ndarray | None = None
) -> np.ndarray:
    """Weighted BT log-likelihood in natural units (ln), minimised with L-BFGS (from ``start``, natural units:
    a bootstrap resample starts from the full fit, which takes a fraction of the iterations)."""
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

    result = minimize(objective, np.zeros(n) if start is None else start, jac=True, method="L-BFGS-B")
    theta = result.x - result.x.mean()
    return INIT + SCALE * theta / math.log(BASE)


def _natural(ratings: np.ndarray) -> np.ndarray:
    """Ratings on the Elo scale back to the fit's natural units (the inverse of :func:`_fit`'s last step)."""
    return (ratings - INIT) * math.log(BASE) / SCALE


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """L-BFGS-B on a few dozen parameters calls BLAS on tiny vectors: a BLAS thread pool only adds overhead
    (measured 3-20x slower on a busy 2-core machine), so fits run with one BLAS thread."""
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

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


def bootstrap_bt(
    battles: Sequence[Battle], rounds: int = 100, seed: int = 0, include_bothbad: bool = True
) -> dict[str, tuple[float, float]]:
    """95 % percentile intervals of BT ratings over ``rounds`` resamples (with replacement) of the battles."""
    kept = _kept(battles, include_bothbad)
    names = sorted({b.a for b in kept} | {b.b for b in kept})
    if not names:
        return {}
    pairs, scores, weights = _pairs(kept, names)
    rng = np.random.default_rng(seed)
    with _one_blas_thread():
        start = _natural(_fit(pairs, scores, weights, len(names)))
        samples = np.array(
            [
                _fit(
                    pairs,
                    scores,
                    rng.multinomial(int(weights.sum()), weights / weights.sum()).astype(float),
                    len(names),
                    start,
                )
                for _ in range(rounds)
            ]
        )
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    return {n: (float(lo), float(hi)) for n, lo, hi in zip(names, low, high)}


def style_answer(answer: dict | None) -> tuple[float, ...] | None:
    """A ``/rag`` answer's style features: its length in words (``response_length``) and its number of
    citation markers; None for a missing answer."""
    if not isinstance(answer, dict):
        return None
    sentences = answer.get("answer") or []
    citations = sum(len(s.get("citations") or []) for s in sentences if isinstance(s, dict))
    words = answer.get("response_length")
    if not isinstance(words, (int, float)):
        words = sum(len(str(s.get("text", "")).split()) for s in sentences if isinstance(s, dict))
    return (float(words), float(citations))


def _style_matrix(battles: Sequence[Battle]) -> np.ndarray:
    """Per battle, each feature's difference over its sum plus one, ``(a - b) / (a + b + 1)``, standardised
    per column over the battles (a constant column stays 0): FastChat's ``preprocess_for_style``."""
    a = np.array([b.style_a for b in battles], dtype=float).reshape(len(battles), -1)
    b = np.array([b.style_b for b in battles], dtype=float).reshape(len(battles), -1)
    diff = (a - b) / (a + b + 1.0)
    std = diff.std(axis=0)
    return np.divide(diff - diff.mean(axis=0), std, out=np.zeros_like(diff), where=std > 1e-12)


def _fit_style(
    i: np.ndarray,
    j: np.ndarray,
    scores: np.ndarray,
    weights: np.ndarray,
    x: np.ndarray,
    n: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BT with covariates as FastChat's ``fit_contextual_bt``: P(a beats b) = sigmoid(ln(BASE) (r_a - r_b)
    + x . beta), ratings ``r`` in units of log-BASE odds; the log loss (a tie scores half) summed over the
    battles (``weights``: a bootstrap resample's counts) plus ``STYLE_REG / 2 * |(r, beta)|^2``, by L-BFGS from
    ``start`` (the bootstrap starts each resample at the full fit). Returns ratings, beta and the raw
    parameters."""
    total = weights.sum()
    alpha = math.log(BASE)

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        z = alpha * (params[i] - params[j]) + x @ params[n:]
        loss = np.sum(weights * (scores * np.logaddexp(0.0, -z) + (1 - scores) * np.logaddexp(0.0, z)))
        g = weights * (expit(z) - scores)
        grad = STYLE_REG * params
        grad[:n] += alpha * (np.bincount(i, g, n) - np.bincount(j, g, n))
        grad[n:] += x.T @ g
        # divided by the battles' count (the same minimum), so L-BFGS's tolerances do not tighten as the log grows
        return (loss + STYLE_REG / 2 * float(params @ params)) / total, grad / total

    x0 = np.zeros(n + x.shape[1]) if start is None else start
    result = minimize(objective, x0, jac=True, method="L-BFGS-B", options={"gtol": 1e-8})
    r = result.x[:n] - result.x[:n].mean()  # the penalty already puts the mean at 0, up to the tolerance
    return INIT + SCALE * r, result.x[n:], result.x


def _styled(battles: Iterable[Battle], include_bothbad: bool) -> list[Battle]:
    return [b for b in _kept(battles, include_bothbad) if b.style_a is not None and b.style_b is not None]


def bradley_terry_style(
    battles: Sequence[Battle], include_bothbad: bool = True
) -> tuple[dict[str, float], dict[str, float]]:
    """Style-controlled BT ratings and the style coefficients (per standardised feature, in logits), over
    the battles that carry style features."""
    kept = _styled(battles, include_bothbad)
    names = sorted({b.a for b in kept} | {b.b for b in kept})
    if not names:
        return {}, {}
    index = {name: n for n, name in enumerate(names)}
    i = np.array([index[b.a] for b in kept])
    j = np.array([index[b.b] for b in kept])
    scores = np.array([_score(b.winner) for b in kept])
    with _one_blas_thread():
        ratings, beta, _ = _fit_style(i, j, scores, np.ones(len(kept)), _style_matrix(kept), len(names))
    return dict(zip(names, ratings.tolist())), dict(zip(STYLE_FEATURES, beta.tolist()))


def bootstrap_bt_style(
    battles: Sequence[Battle], rounds: int = 100, seed: int = 0, include_bothbad: bool = True
) -> dict[str, tuple[float, float]]:
    """95 % percentile intervals of the style-controlled ratings over resamples of the battles."""
    kept = _styled(battles, include_bothbad)
    names = sorted({b.a for b in kept} | {b.b for b in kept})
    if not names:
        return {}
    index = {name: n for n, name in enumerate(names)}
    i = np.array([index[b.a] for b in kept])
    j = np.array([index[b.b] for b in kept])
    scores = np.array([_score(b.winner) for b in kept])
    x = _style_matrix(kept)
    rng = np.random.default_rng(seed)
    with _one_blas_thread():
        start = _fit_style(i, j, scores, np.ones(len(kept)), x, len(names))[2]
        samples = np.array(
            [
                _fit_style(
                    i,
                    j,
                    scores,
                    rng.multinomial(len(kept), np.full(len(kept), 1 / len(kept))).astype(float),
                    x,
                    len(names),
                    start,
                )[0]
                for _ in range(rounds)
            ]
        )
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    return {n: (float(lo), float(hi)) for n, lo, hi in zip(names, low, high)}


@dataclass(frozen=True)
class Row:
    name: str
    rank: int | None  #: None while provisional
    bt: float
    lower: float | None  #: the 95 % interval; None while provisional
    upper: float | None
    elo: float
    votes: int
    provisional: bool = False


def provisional_rating(
    battles: Sequence[Battle], name: str, fixed: dict[str, float], prior_games: float = PRIOR_GAMES
) -> float:
    """A provisional system's rating against the ranked systems' ratings held fixed, shrunk towards the mean
    (``prior_games`` ties against a system rated :data:`INIT`), so a 3-0 record cannot run off to an extreme;
    battles against other provisional systems are left out."""
    opponents, scores = [INIT] * 2, [0.5] * 2
    weights = [prior_games / 2] * 2
    for b in battles:
        if name in (b.a, b.b) and (other := b.b if b.a == name else b.a) in fixed:
            opponents.append(fixed[other])
            scores.append(_score(b.winner) if b.a == name else 1 - _score(b.winner))
            weights.append(1.0)
    r, s, w = np.array(opponents), np.array(scores), np.array(weights)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        p = 1.0 / (1.0 + BASE ** ((r - x[0]) / SCALE))
        eps = 1e-12
        loss = -np.sum(w * (s * np.log(p + eps) + (1 - s) * np.log(1 - p + eps)))
        return float(loss), np.array([float(np.sum(w * (p - s))) * math.log(BASE) / SCALE])

    return float(minimize(objective, np.array([INIT]), jac=True, method="L-BFGS-B").x[0])


def leaderboard(
    battles: Sequence[Battle],
    k: float = 4.0,
    rounds: int = 100,
    seed: int = 0,
    include_bothbad: bool = True,
    min_votes: int = 10,
    style: bool = False,
) -> list[Row]:
    """Ranked systems, then the provisional ones (fewer than ``min_votes`` votes: no rank, no interval),
    each group best first. ``style=True``: style-controlled BT ratings and intervals (battles with style
    features only); Elo stays the plain online Elo.

    The ranked systems are fitted (ratings, intervals, the mean-1000 centring) on their battles among
    themselves alone, so a provisional system joining the log moves no ranked rating; each provisional system
    gets :func:`provisional_rating` against them (for ordering; the boards show no rating for it). A point
    estimate is kept inside its interval (a percentile interval of a skewed bootstrap can miss it)."""
    kept = _styled(battles, include_bothbad) if style else _kept(battles, include_bothbad)
    votes = Counter([b.a for b in kept] + [b.b for b in kept])
    ranked = {name for name in votes if votes[name] >= min_votes}
    among = [b for b in kept if b.a in ranked and b.b in ranked]
    if style:
        bt = bradley_terry_style(among)[0]
        intervals = bootstrap_bt_style(among, rounds, seed)
    else:
        bt = bradley_terry(among)
        intervals = bootstrap_bt(among, rounds, seed)
    elo = online_elo(kept, k)
    rows = []
    for name in sorted(votes):
        if name not in bt:  # provisional (or ranked on votes but with no battle among ranked systems)
            rows.append(
                Row(
                    name, None, provisional_rating(kept, name, bt), None, None, elo[name], votes[name], provisional=True
                )
            )
            continue
        lower, upper = intervals[name]
        lower, upper = min(lower, bt[name]), max(upper, bt[name])
        rank = 1 + sum(1 for other in bt if min(intervals[other][0], bt[other]) > upper)
        rows.append(Row(name, rank, bt[name], lower, upper, elo[name], votes[name]))
    return sorted(rows, key=lambda r: (r.provisional, r.rank or 0, -r.bt, r.name))


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
