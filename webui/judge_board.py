"""The leaderboards tab's "Judges" pane: one board per judge from its votes on the arena's battles
(``ragnarok judge pairwise --arena``), and its agreement with the people who voted on the same battles.

Judge votes are read from their own table (:mod:`ragnarok.arena.judge_log`); the human boards never count them.
"""

from __future__ import annotations

from html import escape

from ragnarok.arena.judge_log import JudgeVote
from ragnarok.judge.arena import Agreement, agreement, judge_rows
from webui import boards

EMPTY = (
    '<p class="rg-empty">No judge votes yet: <code>ragnarok judge pairwise --arena --judge NAME</code> casts them.</p>'
)
NOTE = (
    '<p class="rg-note">Judge votes: each battle judged twice with the sides swapped, a disagreement is a '
    "tie. They are kept apart from human votes and counted on none of the other boards.</p>"
)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def agreement_html(a: Agreement) -> str:
    if not a.both:
        return (
            f'<p class="rg-agreement">{a.votes} judge vote{"s" if a.votes != 1 else ""}; no battle voted '
            "by a person too yet.</p>"
        )
    return (
        f'<p class="rg-agreement">Agreement with human votes on <strong>{a.both}</strong> battle'
        f'{"s" if a.both != 1 else ""} both voted: <strong class="rg-agree">{_percent(a.rate)}</strong> '
        f"(a human tie or both-bad counts as a tie); without ties: {_percent(a.rate_decided)} of "
        f"{a.decided}.</p>"
    )


def judges_html(votes: list[JudgeVote], k: float = 4.0, rounds: int = 100) -> str:
    """Per judge: the agreement line and its full-pipeline board."""
    if not votes:
        return EMPTY
    parts = ['<div class="rg-judges">', NOTE]
    for voter, agreed in agreement(votes).items():
        board = boards.compute(judge_rows(votes, voter), k, rounds)["rag"]
        title = f"<h3><code>{escape(voter)}</code> — RAG (full pipeline)</h3>"
        parts += [
            f'<div class="rg-board rg-judge" data-voter="{escape(voter)}">{title}',
            f'<p class="rg-count">{board.battles} battle{"s" if board.battles != 1 else ""} counted</p>',
            agreement_html(agreed),
            boards.table_html(board),
            "</div>",
        ]
    parts.append("</div>")
    return "".join(parts)
