"""The vote log's side of the arena: votes (one per battle, rate-limited per client address) and the
leaderboards recomputed from the log (no Gradio here).

Votes are recorded under the browser's session and rate-limited per *rate key*, which the caller derives on
the server side (the UI passes the client's address: :func:`webui.app.rate_key`), never from the session id a
browser can change at will. A vote log that cannot be reached is said in one line (:func:`unavailable`: the
visitor is told to try again, the server's log gets the cause; the vote is not recorded). A vote
reveals the battle's pipelines, with each side's timing (kept in memory, by battle, until the vote: no timing
is shown before it).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from cachetools import LRUCache

from ragnarok.arena.store import StoreError, VoteRefused, VoteStore
from ragnarok.core.settings import Settings
from ragnarok.runtime import metrics
from webui import boards, render
from webui.views import VoteView, reveal

log = logging.getLogger(__name__)
WINNERS = ("a", "b", "tie", "bothbad")
#: Battles whose timings wait (in memory) for their vote, at most.
TIMINGS_KEPT = 10_000


def database_url(settings: Settings) -> str:
    """The vote log's SQLAlchemy URL: ``database_url``, else SQLite ``arena.db`` in the data directory."""
    if settings.database_url:
        return settings.database_url
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{settings.data_dir / 'arena.db'}"


def unavailable(exc: StoreError, what: str) -> str:
    """What a visitor is told when the vote log cannot be reached (no address, no driver message: those go to
    the server's log)."""
    log.error("the vote log could not %s: %s", what, exc)
    return "the vote log cannot be reached right now; try again in a few seconds"


class VoteLog:
    """The vote log (opened on first use), the timings waiting for their vote, and the last boards."""

    def __init__(self, settings: Settings, elo_k: float = 4.0, bootstrap_rounds: int = 100):
        self.settings, self.elo_k, self.bootstrap_rounds = settings, elo_k, bootstrap_rounds
        self._store: VoteStore | None = None
        self._lock = threading.Lock()
        self.timings: LRUCache[str, tuple[str, str]] = LRUCache(TIMINGS_KEPT)
        self._boards: dict[tuple[Any, ...], tuple[str, dict[str, str]]] = {}  # the last boards, by log state

    @property
    def store(self) -> VoteStore:
        with self._lock:
            if self._store is None:
                self._store = VoteStore(
                    database_url(self.settings), votes_per_minute=self.settings.arena_votes_per_minute
                )
            return self._store

    # -- votes --

    def vote(self, battle_id: str | None, winner: str, session_id: str, rate_key: str) -> VoteView:
        """Record the battle's one vote and reveal its pipelines; refusals come back as a message.
        ``rate_key`` is what the vote rate limit counts (server-derived: the client's address)."""
        if not battle_id:
            return VoteView(render.message_html("There is no battle to vote on: start one first.", "error"), False)
        if winner not in WINNERS:
            return VoteView(render.message_html(f"Unknown vote {winner!r}.", "error"), False)
        try:
            stored = self.store.vote(battle_id, winner, session_id, rate_key)
        except VoteRefused as exc:
            return VoteView(render.message_html(f"Vote not recorded: {exc}.", "error"), False)
        except StoreError as exc:
            return VoteView(
                render.message_html(f"Vote not recorded: {unavailable(exc, 'record a vote')}.", "error"), False
            )
        metrics.arena_vote(winner)
        timings = self.timings.pop(battle_id, ("", ""))
        return VoteView(
            reveal(stored, "Thanks! Your vote is recorded; start a new round.", timings),
            True,
            {
                "battle": stored.id,
                "A": stored.answer_a,
                "B": stored.answer_b,
                "winner": stored.winner,
                "pipelines": {"A": stored.pipeline_a, "B": stored.pipeline_b},
            },
        )

    # -- leaderboards --

    def leaderboards(self, include_unblinded: bool = False) -> tuple[str, dict[str, str]]:
        """The summary line and each board's HTML, recomputed from the log when it has changed: the log is
        append-only, so its vote counts name its state, and a refresh of an unchanged log is a lookup."""
        from ragnarok.arena.judge_log import judge_votes

        rows = self.store.battles(include_unblinded=include_unblinded, style=True)
        votes = judge_votes(self.store, include_unblinded)
        key = (include_unblinded, len(rows), len(votes), self.settings.arena_min_votes)
        if (cached := self._boards.get(key)) is not None:
            return cached
        computed = boards.compute(
            rows, k=self.elo_k, rounds=self.bootstrap_rounds, min_votes=self.settings.arena_min_votes
        )
        panes = {name: boards.board_html(board) for name, board in computed.items()}
        panes["judges"] = self.judge_board(include_unblinded, votes)
        self._boards = {key: (boards.summary_html(len(rows), include_unblinded), panes)}
        return self._boards[key]

    def judge_board(self, include_unblinded: bool = False, votes: Any = None) -> str:
        """The judges' boards and their agreement with human votes (judge votes count on no other board)."""
        from ragnarok.arena.judge_log import judge_votes
        from webui.judge_board import judges_html

        if votes is None:
            votes = judge_votes(self.store, include_unblinded)
        return judges_html(votes, k=self.elo_k, rounds=self.bootstrap_rounds)
