"""A pipeline against the baseline on one metric: wins, ties and losses over the topics, a paired test (scipy's
``ttest_rel`` or ``wilcoxon``), and the correction of the p-values of several pipelines for multiple testing
(Bonferroni or Holm, as statsmodels' ``multipletests`` computes them)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

TESTS = ("t", "wilcoxon")
CORRECTIONS = ("bonferroni", "holm")


@dataclass(frozen=True)
class Comparison:
    wins: int  # topics where the pipeline scores above the baseline
    ties: int
    losses: int
    p_value: float  # two-sided; 1.0 when the two score every topic the same


def compare(scores: Sequence[float], baseline: Sequence[float], test: str = "t") -> Comparison:
    """``scores`` and ``baseline``: one value per topic, the same topics in the same order."""
    x, y = np.asarray(scores, dtype=float), np.asarray(baseline, dtype=float)
    if x.shape != y.shape or x.size < 2:
        raise ValueError(f"a paired test needs the same topics on both sides, at least 2 (got {x.size} and {y.size})")
    diff = x - y
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    if np.allclose(diff, 0.0):
        p = 1.0  # scipy answers nan (t-test) or raises (Wilcoxon) when nothing differs
    elif test == "t":
        p = float(stats.ttest_rel(x, y).pvalue)
    elif test == "wilcoxon":
        with warnings.catch_warnings():  # few differing topics: scipy warns of its normal approximation
            warnings.simplefilter("ignore", RuntimeWarning)
            p = float(stats.wilcoxon(x, y).pvalue)
    else:
        raise ValueError(f"unknown test {test!r}: one of {', '.join(TESTS)}")
    return Comparison(wins, x.size - wins - losses, losses, p)


def correct(p_values: Sequence[float], method: str) -> list[float]:
    """The p-values adjusted for testing them together: ``bonferroni`` (each times their number) or ``holm``
    (step-down: the i-th smallest times (m - i), kept monotone), capped at 1."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if method == "bonferroni":
        return [float(v) for v in np.minimum(p * m, 1.0)]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}: one of {', '.join(CORRECTIONS)}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in adjusted]
