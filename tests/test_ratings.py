"""Ratings with known answers: hand-computed Elo updates, BT orders and ties, bootstrap intervals."""

import pytest

from ragnarok.arena.ratings import Battle, bootstrap_bt, bradley_terry, leaderboard, online_elo, win_rates


def test_online_elo_by_hand():
    # 1000 vs 1000: expected 0.5, K=4 -> winner +2, loser -2; then A (1002) ties C (1000).
    ratings = online_elo([Battle("A", "B", "a"), Battle("A", "C", "tie")], k=4)
    assert ratings["A"] == pytest.approx(1002 + 4 * (0.5 - 1 / (1 + 10 ** ((1000 - 1002) / 400))))
    assert ratings["B"] == pytest.approx(998)
    assert sum(ratings.values()) == pytest.approx(3000)  # Elo is zero-sum


def test_elo_and_bt_order_and_symmetry():
    battles = [Battle("strong", "weak", "a")] * 30 + [Battle("weak", "strong", "a")] * 10 + \
              [Battle("mid", "weak", "a")] * 20 + [Battle("mid", "weak", "b")] * 20 + \
              [Battle("strong", "mid", "a")] * 30 + [Battle("mid", "strong", "a")] * 10
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
    battles = [Battle("A", "B", "a")] * 80 + [Battle("A", "B", "b")] * 20 + \
              [Battle("B", "C", "a")] * 50 + [Battle("B", "C", "b")] * 50 + \
              [Battle("A", "C", "a")] * 80 + [Battle("A", "C", "b")] * 20
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
