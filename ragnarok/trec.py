"""TREC run files: ``qid Q0 docid rank score run_id``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TextIO


class RunFormatError(ValueError):
    pass


def format_run_lines(ranking: dict[str, list[tuple[str, float]]], run_id: str,
                     depth: int | None = None) -> Iterable[str]:
    """Lines of a run: per topic, by score descending (ties by docid), ranks from 1."""
    for qid, hits in ranking.items():
        ordered = sorted(hits, key=lambda h: (-h[1], h[0]))[:depth]
        for rank, (docid, score) in enumerate(ordered, start=1):
            yield f"{qid} Q0 {docid} {rank} {score:.6f} {run_id}\n"


def write_run(target: Path | TextIO, ranking: dict[str, list[tuple[str, float]]], run_id: str,
              depth: int | None = None) -> None:
    if " " in run_id or not run_id:
        raise ValueError(f"run id must be one non-empty word, got {run_id!r}")
    lines = format_run_lines(ranking, run_id, depth)
    if isinstance(target, (str, Path)):
        with open(target, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    else:
        target.writelines(lines)


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFormatError(f"cannot read run file {path}: {exc}") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise RunFormatError(f"{path}:{n}: expected 'qid Q0 docid rank score run_id', got {line[:80]!r}")
        try:
            run.setdefault(parts[0], {})[parts[2]] = float(parts[4])
        except ValueError:
            raise RunFormatError(f"{path}:{n}: score {parts[4]!r} is not a number") from None
    return run
