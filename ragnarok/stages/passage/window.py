"""Neighbour windows and auto-merging: spans of one document rebuilt from its overlapping segments.

Both look segments up by id in the pipeline's index (``StageContext.segments``), join them by their offsets
(:func:`ragnarok.stages.passage.spans.union`: text shared by overlapping windows is kept once, so the span's text
is the document body between its offsets, byte for byte) and hand on one candidate per span: the id and
score of the span's best-ranked input segment, at that segment's rank. Candidates whose ids or offsets do
not place them in a document (CACM, foreign collections) pass through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragnarok.core.types import Candidate, Request
from ragnarok.stages.passage.base import Detail, StageContext, change, number
from ragnarok.stages.passage.spans import MAX_SPAN_SEGMENTS, Piece, piece, prefix, span_candidate, union

MAX_WINDOW = 3
#: Segment numbers at most this far apart touch or overlap (window 10, stride 5: n and n+2 touch).
TOUCHING = 2


async def _fetch(wanted: dict[str, tuple[str, int]], ctx: StageContext) -> dict[tuple[str, int], Piece]:
    """The pieces for ``{prefix: (base, n)}`` that the index has (and whose offsets are usable)."""
    if not wanted:
        return {}
    found = await ctx.segments(sorted(wanted))
    pieces: dict[tuple[str, int], Piece] = {}
    for key, candidate in found.items():
        p = piece(candidate)
        if p is not None and key in wanted and (p.base, p.n) == wanted[key]:
            pieces[(p.base, p.n)] = p
    return pieces


def _merge_in_order(cands: list[Candidate], spans_of: dict[str, list[Piece]]) -> tuple[list[Candidate], int]:
    """Walk the ranking; each candidate's pieces join the output span of its document they overlap or touch
    (kept at the rank of that span's best segment), else start a new one. Returns the ranking and how many
    input candidates were merged into a span ranked above them."""
    out: list[Candidate | None] = []
    open_spans: dict[str, list[tuple[int, list[Piece], list[str]]]] = {}  # base -> [(out index, pieces, ids)]
    merged = 0
    for c in cands:
        pieces = spans_of.get(c.docid)
        if not pieces:
            out.append(c)
            continue
        base = pieces[0].base
        lo, hi = min(p.start for p in pieces), max(p.end for p in pieces)
        target = next(
            (
                entry
                for entry in open_spans.get(base, [])
                if lo <= max(p.end for p in entry[1]) and min(p.start for p in entry[1]) <= hi
            ),
            None,
        )
        if target is None:
            open_spans.setdefault(base, []).append((len(out), list(pieces), [c.docid]))
            out.append(c)
        else:
            target[1].extend(pieces)
            target[2].append(c.docid)
            merged += 1
    result = [c for c in out]
    for entries in open_spans.values():
        for index, pieces, ids in entries:
            best = result[index]
            assert best is not None
            spans = union(pieces)
            own = next(s for s in spans if s[0] <= best.doc.start_char < s[1] or s[0] == best.doc.start_char)  # type: ignore[operator]
            covered = [p.docid for p in pieces if own[0] <= p.start and p.end <= own[1]] + ids
            result[index] = span_candidate(best, own, covered)
    return [c for c in result if c is not None], merged


@dataclass
class Neighbours:
    """``neighbours:W@k``: each segment grows to the window of W segments before and after it (default 1);
    windows of one document that overlap or touch become one span."""

    name: str = "neighbours"
    width: int = 1

    @classmethod
    def create(cls, arg: str | None = None) -> Neighbours:
        return cls(width=int(number(arg, "neighbours:W", 1, MAX_WINDOW, 1, integer=True)))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        own = {c.docid: p for c in request.candidates if (p := piece(c)) is not None}
        wanted = {
            prefix(p.base, m): (p.base, m)
            for p in own.values()
            for m in range(max(0, p.n - self.width), p.n + self.width + 1)
            if m != p.n
        }
        wanted = {key: v for key, v in wanted.items() if not any((q.base, q.n) == v for q in own.values())}
        fetched = await _fetch(wanted, ctx)
        known = {(p.base, p.n): p for p in own.values()} | fetched
        spans_of = {
            docid: [known[(p.base, m)] for m in range(p.n - self.width, p.n + self.width + 1) if (p.base, m) in known]
            for docid, p in own.items()
        }
        ranking, merged = _merge_in_order(request.candidates, spans_of)
        out = request.model_copy(update={"candidates": ranking[:k]})
        return out, {
            **change(request, out),
            "fetched": len(fetched),
            "merged": merged,
            "unplaced": len(request.candidates) - len(own),
        }


@dataclass
class AutoMerge:
    """``automerge:M@k``: when M or more (default 2) retrieved segments of one document lie close together
    (numbers at most 2 apart: their text overlaps or touches), they are replaced by the span covering them
    (segments between them are looked up), at the rank of the best of them."""

    name: str = "automerge"
    minimum: int = 2

    @classmethod
    def create(cls, arg: str | None = None) -> AutoMerge:
        return cls(minimum=int(number(arg, "automerge:M", 2, MAX_SPAN_SEGMENTS, 2, integer=True)))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        own = {c.docid: p for c in request.candidates if (p := piece(c)) is not None}
        by_doc: dict[str, list[Piece]] = {}
        for p in own.values():
            by_doc.setdefault(p.base, []).append(p)
        groups: list[list[Piece]] = []
        for pieces in by_doc.values():
            pieces.sort(key=lambda p: p.n)
            run = [pieces[0]]
            for p in pieces[1:]:
                if p.n - run[-1].n <= TOUCHING and p.n - run[0].n < MAX_SPAN_SEGMENTS:
                    run.append(p)
                else:
                    groups.append(run)
                    run = [p]
            groups.append(run)
        groups = [g for g in groups if len(g) >= self.minimum]
        have = {(p.base, p.n) for p in own.values()}
        wanted = {
            prefix(g[0].base, m): (g[0].base, m)
            for g in groups
            for m in range(g[0].n, g[-1].n + 1)
            if (g[0].base, m) not in have
        }
        fetched = await _fetch(wanted, ctx)
        known = {(p.base, p.n): p for p in own.values()} | fetched
        spans_of: dict[str, list[Piece]] = {}
        for g in groups:
            span = [known[(g[0].base, m)] for m in range(g[0].n, g[-1].n + 1) if (g[0].base, m) in known]
            for p in g:
                spans_of[p.docid] = span
        ranking, merged = _merge_in_order(request.candidates, spans_of)
        out = request.model_copy(update={"candidates": ranking[:k]})
        return out, {**change(request, out), "fetched": len(fetched), "merged": merged, "groups": len(groups)}
