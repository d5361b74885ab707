"""Segment ids and offsets: which document a segment belongs to, its number, and the text of a span of
the document rebuilt from overlapping segments (``ragnarok.collection.segment`` ids:
``{docid}#{n}_{start_char}``, ``body[start_char:end_char] == segment``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragnarok.core.types import Candidate

_ID = re.compile(r"^(?P<base>.+)#(?P<n>\d{1,9})_(?P<start>\d{1,12})$")
#: Segments of one span at most (neighbours and auto-merging fetch no more than this per span).
MAX_SPAN_SEGMENTS = 16


@dataclass(frozen=True)
class Piece:
    """A segment as a span of its document: ``text == body[start:end]``."""

    base: str
    n: int
    start: int
    end: int
    text: str
    docid: str


def piece(candidate: Candidate) -> Piece | None:
    """The segment's place in its document, or None when its id or offsets do not say (CACM documents,
    foreign ids, or offsets that disagree with the text)."""
    m = _ID.match(candidate.docid)
    doc, text = candidate.doc, candidate.doc.segment
    if not m or text is None or doc.start_char is None or doc.end_char is None:
        return None
    if doc.end_char - doc.start_char != len(text) or int(m["start"]) != doc.start_char:
        return None
    return Piece(m["base"], int(m["n"]), doc.start_char, doc.end_char, text, candidate.docid)


def prefix(base: str, n: int) -> str:
    """The id prefix of segment ``n`` of document ``base`` (its start offset is not known in advance)."""
    return f"{base}#{n}_"


def union(pieces: list[Piece]) -> list[tuple[int, int, str]]:
    """The contiguous spans the pieces cover, each ``(start, end, text)`` with ``text == body[start:end]``:
    overlapping or touching pieces are joined, their shared text kept once; a gap starts a new span."""
    spans: list[tuple[int, int, str]] = []
    for p in sorted(pieces, key=lambda p: (p.start, -p.end)):
        if spans and p.start <= spans[-1][1]:
            start, end, text = spans[-1]
            if p.end > end:
                spans[-1] = (start, p.end, text + p.text[end - p.start :])
        else:
            spans.append((p.start, p.end, p.text))
    return spans


def span_candidate(best: Candidate, span: tuple[int, int, str], covered: list[str]) -> Candidate:
    """``best`` (the span's best-ranked input segment: its id and score) carrying the span's text and
    offsets; ``doc.merged`` lists the segment ids the span covers."""
    start, end, text = span
    doc = best.doc.model_copy(update={"segment": text, "start_char": start, "end_char": end})
    doc.merged = sorted(set(covered), key=_order)
    return best.model_copy(update={"doc": doc})


def _order(docid: str) -> tuple[int, str]:
    m = _ID.match(docid)
    return (int(m["n"]) if m else -1, docid)
