"""The arena's vote log: append-only tables behind SQLAlchemy (SQLite by default, any SQLAlchemy URL works).

Two append-only tables: ``battles`` (written when the server creates a battle: topic, mode, both pipelines by
component, both answers or errors) and ``votes`` (one row per battle at most — a unique key makes a second
vote fail atomically, across processes too). The view ``battle_log`` joins them into one row per battle
(battle id, created and voted times, topic, mode, pipelines, answers, winner, session). Nothing is ever
updated or deleted; on SQLite triggers refuse it. Schema changes are a list of migrations recorded in
``schema_migrations``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import IntegrityError

from ragnarok.arena.ratings import OUTCOMES, Battle

MODES = ("blinded", "unblinded")


class VoteRefused(ValueError):
    """A vote that cannot be recorded: unknown battle, voted already, not votable, or rate-limited."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


def _m1_tables(conn: Connection) -> None:
    conn.execute(text("""
        CREATE TABLE battles (
            id VARCHAR(32) PRIMARY KEY,
            created_at VARCHAR(32) NOT NULL,
            mode VARCHAR(16) NOT NULL,
            topic_id VARCHAR(200) NOT NULL,
            topic TEXT NOT NULL,
            pipeline_a TEXT NOT NULL,
            pipeline_b TEXT NOT NULL,
            answer_a TEXT,
            answer_b TEXT,
            error_a TEXT,
            error_b TEXT,
            session_id VARCHAR(64) NOT NULL
        )"""))
    conn.execute(text("""
        CREATE TABLE votes (
            battle_id VARCHAR(32) PRIMARY KEY REFERENCES battles(id),
            voted_at VARCHAR(32) NOT NULL,
            winner VARCHAR(16) NOT NULL,
            session_id VARCHAR(64) NOT NULL
        )"""))
    conn.execute(text("CREATE INDEX votes_session ON votes(session_id, voted_at)"))
    conn.execute(text("""
        CREATE VIEW battle_log AS
        SELECT b.id, b.created_at, v.voted_at, b.topic_id, b.topic, b.mode, b.pipeline_a, b.pipeline_b,
               b.answer_a, b.answer_b, v.winner, b.session_id
        FROM battles b LEFT JOIN votes v ON v.battle_id = b.id"""))


def _m2_append_only(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        return
    for table in ("battles", "votes"):
        for action in ("UPDATE", "DELETE"):
            conn.execute(text(
                f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"))


MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = [(1, _m1_tables), (2, _m2_append_only)]


def migrate(engine: Engine) -> int:
    """Apply pending migrations in order; returns the schema version."""
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS schema_migrations "
                          "(version INTEGER PRIMARY KEY, applied_at VARCHAR(32) NOT NULL)"))
        done = {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}
        for version, step in MIGRATIONS:
            if version not in done:
                step(conn)
                conn.execute(text("INSERT INTO schema_migrations VALUES (:v, :t)"), {"v": version, "t": _now()})
    return MIGRATIONS[-1][0]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def make_engine(url: str) -> Engine:
    engine = create_engine(url, future=True)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=10000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()
    return engine


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
    def __init__(self, url: str, votes_per_minute: int = 30):
        self.engine = make_engine(url)
        self.votes_per_minute = votes_per_minute
        migrate(self.engine)

    def create_battle(self, mode: str, topic_id: str, topic: str, pipeline_a: dict[str, str],
                      pipeline_b: dict[str, str], answer_a: dict | None, answer_b: dict | None,
                      error_a: str | None, error_b: str | None, session_id: str) -> str:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        battle_id = uuid.uuid4().hex
        with self.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO battles VALUES (:id, :t, :mode, :tid, :topic, :pa, :pb, :aa, :ab, :ea, :eb, :sid)"), {
                "id": battle_id, "t": _now(), "mode": mode, "tid": topic_id, "topic": topic,
                "pa": json.dumps(pipeline_a, sort_keys=True), "pb": json.dumps(pipeline_b, sort_keys=True),
                "aa": json.dumps(answer_a) if answer_a is not None else None,
                "ab": json.dumps(answer_b) if answer_b is not None else None,
                "ea": error_a, "eb": error_b, "sid": session_id})
        return battle_id

    def get(self, battle_id: str) -> StoredBattle | None:
        with self.engine.connect() as conn:
            row = conn.execute(text(
                "SELECT b.id, b.mode, b.topic_id, b.topic, b.pipeline_a, b.pipeline_b, b.answer_a, b.answer_b, "
                "b.error_a, b.error_b, v.winner FROM battles b LEFT JOIN votes v ON v.battle_id = b.id "
                "WHERE b.id = :id"), {"id": battle_id}).first()
        if row is None:
            return None
        return StoredBattle(row[0], row[1], row[2], row[3], json.loads(row[4]), json.loads(row[5]),
                            json.loads(row[6]) if row[6] else None, json.loads(row[7]) if row[7] else None,
                            row[8], row[9], row[10])

    def vote(self, battle_id: str, winner: str, session_id: str) -> StoredBattle:
        """Record the one vote of a battle; refuses unknown, failed or already-voted battles and floods."""
        if winner not in OUTCOMES:
            raise VoteRefused(f"winner must be one of {', '.join(OUTCOMES)}", 422)
        battle = self.get(battle_id)
        if battle is None:
            raise VoteRefused(f"unknown battle {battle_id!r}", 404)
        if battle.error_a is not None or battle.error_b is not None:
            raise VoteRefused("this battle is not votable: a pipeline failed", 409)
        since = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat(timespec="microseconds")
        try:
            with self.engine.begin() as conn:
                recent = conn.execute(text("SELECT COUNT(*) FROM votes WHERE session_id = :s AND voted_at > :t"),
                                      {"s": session_id, "t": since}).scalar_one()
                if recent >= self.votes_per_minute:
                    raise VoteRefused(f"too many votes: at most {self.votes_per_minute} a minute", 429)
                conn.execute(text("INSERT INTO votes VALUES (:id, :t, :w, :s)"),
                             {"id": battle_id, "t": _now(), "w": winner, "s": session_id})
        except IntegrityError:
            raise VoteRefused("this battle has been voted on already", 409) from None
        return self.get(battle_id)  # type: ignore[return-value]

    def battles(self, include_unblinded: bool = False) -> list[tuple[dict[str, str], dict[str, str], str]]:
        """Voted battles in vote order: (pipeline_a, pipeline_b, winner)."""
        query = ("SELECT b.pipeline_a, b.pipeline_b, v.winner, b.mode FROM votes v JOIN battles b "
                 "ON b.id = v.battle_id ORDER BY v.voted_at, v.battle_id")
        with self.engine.connect() as conn:
            rows = conn.execute(text(query)).all()
        return [(json.loads(a), json.loads(b), w) for a, b, w, mode in rows
                if include_unblinded or mode == "blinded"]

    def vote_counts(self) -> dict[tuple[str, str], int]:
        """Votes per unordered pair of full pipelines (for sampling pairs with fewer votes)."""
        counts: dict[tuple[str, str], int] = {}
        for a, b, _ in self.battles(include_unblinded=True):
            key = tuple(sorted((a["spec"], b["spec"])))
            counts[key] = counts.get(key, 0) + 1  # type: ignore[index]
        return counts


COMPONENTS = ("retriever", "reranker", "generator")


def split_battles(rows: list[tuple[dict[str, str], dict[str, str], str]], board: str) -> list[Battle]:
    """Battles for one leaderboard: ``rag`` keys by full pipeline; ``r`` keeps battles that share the
    generator, keyed by retriever+reranker; ``ag`` keeps battles that share retriever and reranker, keyed by
    generator."""
    out = []
    for a, b, winner in rows:
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
            out.append(Battle(ka, kb, winner))
    return out
