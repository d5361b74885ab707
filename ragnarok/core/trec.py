"""TREC run files: ``qid Q0 docid rank score run_id``, one line per retrieved document."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TextIO

#: A ranking to write: per topic, (docid, score) pairs (or a docid -> score mapping), in any order.
Ranking = Mapping[str, Iterable[tuple[str, float]] | Mapping[str, float]]
#: A run as read back: per topic, docid -> score.
Run = dict[str, dict[str, float]]


class RunFormatError(ValueError):
    """A run file that cannot be read or parsed; the message names the file and the 1-based line."""


def _one_word(kind: str, value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{kind} must be one non-empty word, got {value!r}")
    return value


def format_run_lines(ranking: Ranking, run_id: str, depth: int | None = None) -> Iterator[str]:
    """Lines of a run (no line ending): per topic, by score descending (ties by docid), ranks from 1.

    ``depth`` keeps the top ``depth`` documents of each topic. Ids with whitespace, an empty run id and
    scores that are not finite raise ValueError.
    """
    _one_word("run id", run_id)
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    for qid, hits in ranking.items():
        _one_word("topic id", qid)
        pairs = list(hits.items()) if isinstance(hits, Mapping) else list(hits)
        for docid, score in pairs:
            _one_word("document id", docid)
            if not math.isfinite(score):
                raise ValueError(f"topic {qid!r}, document {docid!r}: score {score!r} is not finite")
        ordered = sorted(pairs, key=lambda hit: (-hit[1], hit[0]))[:depth]
        for rank, (docid, score) in enumerate(ordered, start=1):
            yield f"{qid} Q0 {docid} {rank} {score:.6f} {run_id}"


def write_run(path_or_file: str | Path | TextIO, ranking: Ranking, run_id: str, depth: int | None = None) -> None:
    """Write ``ranking`` as a TREC run to a path or an open text file (see format_run_lines)."""
    # all lines are formatted (and validated) before the file is opened
    lines = [line + "\n" for line in format_run_lines(ranking, run_id, depth)]
    if isinstance(path_or_file, (str, Path)):
        with open(path_or_file, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    else:
        path_or_file.writelines(lines)


def read_columns(path: str | Path, layout: str, error: type[ValueError], kind: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, columns)`` of each non-blank line of a whitespace-separated TREC file whose columns are
    ``layout`` (e.g. ``"qid Q0 docid rank score run_id"``); a file that cannot be read or decoded, or a line
    with another number of columns, raises ``error`` naming the file (and the line)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {kind}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: {kind} is not valid UTF-8") from None
    width = len(layout.split())
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != width:
            raise error(f"{path}:{n}: expected '{layout}' ({width} columns, found {len(parts)}): {line[:80]!r}")
        yield n, parts


def read_run(path: str | Path) -> Run:
    """A TREC run file as ``{qid: {docid: score}}``; malformed lines raise RunFormatError with the line."""
    run: Run = {}
    for n, parts in read_columns(path, "qid Q0 docid rank score run_id", RunFormatError, "run file"):
        qid, _, docid, rank, score_text, _ = parts
        if not rank.lstrip("-").isdigit():
            raise RunFormatError(f"{path}:{n}: rank {rank!r} is not an integer")
        try:
            score = float(score_text)
        except ValueError:
            raise RunFormatError(f"{path}:{n}: score {score_text!r} is not a number") from None
        if not math.isfinite(score):
            raise RunFormatError(f"{path}:{n}: score {score_text!r} is not finite")
        hits = run.setdefault(qid, {})
        if docid in hits:
            raise RunFormatError(f"{path}:{n}: document {docid!r} appears twice for topic {qid!r}")
        hits[docid] = score
    return run
