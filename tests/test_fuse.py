"""Golden values pin the conventions: RRF k=60 with 1-based ranks; min-max and 3-sigma normalisation."""

import pytest

from ragnarok.core.fuse import cc, dbsf, minmax, ranked, rrf, three_sigma

A = {"d1": 10.0, "d2": 8.0, "d3": 1.0}
B = {"d3": 0.9, "d1": 0.5, "d4": 0.1}


def test_rrf_uses_one_based_ranks_and_k_60():
    fused = rrf([A, B])
    assert fused["d1"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["d3"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d2"] == pytest.approx(1 / 62)
    assert fused["d4"] == pytest.approx(1 / 63)
    assert [d for d, _ in ranked(fused)] == ["d1", "d3", "d2", "d4"]


def test_rrf_depth_and_ties_are_deterministic():
    assert rrf([A], depth=1) == {"d1": pytest.approx(1 / 61)}
    assert [d for d, _ in ranked(rrf([{"b": 1.0}, {"a": 1.0}]))] == ["a", "b"]


def test_minmax_and_cc():
    assert minmax(A) == {"d1": 1.0, "d2": pytest.approx(7 / 9), "d3": 0.0}
    assert minmax({"x": 3.0, "y": 3.0}) == {"x": 1.0, "y": 1.0}
    fused = cc([A, B], weights=[0.7, 0.3])
    assert fused["d1"] == pytest.approx(0.7 * 1.0 + 0.3 * 0.5)
    assert fused["d3"] == pytest.approx(0.7 * 0.0 + 0.3 * 1.0)
    assert fused["d4"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        cc([A, B], weights=[1.0])


def test_three_sigma_and_dbsf():
    run = {"a": 1.0, "b": 2.0, "c": 3.0}
    sigma = (2 / 3) ** 0.5
    assert three_sigma(run)["b"] == pytest.approx(0.5)
    assert three_sigma(run)["c"] == pytest.approx((3 - (2 - 3 * sigma)) / (6 * sigma))
    assert three_sigma({"x": 5.0}) == {"x": 0.5}
    fused = dbsf([run, {"c": 1.0}])
    assert fused["c"] == pytest.approx(0.5 * three_sigma(run)["c"] + 0.5 * 0.5)
