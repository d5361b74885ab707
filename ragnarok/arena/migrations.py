"""The vote log's schema: a list of migrations, recorded in ``schema_migrations``.

Each migration runs with its version row in one transaction, serialised with every other process migrating
the same database (:func:`ragnarok.arena.db.serialised`); the applied versions are read under that lock, so
concurrent first starts apply each migration once and a migration that fails halfway leaves nothing behind.
Applied migrations are history: never edit one, add the next.

``battles`` and ``votes`` are append-only and are the truth. ``pair_votes`` (migration 6: votes per unordered
pipeline pair) is derived from ``votes`` and is the one table updated in place: an AFTER INSERT trigger on
``votes`` upserts its pair's row in the inserting transaction, so the count commits or rolls back with the
vote and a battle's sampling reads one row per pair, however long the log. It can always be rebuilt from
``votes`` (:func:`rebuild_pair_votes`); a later migration that rewrites ``votes.pair_key`` must rebuild it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, text

from ragnarok.arena.db import StoreError, describe, safe_url, serialised, utc_now

Migration = tuple[int, Callable[[Connection], None]]
LOCK = "ragnarok.arena.migrations"
APPEND_ONLY = ("battles", "votes")


def _m1_tables(conn: Connection) -> None:
    conn.execute(
        text("""
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
        )""")
    )
    conn.execute(
        text("""
        CREATE TABLE votes (
            battle_id VARCHAR(32) PRIMARY KEY REFERENCES battles(id),
            voted_at VARCHAR(32) NOT NULL,
            winner VARCHAR(16) NOT NULL,
            session_id VARCHAR(64) NOT NULL
        )""")
    )
    conn.execute(text("CREATE INDEX votes_session ON votes(session_id, voted_at)"))
    conn.execute(
        text("""
        CREATE VIEW battle_log AS
        SELECT b.id, b.created_at, v.voted_at, b.topic_id, b.topic, b.mode, b.pipeline_a, b.pipeline_b,
               b.answer_a, b.answer_b, v.winner, b.session_id
        FROM battles b LEFT JOIN votes v ON v.battle_id = b.id""")
    )


def _sqlite_trigger(table: str, action: str) -> str:
    return (
        f"CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
    )


def _m2_append_only(conn: Connection) -> None:
    if conn.dialect.name != "sqlite":
        return
    for table in APPEND_ONLY:
        for action in ("UPDATE", "DELETE"):
            conn.execute(text(_sqlite_trigger(table, action)))


def _m3_append_only_postgresql(conn: Connection) -> None:
    """UPDATE, DELETE and TRUNCATE raise on PostgreSQL too (SQLite got its triggers in migration 2)."""
    if conn.dialect.name != "postgresql":
        return
    conn.execute(
        text("""
        CREATE OR REPLACE FUNCTION ragnarok_append_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            RAISE EXCEPTION USING MESSAGE = TG_TABLE_NAME || ' is append-only',
                                  ERRCODE = 'restrict_violation';
        END $fn$""")
    )
    for table in APPEND_ONLY:
        conn.execute(
            text(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION ragnarok_append_only()"
            )
        )


def _m4_rate_key(conn: Connection) -> None:
    """Votes are rate-limited per key the server derives (the client's address), not per client-chosen
    session id."""
    conn.execute(text("ALTER TABLE votes ADD COLUMN rate_key VARCHAR(200)"))
    conn.execute(text("CREATE INDEX votes_rate ON votes(rate_key, voted_at)"))


def pair_key(pipeline_a: dict[str, str], pipeline_b: dict[str, str]) -> str:
    """The unordered pair of full pipeline specs, as stored (JSON of the sorted pair)."""
    return json.dumps(sorted((pipeline_a["spec"], pipeline_b["spec"])))


@contextmanager
def _append_only_suspended(conn: Connection, table: str) -> Iterator[None]:
    """Lets a migration backfill a new column (inside its transaction: no one else sees the gap)."""
    if conn.dialect.name == "sqlite":
        conn.execute(text(f"DROP TRIGGER {table}_no_update"))
        yield
        conn.execute(text(_sqlite_trigger(table, "UPDATE")))
    else:
        conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only"))
        yield
        conn.execute(text(f"ALTER TABLE {table} ENABLE TRIGGER {table}_append_only"))


def _m5_pair_key(conn: Connection) -> None:
    """The battle's pipeline pair, stored when the battle is created and copied onto its vote, so votes per
    pair are one GROUP BY over an index instead of a read of the whole log."""
    for table in APPEND_ONLY:
        conn.execute(text(f"ALTER TABLE {table} ADD COLUMN pair_key TEXT"))
    rows = conn.execute(text("SELECT id, pipeline_a, pipeline_b FROM battles")).all()
    with _append_only_suspended(conn, "battles"), _append_only_suspended(conn, "votes"):
        if rows:
            conn.execute(
                text("UPDATE battles SET pair_key = :k WHERE id = :id"),
                [{"id": i, "k": pair_key(json.loads(a), json.loads(b))} for i, a, b in rows],
            )
            conn.execute(
                text("UPDATE votes SET pair_key = (SELECT b.pair_key FROM battles b WHERE b.id = votes.battle_id)")
            )
    conn.execute(text("CREATE INDEX votes_pair ON votes(pair_key)"))


def rebuild_pair_votes(conn: Connection) -> None:
    """Recount ``pair_votes`` from the log (one GROUP BY over ``votes``), in the caller's transaction."""
    conn.execute(text("DELETE FROM pair_votes"))
    conn.execute(
        text(
            "INSERT INTO pair_votes (pair_key, votes) SELECT pair_key, COUNT(*) FROM votes "
            "WHERE pair_key IS NOT NULL GROUP BY pair_key"
        )
    )


_COUNT_PAIR = (
    "INSERT INTO pair_votes (pair_key, votes) VALUES (NEW.pair_key, 1) "
    "ON CONFLICT (pair_key) DO UPDATE SET votes = pair_votes.votes + 1"
)


def _m6_pair_votes(conn: Connection) -> None:
    """Votes per pair kept by the database as votes are inserted (SQLite >= 3.24 for the upsert), so
    counting them costs the number of pairs, not of votes; backfilled from the log in this transaction.
    On PostgreSQL each vote leaves a dead version of its pair's row, pruned in place (HOT) when votes come
    one a transaction; a bulk import of many votes in one transaction bloats the table until autovacuum."""
    conn.execute(text("CREATE TABLE pair_votes (pair_key TEXT PRIMARY KEY, votes INTEGER NOT NULL)"))
    if conn.dialect.name == "sqlite":
        conn.execute(
            text(
                f"CREATE TRIGGER votes_count_pair AFTER INSERT ON votes "
                f"WHEN NEW.pair_key IS NOT NULL BEGIN {_COUNT_PAIR}; END"
            )
        )
    else:  # concurrent upserts of one pair wait for each other's row lock: none is lost
        conn.execute(
            text(f"""
            CREATE OR REPLACE FUNCTION ragnarok_count_pair_vote() RETURNS trigger LANGUAGE plpgsql AS $fn$
            BEGIN
                {_COUNT_PAIR};
                RETURN NULL;
            END $fn$""")
        )
        conn.execute(
            text(
                "CREATE TRIGGER votes_count_pair AFTER INSERT ON votes FOR EACH ROW "
                "WHEN (NEW.pair_key IS NOT NULL) EXECUTE FUNCTION ragnarok_count_pair_vote()"
            )
        )
    rebuild_pair_votes(conn)


def _append_only_table(conn: Connection, table: str) -> None:
    """UPDATE and DELETE (and TRUNCATE) on ``table`` raise, as migrations 2 and 3 made them for the votes (the
    same triggers and statements: ``ragnarok_append_only()`` is migration 3's)."""
    if conn.dialect.name == "sqlite":
        for action in ("UPDATE", "DELETE"):
            conn.execute(text(_sqlite_trigger(table, action)))
    else:
        conn.execute(
            text(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE "
                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION ragnarok_append_only()"
            )
        )


def _m7_judge_votes(conn: Connection) -> None:
    """Votes cast by LLM (or proxy) judges (``ragnarok judge pairwise --arena``), their own append-only table:
    ``votes`` stays the human log (one vote a battle, counted in ``pair_votes`` for sampling) and no board
    mixes the two unless asked. One vote per battle and judge (``voter`` is ``judge:<name>``); ``verdicts``
    keeps the two orders' answers (``A/B``: A in the first order, B with the sides swapped)."""
    conn.execute(
        text("""
        CREATE TABLE judge_votes (
            battle_id VARCHAR(32) NOT NULL REFERENCES battles(id),
            voter VARCHAR(200) NOT NULL,
            voted_at VARCHAR(32) NOT NULL,
            winner VARCHAR(16) NOT NULL,
            verdicts VARCHAR(32) NOT NULL,
            PRIMARY KEY (battle_id, voter)
        )""")
    )
    conn.execute(text("CREATE INDEX judge_votes_voter ON judge_votes(voter, voted_at)"))
    _append_only_table(conn, "judge_votes")


def _m8_keys(conn: Connection) -> None:
    """API keys, what they spend and an audit log. ``api_keys`` holds a SHA-256 of each secret,
    never the secret; its one in-place change is ``revoked_at``. ``key_spend`` counts calls and tokens per owner
    (``key:ID``, ``arena``) and budget period, updated in place like ``pair_votes``; ``key_reservations`` holds
    the worst case of the requests in flight, deleted when each settles. ``audit_log`` is append-only."""
    serial = "INTEGER PRIMARY KEY" if conn.dialect.name == "sqlite" else "BIGSERIAL PRIMARY KEY"
    conn.execute(
        text(f"""
        CREATE TABLE api_keys (
            id {serial},
            name VARCHAR(200) NOT NULL UNIQUE,
            prefix VARCHAR(16) NOT NULL,
            secret_sha256 CHAR(64) NOT NULL UNIQUE,
            scopes VARCHAR(200) NOT NULL,
            generators TEXT,
            rpm INTEGER,
            parallel INTEGER,
            budget_calls BIGINT,
            budget_tokens BIGINT,
            period_s DOUBLE PRECISION,
            created_at VARCHAR(32) NOT NULL,
            created_epoch DOUBLE PRECISION NOT NULL,
            expires_epoch DOUBLE PRECISION,
            revoked_at VARCHAR(32)
        )""")
    )
    conn.execute(
        text("""
        CREATE TABLE key_spend (
            owner VARCHAR(200) NOT NULL,
            period_start DOUBLE PRECISION NOT NULL,
            calls BIGINT NOT NULL,
            tokens BIGINT NOT NULL,
            PRIMARY KEY (owner, period_start)
        )""")
    )
    conn.execute(
        text("""
        CREATE TABLE key_reservations (
            id VARCHAR(32) PRIMARY KEY,
            owner VARCHAR(200) NOT NULL,
            period_start DOUBLE PRECISION NOT NULL,
            calls BIGINT NOT NULL,
            created_epoch DOUBLE PRECISION NOT NULL
        )""")
    )
    conn.execute(text("CREATE INDEX key_reservations_owner ON key_reservations(owner, period_start)"))
    conn.execute(
        text(f"""
        CREATE TABLE audit_log (
            id {serial},
            at VARCHAR(32) NOT NULL,
            owner VARCHAR(200) NOT NULL,
            key_name VARCHAR(200) NOT NULL,
            method VARCHAR(16) NOT NULL,
            route VARCHAR(300) NOT NULL,
            status INTEGER NOT NULL,
            generators TEXT NOT NULL,
            calls INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            ms DOUBLE PRECISION NOT NULL
        )""")
    )
    conn.execute(text("CREATE INDEX audit_log_owner ON audit_log(owner, at)"))
    _append_only_table(conn, "audit_log")


def _m9_audit_row_ids(conn: Connection) -> None:
    """Each audit row carries the id it was queued with, unique, so that a batch written again (its commit
    applied but the acknowledgement lost when the database went away, then retried) adds no row twice; rows
    written before this have none."""
    conn.execute(text("ALTER TABLE audit_log ADD COLUMN row_id VARCHAR(32)"))
    conn.execute(text("CREATE UNIQUE INDEX audit_log_row_id ON audit_log(row_id)"))


def _m10_reservation_use(conn: Connection) -> None:
    """Each reservation counts the calls its request made (``used``, written before each call) and names the
    process that made it (``holder``: host, PID and start time), so that the reservation of a process that died
    is settled with what it really spent (:mod:`ragnarok.auth.reservations`)."""
    conn.execute(text("ALTER TABLE key_reservations ADD COLUMN used BIGINT NOT NULL DEFAULT 0"))
    conn.execute(text("ALTER TABLE key_reservations ADD COLUMN holder VARCHAR(200)"))


MIGRATIONS: list[Migration] = [
    (1, _m1_tables),
    (2, _m2_append_only),
    (3, _m3_append_only_postgresql),
    (4, _m4_rate_key),
    (5, _m5_pair_key),
    (6, _m6_pair_votes),
    (7, _m7_judge_votes),
    (8, _m8_keys),
    (9, _m9_audit_row_ids),
    (10, _m10_reservation_use),
]


def migrate(engine: Engine, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply pending migrations in order, each in its own serialised transaction; returns the schema version.
    Raises :class:`StoreError` (one line, no SQL) when the database cannot be migrated."""
    latest = max(v for v, _ in migrations)
    while True:
        version = 0
        try:
            with serialised(engine, LOCK) as conn:
                conn.execute(
                    text(
                        "CREATE TABLE IF NOT EXISTS schema_migrations "
                        "(version INTEGER PRIMARY KEY, applied_at VARCHAR(32) NOT NULL)"
                    )
                )
                done = {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}
                if max(done, default=0) > latest:
                    raise StoreError(
                        f"the vote store at {safe_url(str(engine.url))} has schema version "
                        f"{max(done)}, newer than this ragnarok knows ({latest}): "
                        "upgrade ragnarok"
                    )
                pending = [(v, step) for v, step in sorted(migrations, key=lambda m: m[0]) if v not in done]
                if not pending:
                    return latest
                version, step = pending[0]
                step(conn)
                conn.execute(text("INSERT INTO schema_migrations VALUES (:v, :t)"), {"v": version, "t": utc_now()})
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a driver error or a failing step: one line, never the SQL
            what = f"migrated to version {version}" if version else "opened"
            raise StoreError(
                f"the vote store at {safe_url(str(engine.url))} could not be {what}: {describe(exc)}"
            ) from exc
