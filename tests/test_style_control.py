"""Style control against FastChat's: on a log where answer length goes with the generator, the coefficients and
ratings agree with a transcription of FastChat's fit, the length coefficient stays moderate and the bootstrap
intervals stay bounded (an unpenalised fit sent them to about 760 points wide)."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from ragnarok.arena.ratings import Battle, bootstrap_bt_style, bradley_terry_style, leaderboard

SKILL = {
    "bm25+smollm2": 0.3,
    "rocchio+smollm2": 0.1,
    "dense+smollm2": -0.1,
    "bm25+extractive": 0.2,
    "rocchio+extractive": 0.0,
    "dense+extractive": -0.3,
}


def _confounded(n: int = 500, seed: int = 0) -> list[Battle]:
    """Six pipelines; every SmolLM2 answer has 78-80 words and every extractive one 148-152, so length says
    which generator wrote it; winners random from the true skills (logits), 10 % ties, 5 % both bad."""
    rng = np.random.default_rng(seed)
    names = sorted(SKILL)
    out = []
    for _ in range(n):
        a, b = (names[k] for k in rng.choice(len(names), 2, replace=False))
        styles = []
        for name in (a, b):
            words = rng.integers(78, 81) if name.endswith("smollm2") else rng.integers(148, 153)
            styles.append((float(words), float(rng.integers(0, 4))))
        u, p = rng.random(), 1 / (1 + math.exp(SKILL[b] - SKILL[a]))
        winner = "tie" if u < 0.10 else "bothbad" if u < 0.15 else "a" if rng.random() < p else "b"
        out.append(Battle(a, b, winner, styles[0], styles[1]))
    return out


def _fastchat_style_control(battles, idxs=None, reg=0.5, base=10.0, scale=400.0, init_rating=1000.0):
    """FastChat's style control, transcribed from fastchat/serve/monitor/rating_systems.py: the features of
    ``preprocess_for_style`` (difference over sum plus one, then standardised), the loss and gradient of
    ``contextual_bt_loss_and_grad`` (summed log loss plus ``reg / 2 * |params|^2``), the L-BFGS options of
    ``fit_contextual_bt`` and the ``scale_and_offset`` of ``compute_style_control`` (no baseline model here).
    A tie and a both-bad vote both score 0.5 (``preprocess_for_elo``). Returns ({name: rating}, coefficients)."""
    names = sorted({b.a for b in battles} | {b.b for b in battles})
    index = {name: k for k, name in enumerate(names)}
    matchups = np.array([[index[b.a], index[b.b]] for b in battles])
    outcomes = np.array([1.0 if b.winner == "a" else 0.0 if b.winner == "b" else 0.5 for b in battles])
    style_a = np.array([b.style_a for b in battles], dtype=float).T
    style_b = np.array([b.style_b for b in battles], dtype=float).T
    style_diff = (style_a - style_b) / (style_a + style_b + 1.0)
    features = ((style_diff - style_diff.mean(axis=1)[:, None]) / style_diff.std(axis=1)[:, None]).T
    if idxs is not None:
        matchups, features, outcomes = matchups[idxs], features[idxs], outcomes[idxs]
    n, alpha = len(names), math.log(base)

    def loss_and_grad(params):
        ratings = params[:n]
        probs = expit(alpha * (ratings[matchups[:, 0]] - ratings[matchups[:, 1]]) + features @ params[n:])
        loss = -(np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)).sum()
        error = outcomes - probs
        grad = reg * params
        np.add.at(grad[:n], matchups, (-alpha * error)[:, None] * np.array([1.0, -1.0]))
        grad[n:] -= features.T @ error
        return loss + reg / 2 * float(params @ params), grad

    x0 = np.zeros(n + features.shape[1])
    params = minimize(loss_and_grad, x0, jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}).x
    return dict(zip(names, (params[:n] * scale + init_rating).tolist())), params[n:]


def test_style_control_matches_fastchat_on_a_confounded_log():
    battles = _confounded()
    ratings, coef = bradley_terry_style(battles)
    expected, expected_coef = _fastchat_style_control(battles)
    assert [coef["words"], coef["citations"]] == pytest.approx(expected_coef.tolist(), abs=0.05)
    assert sorted(ratings, key=ratings.get) == sorted(expected, key=expected.get)
    for name, rating in expected.items():
        assert ratings[name] == pytest.approx(rating, abs=2.0)
    # length carries no skill here and says which generator wrote the answer: the penalty keeps its coefficient
    # moderate (measured -0.64; the unpenalised fit: -2.13, and ratings 744-1280)
    assert abs(coef["words"]) < 1.0
    assert max(ratings.values()) - min(ratings.values()) < 300  # measured 201


def test_style_bootstrap_intervals_stay_bounded_on_a_confounded_log():
    battles = _confounded()
    intervals = bootstrap_bt_style(battles, rounds=100, seed=0)
    ratings = bradley_terry_style(battles)[0]
    # FastChat's formulation over 50 resamples of this log: widths 203-238 (the unpenalised fit: 755-767)
    rng = np.random.default_rng(0)
    samples = [_fastchat_style_control(battles, rng.integers(0, len(battles), len(battles)))[0] for _ in range(50)]
    reference = np.array([[s[name] for name in sorted(SKILL)] for s in samples])
    assert max(np.percentile(reference, 97.5, axis=0) - np.percentile(reference, 2.5, axis=0)) < 300
    for name, (low, high) in intervals.items():
        assert 100 < high - low < 300  # measured 213-230
        assert low - 1 <= ratings[name] <= high + 1
    rows = leaderboard(battles, rounds=100, style=True)
    assert [r.name for r in rows] == sorted(ratings, key=ratings.get, reverse=True)
    assert rows[0].rank == 1 and all(r.upper - r.lower < 300 for r in rows)
