"""Leaderboards recomputed from the vote log: tables, a win-rate heatmap and an interval plot, as HTML/SVG.

The numbers come from :mod:`ragnarok.arena.ratings` (pure functions) over the battles
:func:`ragnarok.arena.store.split_battles` selects for each board; nothing here is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from ragnarok.arena.ratings import Battle, Row, leaderboard, win_rates
from ragnarok.arena.store import split_battles

BOARDS = {
    "rag": "RAG (full pipeline)",
    "r": "R (retriever + reranker, same generator)",
    "ag": "AG (generator, same retriever and reranker)",
}


@dataclass(frozen=True)
class Board:
    name: str
    battles: int
    rows: list[Row]
    rates: dict[str, dict[str, float]]
    #: the style-controlled table (answer length and citations as covariates), when style features are known
    styled: list[Row] = field(default_factory=list)
    min_votes: int = 10


def compute(
    rows: list[tuple[Any, ...]], k: float = 4.0, rounds: int = 100, seed: int = 0, min_votes: int = 10
) -> dict[str, Board]:
    """Every board from the voted battles ``(pipeline_a, pipeline_b, winner[, style_a, style_b])`` in vote
    order; with style features, each board also gets its style-controlled table."""
    out = {}
    for name in BOARDS:
        battles: list[Battle] = split_battles(rows, name)
        table = leaderboard(battles, k=k, rounds=rounds, seed=seed, min_votes=min_votes) if battles else []
        styled = (
            leaderboard(battles, k=k, rounds=rounds, seed=seed, min_votes=min_votes, style=True)
            if any(b.style_a is not None for b in battles)
            else []
        )
        out[name] = Board(name, len(battles), table, win_rates(battles) if battles else {}, styled, min_votes)
    return out


def _rank(r: Row) -> str:
    return str(r.rank) if r.rank is not None else '<span class="rg-provisional">provisional</span>'


def _rating(r: Row, value: float) -> str:
    """A provisional system's rating is not shown: after a vote or two it is an extreme (1952 vs 48)."""
    return "–" if r.provisional else f"{value:.0f}"


def _interval(r: Row) -> str:
    return f"{r.lower:.0f} – {r.upper:.0f}" if r.lower is not None and r.upper is not None else "–"


def table_html(board: Board, styled: bool = False) -> str:
    rows = board.styled if styled else board.rows
    if not rows:
        return '<p class="rg-empty">No votes for this leaderboard yet.</p>'
    rating = "Style-controlled BT" if styled else "BT rating"
    elo = "" if styled else "<th>Elo</th>"
    # votes beside the system: on a narrow screen the columns that scroll out of view are the ratings' details
    head = f"<tr><th>Rank</th><th>System</th><th>Votes</th><th>{rating}</th><th>95% CI</th>{elo}</tr>"
    body = "".join(
        f'<tr class="{"rg-row-provisional" if r.provisional else "rg-row"}"><td class="num">{_rank(r)}</td>'
        f'<td><code>{escape(r.name)}</code></td><td class="num rg-votes">{r.votes}</td>'
        f'<td class="num">{_rating(r, r.bt)}</td><td class="num rg-ci">{_interval(r)}</td>'
        + ("" if styled else f'<td class="num">{_rating(r, r.elo)}</td>')
        + "</tr>"
        for r in rows
    )
    return scroll_html(f'<table class="rg-table"><thead>{head}</thead><tbody>{body}</tbody></table>')


def scroll_html(inner: str) -> str:
    """``inner`` in a box that scrolls sideways; when it is wider than the box (a phone), the page shows a fade
    at the right edge and a hint under it (:mod:`webui.page`)."""
    hint = '<p class="rg-scroll-hint" aria-hidden="true">Scroll sideways for more →</p>'
    return f'<div class="rg-scroll-wrap"><div class="rg-scroll">{inner}</div>{hint}</div>'


def tables_html(board: Board) -> str:
    """The plain and the style-controlled table side by side, and what "provisional" means."""
    if not board.rows:
        return table_html(board)
    plain = f'<div class="rg-side rg-plain"><h4>Plain Bradley–Terry</h4>{table_html(board)}</div>'
    if board.styled:
        styled = (
            f'<div class="rg-side rg-styled"><h4>Style-controlled (answer length and citations as '
            f"covariates)</h4>{table_html(board, styled=True)}</div>"
        )
    else:
        styled = (
            '<div class="rg-side rg-styled"><h4>Style-controlled</h4><p class="rg-empty">No style '
            "features recorded for these battles.</p></div>"
        )
    note = ""
    if any(r.provisional for r in board.rows):
        note = (
            f'<p class="rg-note">Provisional: fewer than {board.min_votes} votes — listed without a rank, '
            f"a rating or an interval until there are enough.</p>"
        )
    return f'<div class="rg-sides">{plain}{styled}</div>{note}'


def _colour(rate: float) -> str:
    """Pale red (0) through white (0.5) to pale green (1)."""
    t = max(0.0, min(1.0, rate))
    if t < 0.5:
        return f"hsl(0, 80%, {100 - (0.5 - t) * 60:.0f}%)"
    return f"hsl(130, 60%, {100 - (t - 0.5) * 60:.0f}%)"


def heatmap_html(board: Board) -> str:
    """Win-rate matrix: row system's share of wins against the column system (ties count half). Provisional
    systems are left out, as the table leaves out their ratings (a 1.00 from three votes says nothing)."""
    names = [r.name for r in board.rows if not r.provisional]
    hidden = len(board.rows) - len(names)
    note = (
        f'<p class="rg-heatmap-note">{hidden} provisional system(s) (fewer than {board.min_votes} votes) not shown.</p>'
        if hidden
        else ""
    )
    if len(names) < 2:
        return note
    head = "<tr><th>row beats column</th>" + "".join(f"<th><code>{escape(n)}</code></th>" for n in names) + "</tr>"
    body = []
    for row in names:
        cells = []
        for col in names:
            rate = board.rates.get(row, {}).get(col)
            if rate is None:
                cells.append('<td class="num">–</td>')
            else:
                cells.append(f'<td class="num" style="background:{_colour(rate)}">{rate:.2f}</td>')
        body.append(f"<tr><th><code>{escape(row)}</code></th>{''.join(cells)}</tr>")
    return f'<table class="rg-heatmap"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>{note}'


def intervals_svg(board: Board, width: int = 640, stacked: bool = False) -> str:
    """BT ratings with their 95 % bootstrap intervals, one line per ranked system, best first: each system's
    name left of its line, or above it (``stacked``: the narrow plot a phone shows, no wider than the screen)."""
    ranked = [(r, r.lower, r.upper) for r in board.rows if r.lower is not None and r.upper is not None]
    if not ranked:
        return ""
    lo = min(lower for _, lower, _ in ranked)
    hi = max(upper for _, _, upper in ranked)
    if hi - lo < 1:
        lo, hi = lo - 10, hi + 10
    left, right, step, top = (10, 10, 40, 30) if stacked else (260, 20, 26, 20)
    height = top + 10 + step * len(ranked)

    def x(value: float) -> float:
        return left + (value - lo) / (hi - lo) * (width - left - right)

    kind = "rg-intervals-narrow" if stacked else "rg-intervals-wide"
    parts = [
        f'<svg class="rg-intervals {kind}" role="img" aria-label="BT ratings with 95% intervals" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (r, lower, upper) in enumerate(ranked):
        y = top + step * i
        label = (
            f'<text x="{left}" y="{y - 8}" font-size="11">{escape(r.name)}</text>'
            if stacked
            else f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" font-size="11">{escape(r.name)}</text>'
        )
        parts.append(
            f'{label}<line x1="{x(lower):.1f}" y1="{y}" x2="{x(upper):.1f}" y2="{y}" stroke="#1d4ed8" '
            f'stroke-width="2"/><circle cx="{x(r.bt):.1f}" cy="{y}" r="4" fill="#1d4ed8"/>'
        )
    axis_y = height - 6
    parts.append(
        f'<text x="{left}" y="{axis_y}" font-size="10">{lo:.0f}</text>'
        f'<text x="{width - right}" y="{axis_y}" font-size="10" text-anchor="end">{hi:.0f}</text></svg>'
    )
    return "".join(parts)


def board_html(board: Board) -> str:
    title = escape(BOARDS[board.name])
    parts = [
        f'<div class="rg-board" data-board="{board.name}"><h3>{title}</h3>',
        f'<p class="rg-count">{board.battles} battle{"s" if board.battles != 1 else ""} counted</p>',
        tables_html(board),
    ]
    if board.rows:
        parts += ["<h4>Win rates</h4>", scroll_html(heatmap_html(board))]
    if intervals := intervals_svg(board):  # the stacked plot first: a narrow screen shows it instead
        narrow = intervals_svg(board, width=360, stacked=True)
        parts += ["<h4>BT ratings, 95% bootstrap intervals</h4>", scroll_html(narrow + intervals)]
    parts.append("</div>")
    return "".join(parts)


def summary_html(total: int, include_unblinded: bool) -> str:
    which = "blinded and unblinded" if include_unblinded else "blinded"
    return (
        f'<p class="rg-summary"><strong class="rg-total">{total}</strong> {which} '
        f"vote{'s' if total != 1 else ''} in the log</p>"
    )
