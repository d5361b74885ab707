"""How far a judge's labels agree with gold labels: accuracy, Cohen's kappa, the confusion matrix; and the
judges' measured kappa (``measured.yaml`` beside this module, read by ``eval-rag`` to print next to its
scores): on the labelled set ``judge-dev`` (written by ``bench/bench_judge_dev.py --record``: the whole set, and
under ``cv`` cross-validated by topic) and, under ``unseen``, on topics the judge was never tuned on, with the
judge version, date and source of that figure (kept when ``--record`` rewrites the judge-dev figures)."""

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
    found = data.get(judge_name)
    old: dict[str, object] = found if isinstance(found, dict) else {}
    data[judge_name] = {**old, **figures}  # the figures given replace theirs; the others (unseen, cv, is) stay
    MEASURED.write_text(
        "# Cohen's kappa of each judge on judge-dev, written by bench/bench_judge_dev.py --record; "
        "'unseen': on topics it was not tuned on (with its provenance), 'is': what it is\n"
        + yaml.safe_dump(data, sort_keys=True),
        encoding="utf-8",
    )


def measured_line(judge_name: str, nli: str | None = None) -> str:
    """One line for reports: what the judge is and is not, its kappa measured from outside the project on
    topics it never saw (with the judge version and date that figure is of), and this version's kappa
    cross-validated by topic on judge-dev (held-out folds), or that it was never measured. ``nli``: the proxy
    judge runs this NLI model instead of its rules (measured nowhere)."""
    found = measured(judge_name)
    if nli:
        return (
            f"judge {judge_name} with the NLI model {nli}: its agreement with people was never measured "
            "(bench/bench_judge_dev.py); not an LLM judge: use one (--judge NAME) for reported results"
        )
    if not found:
        return f"judge {judge_name}: not measured on judge-dev (bench/bench_judge_dev.py --record)"
    line = f"judge {judge_name}: {found.get('is') or found.get('judge', judge_name)}."
    unseen = found.get("unseen")
    if isinstance(unseen, dict):
        line += (
            f" Cohen's kappa with people on unseen topics {_num(unseen.get('kappa_nuggets'))} (nugget labels), "
            f"{_num(unseen.get('kappa_support'))} (citation support), for {unseen.get('judge', '?')} of "
            f"{unseen.get('when', '?')} ({unseen.get('source', '?')});"
        )
    else:
        line += " Never measured on topics it was not tuned on;"
    cv = found.get("cv")
    if not isinstance(cv, dict):
        return line + " this version not cross-validated (bench/bench_judge_dev.py --cv --record)"
    return line + (
        f" {cv.get('judge', 'this version')}, cross-validated by topic on judge-dev (held-out folds), "
        f"{_num(cv.get('kappa_nuggets'))} / {_num(cv.get('kappa_support'))} (measured {cv.get('when', '?')})"
    )


def _num(value: object) -> str:
    return f"{round(value, 3):g}" if isinstance(value, (int, float)) else "?"
