"""Leaderboards recomputed from the vote log: tables, a win-rate heatmap and an interval plot, as HTML/SVG.

The numbers come from :mod:`ragnarok.arena.ratings` (pure functions) over the battles
:func:`ragnarok.arena.store.split_battles` selects for each board; nothing here is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

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


def compute(
    rows: list[tuple[dict[str, str], dict[str, str], str]], k: float = 4.0, rounds: int = 100, seed: int = 0
) -> dict[str, Board]:
    """Every board from the voted battles ``(pipeline_a, pipeline_b, winner)`` in vote order."""
    out = {}
    for name in BOARDS:
        battles: list[Battle] = split_battles(rows, name)
        table = leaderboard(battles, k=k, rounds=rounds, seed=seed) if battles else []
        out[name] = Board(name, len(battles), table, win_rates(battles) if battles else {})
    return out


def table_html(board: Board) -> str:
    if not board.rows:
        return '<p class="rg-empty">No votes for this leaderboard yet.</p>'
    head = "<tr><th>Rank</th><th>System</th><th>BT rating</th><th>95% CI</th><th>Elo</th><th>Votes</th></tr>"
    body = "".join(
        f'<tr><td class="num">{r.rank}</td><td><code>{escape(r.name)}</code></td>'
        f'<td class="num">{r.bt:.0f}</td>'
        f'<td class="num">{r.lower:.0f} – {r.upper:.0f}</td><td class="num">{r.elo:.0f}</td>'
        f'<td class="num rg-votes">{r.votes}</td></tr>'
        for r in board.rows
    )
    return f'<table class="rg-table"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _colour(rate: float) -> str:
    """Pale red (0) through white (0.5) to pale green (1)."""
    t = max(0.0, min(1.0, rate))
    if t < 0.5:
        return f"hsl(0, 80%, {100 - (0.5 - t) * 60:.0f}%)"
    return f"hsl(130, 60%, {100 - (t - 0.5) * 60:.0f}%)"


def heatmap_html(board: Board) -> str:
    """Win-rate matrix: row system's share of wins against the column system (ties count half)."""
    names = [r.name for r in board.rows]
    if len(names) < 2:
        return ""
    head = (
        "<tr><th>row beats column</th>"
        + "".join(f"<th><code>{escape(n)}</code></th>" for n in names)
        + "</tr>"
    )
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
    return f'<table class="rg-heatmap"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def intervals_svg(board: Board, width: int = 640) -> str:
    """BT ratings with their 95 % bootstrap intervals, one line per system, best first."""
    if not board.rows:
        return ""
    lo = min(r.lower for r in board.rows)
    hi = max(r.upper for r in board.rows)
    if hi - lo < 1:
        lo, hi = lo - 10, hi + 10
    left, right, step = 260, 20, 26
    height = 30 + step * len(board.rows)

    def x(value: float) -> float:
        return left + (value - lo) / (hi - lo) * (width - left - right)

    parts = [
        f'<svg class="rg-intervals" role="img" aria-label="BT ratings with 95% intervals" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, r in enumerate(board.rows):
        y = 20 + step * i
        parts.append(
            f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" font-size="11">{escape(r.name)}</text>'
            f'<line x1="{x(r.lower):.1f}" y1="{y}" x2="{x(r.upper):.1f}" y2="{y}" stroke="#1d4ed8" '
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
        table_html(board),
    ]
    if board.rows:
        parts += [
            "<h4>Win rates</h4>",
            heatmap_html(board),
            "<h4>BT ratings, 95% bootstrap intervals</h4>",
            intervals_svg(board),
        ]
    parts.append("</div>")
    return "".join(parts)


def summary_html(total: int, include_unblinded: bool) -> str:
    which = "blinded and unblinded" if include_unblinded else "blinded"
    return (
        f'<p class="rg-summary"><strong class="rg-total">{total}</strong> {which} '
        f"vote{'s' if total != 1 else ''} in the log</p>"
    )
