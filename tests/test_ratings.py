"""Ratings with known answers: hand-computed Elo updates, BT orders and ties, bootstrap intervals."""

import math

import pytest

from ragnarok.arena.ratings import (
    Battle,
    bootstrap_bt,
    bradley_terry,
    bradley_terry_style,
    leaderboard,
    online_elo,
    style_answer,
    win_rates,
)


def test_online_elo_by_hand():
    # 1000 vs 1000: expected 0.5, K=4 -> winner +2, loser -2; then A (1002) ties C (1000).
    ratings = online_elo([Battle("A", "B", "a"), Battle("A", "C", "tie")], k=4)
    assert ratings["A"] == pytest.approx(1002 + 4 * (0.5 - 1 / (1 + 10 ** ((1000 - 1002) / 400))))
    assert ratings["B"] == pytest.approx(998)
    assert sum(ratings.values()) == pytest.approx(3000)  # Elo is zero-sum


def test_elo_and_bt_order_and_symmetry():
    battles = (
        [Battle("strong", "weak", "a")] * 30
        + [Battle("weak", "strong", "a")] * 10
        + [Battle("mid", "weak", "a")] * 20
        + [Battle("mid", "weak", "b")] * 20
        + [Battle("strong", "mid", "a")] * 30
        + [Battle("mid", "strong", "a")] * 10
    )
    bt = bradley_terry(battles)
    assert bt["strong"] > bt["mid"] and bt["strong"] > bt["weak"]
    assert sum(bt.values()) / 3 == pytest.approx(1000)
    # 3:1 head to head -> BT difference of 400*log10(3) between strong and mid/weak (which are equal)
    assert bt["strong"] - bt["mid"] == pytest.approx(400 * 0.47712, abs=1.0)
    assert bt["mid"] == pytest.approx(bt["weak"], abs=0.5)
    elo = online_elo(battles)
    assert max(elo, key=elo.get) == "strong"


def test_ties_and_both_bad():
    tie_only = [Battle("x", "y", "tie")] * 10 + [Battle("x", "y", "bothbad")] * 10
    bt = bradley_terry(tie_only)
    assert bt["x"] == pytest.approx(bt["y"])
    lopsided = [Battle("x", "y", "a")] * 3 + [Battle("x", "y", "bothbad")] * 20
    assert bradley_terry(lopsided, include_bothbad=False)["x"] > bradley_terry(lopsided)["x"]
    with pytest.raises(ValueError):
        Battle("x", "x", "a")
    with pytest.raises(ValueError):
        Battle("x", "y", "draw")


def test_bootstrap_intervals_and_ranks():
    battles = (
        [Battle("A", "B", "a")] * 80
        + [Battle("A", "B", "b")] * 20
        + [Battle("B", "C", "a")] * 50
        + [Battle("B", "C", "b")] * 50
        + [Battle("A", "C", "a")] * 80
        + [Battle("A", "C", "b")] * 20
    )
    intervals = bootstrap_bt(battles, rounds=100, seed=1)
    bt = bradley_terry(battles)
    for name, (low, high) in intervals.items():
        assert low <= bt[name] <= high
    rows = leaderboard(battles, rounds=100, seed=1)
    assert [r.name for r in rows][0] == "A" and rows[0].rank == 1
    assert {r.name: r.rank for r in rows}["B"] == {r.name: r.rank for r in rows}["C"] == 2  # overlapping
    assert {r.name: r.votes for r in rows} == {"A": 200, "B": 200, "C": 200}
    assert leaderboard(battles, rounds=100, seed=1) == rows  # deterministic for a seed


def test_win_rates():
    rates = win_rates([Battle("A", "B", "a"), Battle("B", "A", "tie"), Battle("A", "B", "b")])
    assert rates["A"]["B"] == pytest.approx(0.5) and rates["B"]["A"] == pytest.approx(0.5)
    assert win_rates([]) == {}
    assert bradley_terry([]) == {} and leaderboard([]) == []


def test_systems_with_few_votes_are_provisional_without_rank_or_interval():
    battles = [Battle("A", "B", "a")] * 12 + [Battle("A", "B", "b")] * 8 + [Battle("A", "C", "a")]
    rows = {r.name: r for r in leaderboard(battles, rounds=20, min_votes=10)}
    assert rows["C"].provisional and rows["C"].rank is None and rows["C"].lower is None
    assert not rows["A"].provisional and rows["A"].rank == 1 and rows["A"].lower < rows["A"].upper
    assert [r.name for r in leaderboard(battles, rounds=20)][-1] == "C"  # provisional ones last
    one = leaderboard([Battle("x", "y", "a")], rounds=20)  # the 1952-vs-48 case: no ranks, no intervals
    assert all(r.provisional and r.rank is None and r.upper is None for r in one)


def _style_battles(n: int, seed: int) -> list[Battle]:
    """Known answers: quality good > mid > poor, but the worse a system the longer it writes, and a longer
    answer wins far more often (8 logits per unit of normalised length difference, against 1 logit of
    quality between good and poor); citations are noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    quality = {"good": 1.0, "mid": 0.5, "poor": 0.0}
    words = {"good": 60, "mid": 120, "poor": 240}
    names = list(quality)
    out = []
    for _ in range(n):
        a, b = (str(x) for x in rng.choice(names, 2, replace=False))
        la, lb = (max(5.0, rng.normal(words[x], words[x] * 0.5)) for x in (a, b))
        p = 1 / (1 + np.exp(-(quality[a] - quality[b] + 8 * (la - lb) / (la + lb))))
        ca, cb = (float(c) for c in rng.integers(0, 4, 2))
        out.append(Battle(a, b, "a" if rng.random() < p else "b", (la, ca), (lb, cb)))
    return out


def test_style_control_recovers_the_true_order_when_longer_answers_win():
    battles = _style_battles(3000, seed=0)
    plain = bradley_terry(battles)
    assert sorted(plain, key=plain.get, reverse=True) == ["poor", "mid", "good"]  # fooled by length
    styled, coef = bradley_terry_style(battles)
    assert sorted(styled, key=styled.get, reverse=True) == ["good", "mid", "poor"]
    assert coef["words"] > 1 and abs(coef["citations"]) < 0.2  # length explains the wins, citations do not
    # the true quality gap good-poor is 1 logit = 400/ln(10) ~ 174 rating points
    assert styled["good"] - styled["poor"] == pytest.approx(174, abs=45)
    rows = leaderboard(battles, rounds=30, style=True)
    assert [r.name for r in rows] == ["good", "mid", "poor"] and [r.rank for r in rows] == [1, 2, 3]
    assert [r.name for r in leaderboard(battles, rounds=30)] == ["poor", "mid", "good"]


def test_style_features_of_an_answer():
    answer = {
        "response_length": 7,
        "answer": [{"text": "One two [1].", "citations": [0, 1]}, {"text": "Three.", "citations": []}],
    }
    assert style_answer(answer) == (7.0, 2.0)
    assert style_answer({"answer": [{"text": "a b c", "citations": [0]}]}) == (3.0, 1.0)
    assert style_answer(None) is None
    # battles without style features are left out of the style-controlled fit
    mixed = [Battle("x", "y", "a")] * 5 + [Battle("x", "y", "b", (10, 1), (20, 1))] * 3
    assert bradley_terry_style(mixed)[0]["y"] > bradley_terry_style(mixed)[0]["x"]


def _fastchat_mle(battles, scale=400, base=10, init=1000):
    """FastChat's compute_mle_elo (serve/monitor/rating_systems.py): each battle twice, a tie as one win for each
    side, sklearn's LogisticRegression without intercept or penalty; ratings shifted to an ``init`` mean here."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    names = sorted({b.a for b in battles} | {b.b for b in battles})
    index = {n: i for i, n in enumerate(names)}
    rows, ys = [], []
    for b in battles:
        x = np.zeros(len(names))
        x[index[b.a]], x[index[b.b]] = math.log(base), -math.log(base)
        outcomes = [1.0, 1.0] if b.winner == "a" else [0.0, 0.0] if b.winner == "b" else [1.0, 0.0]
        for y in outcomes:
            rows.append(x)
            ys.append(y)
    model = LogisticRegression(fit_intercept=False, C=float("inf"), tol=1e-8, max_iter=1000)
    model.fit(np.array(rows), np.array(ys))
    ratings = scale * model.coef_[0]
    return dict(zip(names, (ratings - ratings.mean() + init).tolist()))


def test_a_provisional_system_joining_moves_no_ranked_rating():
    """Ratings x and y at 1000 with 20 votes each; z (3 votes, a perfect record) used to pull them to 464.
    Ranked ratings stay within 5 points, z's own estimate stays moderate, points lie inside their intervals,
    and the ranked ratings still match FastChat's maximum-likelihood fit of the ranked battles."""
    even = [Battle("x", "y", "a"), Battle("x", "y", "b")] * 10
    before = {r.name: r for r in leaderboard(even, rounds=50, min_votes=10)}
    joined = even + [Battle("z", "x", "a"), Battle("z", "y", "a"), Battle("y", "z", "b")]
    after = {r.name: r for r in leaderboard(joined, rounds=50, min_votes=10)}
    for name in ("x", "y"):
        assert abs(after[name].bt - before[name].bt) <= 5 and abs(after[name].bt - 1000) <= 5
        assert after[name].lower <= after[name].bt <= after[name].upper
    assert after["z"].provisional and after["z"].rank is None
    assert 1000 < after["z"].bt < 1400  # ahead of x and y, but not run off to an extreme
    skewed = (
        [Battle("a", "b", "a")] * 15
        + [Battle("b", "a", "a")] * 5
        + [Battle("a", "c", "tie")] * 12
        + [Battle("b", "c", "b")] * 10
        + [Battle("d", "a", "a")] * 2
    )
    rows = {r.name: r for r in leaderboard(skewed, rounds=50, min_votes=10)}
    ranked = [b for b in skewed if "d" not in (b.a, b.b)]
    expected = _fastchat_mle(ranked)
    assert rows["d"].provisional and set(expected) == {n for n, r in rows.items() if not r.provisional}
    for name, rating in expected.items():
        assert rows[name].bt == pytest.approx(rating, abs=1.0)
        assert rows[name].lower <= rows[name].bt <= rows[name].upper
