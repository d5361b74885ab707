"""How far a judge's labels agree with gold labels: accuracy, Cohen's kappa, the confusion matrix; and the
judges' measured kappa on the labelled set ``judge-dev`` (written by ``bench/bench_judge_dev.py --record``
into ``measured.yaml`` beside this module, read by ``eval-rag`` to print next to its scores)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

MEASURED = Path(__file__).parent / "measured.yaml"


def cohen_kappa(gold: Sequence[str], predicted: Sequence[str], classes: Sequence[str]) -> float:
    """Cohen's kappa of two labelings over ``classes`` (1: perfect, 0: chance; 0 when chance is all)."""
    n = len(gold)
    if n == 0:
        return 0.0
    observed = sum(g == p for g, p in zip(gold, predicted)) / n
    expected = sum((gold.count(c) / n) * (list(predicted).count(c) / n) for c in classes)
    return (observed - expected) / (1 - expected) if expected < 1 else 0.0


def confusion(gold: Sequence[str], predicted: Sequence[str], classes: Sequence[str]) -> list[list[int]]:
    """``matrix[i][j]``: items of gold class i labelled class j."""
    index = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for g, p in zip(gold, predicted):
        if g in index and p in index:
            matrix[index[g]][index[p]] += 1
    return matrix


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float:
    return sum(g == p for g, p in zip(gold, predicted)) / len(gold) if gold else 0.0


def measured(judge_name: str) -> dict[str, object] | None:
    """The judge's recorded figures on judge-dev (``kappa_nuggets``, ``kappa_support``, ``when``), or None."""
    try:
        data = yaml.safe_load(MEASURED.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError):
        return None
    found = data.get(judge_name) if isinstance(data, dict) else None
    return found if isinstance(found, dict) else None


def record(judge_name: str, figures: dict[str, object]) -> None:
    try:
        data = yaml.safe_load(MEASURED.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError):
        data = {}
    data[judge_name] = figures
    MEASURED.write_text("# Cohen's kappa of each judge on judge-dev, written by bench/bench_judge_dev.py --record\n"
                        + yaml.safe_dump(data, sort_keys=True), encoding="utf-8")


def measured_line(judge_name: str) -> str:
    """One line for reports: the judge's kappa on judge-dev, or that it was never measured."""
    found = measured(judge_name)
    if not found:
        return f"judge {judge_name}: not measured on judge-dev (bench/bench_judge_dev.py --record)"
    return (f"judge {judge_name}: Cohen's kappa on judge-dev {found.get('kappa_nuggets', float('nan')):.2f} "
            f"(nugget labels), {found.get('kappa_support', float('nan')):.2f} (citation support), "
            f"measured {found.get('when', '?')}")
