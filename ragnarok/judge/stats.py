"""Means with percentile bootstrap intervals and a paired test between two runs over the same topics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.4f} [{self.low:.4f}, {self.high:.4f}]"


def bootstrap(values: Sequence[float], resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> Interval:
    """The mean and its percentile bootstrap interval (topics resampled with replacement; seeded, so a rerun
    prints the same interval). One value: the interval is that value."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values to average")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(data.mean()), float(low), float(high), int(data.size))


@dataclass(frozen=True)
class PairedTest:
    a: str
    b: str
    n: int
    mean_difference: float  # mean(a - b)
    t: float
    p_value: float  # two-sided paired t-test

    def __str__(self) -> str:
        return (
            f"{self.a} - {self.b}: {self.mean_difference:+.4f} over {self.n} topics, "
            f"t = {self.t:.3f}, p = {self.p_value:.4g} (paired t-test)"
        )


def paired_test(name_a: str, a: Mapping[str, float], name_b: str, b: Mapping[str, float]) -> PairedTest:
    """Student's paired t-test on the topics both runs have (scipy's ``ttest_rel``). Identical scores:
    t = 0, p = 1."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        raise ValueError(
            f"a paired test needs at least 2 topics both runs answered; {name_a} and {name_b} share {len(common)}"
        )
    xa, xb = np.array([a[q] for q in common]), np.array([b[q] for q in common])
    diff = xa - xb
    if np.allclose(diff, diff[0]):  # no variance: scipy answers nan
        t, p = (0.0, 1.0) if diff[0] == 0 else (float("inf") * np.sign(diff[0]), 0.0)
    else:
        result = stats.ttest_rel(xa, xb)
        t, p = float(result.statistic), float(result.pvalue)
    return PairedTest(name_a, name_b, len(common), float(diff.mean()), t, p)
