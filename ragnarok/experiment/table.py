"""An experiment's DataFrame as a table for a terminal: pipelines as rows and metrics as columns, or metrics as
rows when that is too wide; a mean marked ``*`` where its difference from the baseline is significant (the
corrected p-value when there is one), with the topics it wins and loses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragnarok.experiment.significance import CORRECTIONS

TEST_NAMES = {"t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test"}


def _cell(row: Any, metric: str, alpha: float) -> str:
    value = f"{row[metric]:.4f}" if metric != "response_length" else f"{row[metric]:.1f}"
    p = row.get(f"{metric} p-value corrected", row.get(f"{metric} p-value"))
    if p is None or p != p:  # the baseline (NaN), or no baseline
        return value
    mark = "*" if p < alpha else " "
    return f"{value}{mark} +{int(row[f'{metric} +'])}/-{int(row[f'{metric} -'])}"


def grid(rows: list[list[str]]) -> list[str]:
    """Rows of cells as aligned lines: the first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


def format_table(
    frame: Any,
    metrics: Sequence[str],
    width: int = 100,
    alpha: float = 0.05,
    baseline: str | None = None,
    test: str = "t",
    correction: str | None = None,
) -> str:
    """The table, then a line saying what ``*`` and ``+w/-l`` mean, and the topics each pipeline misses."""
    records = frame.to_dict("records")
    head = ["pipeline", *metrics, "topics", "missing"]
    body = [
        [str(r["name"]), *(_cell(r, m, alpha) for m in metrics), str(r["topics"]), str(r["missing"])] for r in records
    ]
    lines = grid([head, *body])
    if max(map(len, lines)) > width:  # metrics as rows
        lines = grid(
            [
                ["metric", *(str(r["name"]) for r in records)],
                *([m, *(_cell(r, m, alpha) for r in records)] for m in metrics),
                ["topics", *(str(r["topics"]) for r in records)],
                ["missing", *(str(r["missing"]) for r in records)],
            ]
        )
    if baseline is not None:
        tests = len(records) - 1
        corrected = (
            f", {correction.capitalize()}-corrected for {tests} comparison{'s' * (tests != 1)}"
            if correction in CORRECTIONS
            else ""
        )
        lines += [
            f"* p < {alpha:g} against {baseline}: {TEST_NAMES.get(test, test)}{corrected}",
            "+w/-l: the topics it scores above / below the baseline",
        ]
    return "\n".join(lines)
