"""The arena's vote log: append-only tables behind SQLAlchemy (SQLite by default, or PostgreSQL).

Battles and votes are only ever inserted (triggers refuse updates and deletes), so the log is the truth that
ratings are derived from; one vote per battle is enforced by the database, across processes too. Votes are
rate-limited per rate key in a transaction serialised per key.

Design notes: docs/internals/arena.md.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ragnarok.arena.db import StoreError, describe, make_engine, safe_url, serialised, utc_now
from ragnarok.arena.migrations import MIGRATIONS, migrate, pair_key
from ragnarok.arena.ratings import OUTCOMES, Battle, style_answer

__all__ = [
    "MIGRATIONS",
    "MODES",
    "StoreError",
    "StoredBattle",
    "VoteRefused",
    "VoteStore",
    "make_engine",
    "migrate",
    "split_battles",
]

MODES = ("blinded", "unblinded")


class VoteRefused(ValueError):
    """A vote that cannot be recorded: unknown battle, voted already, not votable, or rate-limited."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class StoredBattle:
    id: str
    mode: str
    topic_id: str
    topic: str
    pipeline_a: dict[str, str]
    pipeline_b: dict[str, str]
    answer_a: dict[str, Any] | None
    answer_b: dict[str, Any] | None
    error_a: str | None
    error_b: str | None
    winner: str | None

    @property
    def votable(self) -> bool:
        return self.error_a is None and self.error_b is None and self.winner is None


class VoteStore:
    """The vote log at a SQLAlchemy URL (SQLite or PostgreSQL), migrated when opened.

    ``votes_per_minute`` bounds the votes recorded per rate key in any minute. Database failures raise
    :class:`StoreError` with one line naming the store and the driver's message, never the SQL.
    """

    def __init__(self, url: str, votes_per_minute: int = 30):
        self.engine = make_engine(url)
        self.votes_per_minute = votes_per_minute
        self._where = safe_url(url)
        migrate(self.engine)

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise StoreError(f"the vote store at {self._where} could not {what}: {describe(exc)}") from exc

    def create_battle(
        self,
        mode: str,
        topic_id: str,
        topic: str,
        pipeline_a: dict[str, str],
        pipeline_b: dict[str, str],
        answer_a: dict | None,
        answer_b: dict | None,
        error_a: str | None,
        error_b: str | None,
        session_id: str,
    ) -> str:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        battle_id = uuid.uuid4().hex
        with self._errors("record the battle"), self.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO battles (id, created_at, mode, topic_id, topic, pipeline_a, pipeline_b, "
                    "answer_a, answer_b, error_a, error_b, session_id, pair_key) "
                    "VALUES (:id, :t, :mode, :tid, :topic, :pa, :pb, :aa, :ab, :ea, :eb, :sid, :pair)"
                ),
                {
                    "id": battle_id,
                    "t": utc_now(),
                    "mode": mode,
                    "tid": topic_id[:200],
                    "topic": topic,
                    "pa": json.dumps(pipeline_a, sort_keys=True),
                    "pb": json.dumps(pipeline_b, sort_keys=True),
                    "aa": json.dumps(answer_a) if answer_a is not None else None,
                    "ab": json.dumps(answer_b) if answer_b is not None else None,
                    "ea": error_a,
                    "eb": error_b,
                    "sid": session_id[:64],
                    "pair": pair_key(pipeline_a, pipeline_b),
                },
            )
        return battle_id

    def get(self, battle_id: str) -> StoredBattle | None:
        with self._errors("read the battle"), self.engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT b.id, b.mode, b.topic_id, b.topic, b.pipeline_a, b.pipeline_b, b.answer_a, b.answer_b, "
                    "b.error_a, b.error_b, v.winner FROM battles b LEFT JOIN votes v ON v.battle_id = b.id "
                    "WHERE b.id = :id"
                ),
                {"id": battle_id},
            ).first()
        if row is None:
            return None
        return StoredBattle(
            row[0],
            row[1],
            row[2],
            row[3],
            json.loads(row[4]),
            json.loads(row[5]),
            json.loads(row[6]) if row[6] else None,
            json.loads(row[7]) if row[7] else None,
            row[8],
            row[9],
            row[10],
        )

    def vote(self, battle_id: str, winner: str, session_id: str, rate_key: str) -> StoredBattle:
        """Record the one vote of a battle; refuses unknown, failed or already-voted battles, and more than
        ``votes_per_minute`` votes per ``rate_key`` (a key the server derives, e.g. the client's address;
        ``session_id`` is only recorded)."""
        if winner not in OUTCOMES:
            raise VoteRefused(f"winner must be one of {', '.join(OUTCOMES)}", 422)
        battle = self.get(battle_id)
        if battle is None:
            raise VoteRefused(f"unknown battle {battle_id[:64]!r}", 404)
        if battle.error_a is not None or battle.error_b is not None:
            raise VoteRefused("this battle is not votable: a pipeline failed", 409)
        rate_key = rate_key[:200]
        try:
            with serialised(self.engine, f"ragnarok.arena.rate:{rate_key}") as conn:
                since = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat(timespec="microseconds")
                recent = conn.execute(
                    text("SELECT COUNT(*) FROM votes WHERE rate_key = :k AND voted_at > :t"),
                    {"k": rate_key, "t": since},
                ).scalar_one()
                if recent >= self.votes_per_minute:
                    raise VoteRefused(f"too many votes: at most {self.votes_per_minute} a minute", 429)
                conn.execute(
                    text(
                        "INSERT INTO votes (battle_id, voted_at, winner, session_id, rate_key, pair_key) "
                        "SELECT id, :t, :w, :s, :k, pair_key FROM battles WHERE id = :id"
                    ),
                    {"id": battle_id, "t": utc_now(), "w": winner, "s": session_id[:64], "k": rate_key},
                )
        except IntegrityError:
            raise VoteRefused("this battle has been voted on already", 409) from None
        except SQLAlchemyError as exc:
            raise StoreError(f"the vote store at {self._where} could not record the vote: {describe(exc)}") from exc
        # not read again: a vote committed is recorded, even if the database goes away right after
        return replace(battle, winner=winner)

    def battles(self, include_unblinded: bool = False, style: bool = False) -> list[tuple[Any, ...]]:
        """Voted battles in vote order: (pipeline_a, pipeline_b, winner); with ``style``, each side's style
        features (:func:`ragnarok.arena.ratings.style_answer`, from the stored answers) follow."""
        answers = ", b.answer_a, b.answer_b" if style else ""
        query = (
            f"SELECT b.pipeline_a, b.pipeline_b, v.winner, b.mode{answers} FROM votes v JOIN battles b "
            "ON b.id = v.battle_id ORDER BY v.voted_at, v.battle_id"
        )
        with self._errors("read the votes"), self.engine.connect() as conn:
            rows = conn.execute(text(query)).all()
        kept = [row for row in rows if include_unblinded or row[3] == "blinded"]
        if style:
            return [
                (
                    json.loads(r[0]),
                    json.loads(r[1]),
                    r[2],
                    *(style_answer(json.loads(x) if x else None) for x in r[4:6]),
                )
                for r in kept
            ]
        return [(json.loads(r[0]), json.loads(r[1]), r[2]) for r in kept]

    def vote_counts(self) -> dict[tuple[str, str], int]:
        """Votes per unordered pair of full pipelines, blinded and unblinded (for sampling pairs with fewer
        votes): read from ``pair_votes``, one row per pair, so the cost does not grow with the log."""
        with self._errors("count the votes"), self.engine.connect() as conn:
            rows = conn.execute(text("SELECT pair_key, votes FROM pair_votes")).all()
        return {tuple(json.loads(key)): int(n) for key, n in rows}  # type: ignore[misc]


COMPONENTS = ("retriever", "reranker", "generator")


def split_battles(rows: list[tuple[Any, ...]], board: str) -> list[Battle]:
    """Battles for one leaderboard: ``rag`` keys by full pipeline; ``r`` keeps battles that share the
    generator, keyed by retriever+reranker; ``ag`` keeps battles that share retriever and reranker, keyed by
    generator. Rows may carry each side's style features after the winner (``battles(style=True)``)."""
    out = []
    for a, b, winner, *style in rows:
        if board == "rag":
            ka, kb = a["spec"], b["spec"]
        elif board == "r":
            if a["generator"] != b["generator"]:
                continue
            ka, kb = f"{a['retriever']} | {a['reranker']}", f"{b['retriever']} | {b['reranker']}"
        elif board == "ag":
            if (a["retriever"], a["reranker"]) != (b["retriever"], b["reranker"]):
                continue
            ka, kb = a["generator"], b["generator"]
        else:
            raise ValueError(f"unknown leaderboard {board!r} (rag, r, ag)")
        if ka != kb:
            out.append(Battle(ka, kb, winner, *style))
    return out
