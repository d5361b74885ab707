"""``ragnarok view --experiment FILE``: an experiment's per-topic scores (``ragnarok compare --save``, or
``Experiment(..., perquery=True)`` saved with ``to_csv``/``to_json(orient="records")``) as a table of the topics
where the pipelines differ most, for one metric."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragnarok.experiment.table import grid

COLUMNS = ["name", "qid", "measure", "value"]


def read_experiment(path: Path) -> Any:
    """The per-topic rows of ``path`` (JSON records or CSV), or a ValueError saying what the file should be."""
    import pandas as pd  # noqa: PLC0415

    try:
        frame = (
            pd.read_json(path, orient="records", dtype={"qid": str})
            if path.suffix == ".json"
            else pd.read_csv(path, dtype={"qid": str, "name": str})
        )
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read as an experiment's per-topic scores: {exc}") from None
    if list(frame.columns) != COLUMNS or frame.empty:
        raise ValueError(
            f"{path}: not an experiment's per-topic scores (columns {', '.join(COLUMNS)}; "
            "`ragnarok compare --save FILE` writes them)"
        )
    return frame


def differences(frame: Any, metric: str | None = None, qids: Sequence[str] | None = None, limit: int = 20) -> str:
    """The ``limit`` topics whose ``metric`` differs most between the first pipeline and any other, each
    pipeline's score, and each pipeline's mean over the topics shown."""
    measures = list(dict.fromkeys(frame["measure"]))
    metric = metric or measures[0]
    if metric not in measures:
        raise ValueError(f"metric {metric!r} is not in the experiment (it has {', '.join(measures)})")
    table = frame[frame["measure"] == metric].pivot(index="qid", columns="name", values="value")
    names = list(dict.fromkeys(frame["name"]))
    table = table[names]
    if qids is not None:
        table = table[table.index.isin(list(qids))]
    spread = table[names[1:]].sub(table[names[0]], axis=0).abs().max(axis=1) if len(names) > 1 else table[names[0]] * 0
    shown = table.loc[spread.sort_values(ascending=False, kind="stable").index[:limit]]
    head = [f"{metric}: the {len(shown)} of {len(table)} topics where {names[0]} and the others differ most"]
    cells = [["topic", *names]] + [[str(q), *(f"{v:.4f}" for v in row)] for q, row in shown.iterrows()]
    cells.append(["mean (all topics)", *(f"{table[n].mean():.4f}" for n in names)])
    return "\n".join(head + grid(cells)) + "\n"
