"""The vote log's database: engines for SQLite and PostgreSQL, serialised write transactions, clear errors.

Two dialects are supported, each with its own way of serialising the writers that must not interleave (the
migrations; the count-then-insert of a rate-limited vote):

* SQLite: pysqlite's own transaction handling is switched off (it would run DDL outside any transaction) and
  every transaction is opened explicitly, as SQLAlchemy's documentation shows for pysqlite; a serialised
  write transaction is ``BEGIN IMMEDIATE``, which takes the database's one write lock before anything is read.
* PostgreSQL (``psycopg``, the ``postgres`` extra): a transaction-scoped advisory lock on a 64-bit hash of the
  lock's name, taken first in the transaction and released when it ends.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

DIALECTS = ("sqlite", "postgresql")
#: Every PostgreSQL call has a deadline, so that a database that is gone or hangs is an error within seconds,
#: never a request that waits (the API answers 503 with ``Retry-After``): seconds to connect, seconds to wait
#: for a pooled connection (past it the database is *busy*, not down), and the longest statement (an advisory
#: lock's wait included) on the server's side. On the client's side, TCP keepalives and ``tcp_user_timeout``
#: end a connection to a host that went away; a database that is up but frozen (SIGSTOP: its kernel still
#: answers TCP) is bounded by the request's own deadline on every store call, ``STORE_DEADLINE_S``
#: (api/auth.py).
CONNECT_TIMEOUT_S = 3
POOL_TIMEOUT_S = 2.0
POOL_SIZE, POOL_OVERFLOW = 8, 16  # per process: 3 instances hold at most 72 of PostgreSQL's default 100
STATEMENT_TIMEOUT_MS = 15_000
STORE_DEADLINE_S = 4.0  # a frozen database: the 503 within 5 s, the HTTP hops included
TCP_USER_TIMEOUT_MS = 5_000
_BEGIN = "ragnarok_begin"  # execution option: the statement that opens a SQLite transaction


class StoreError(RuntimeError):
    """The vote store cannot do its work (unreachable, locked, a migration failed): one line, never SQL."""


class StoreBusy(StoreError):
    """No pooled connection freed within ``POOL_TIMEOUT_S``: the database is up, this process has too many
    requests on it."""


class StoreTimeout(StoreError):
    """A store call did not answer within ``STORE_DEADLINE_S`` (the database frozen, or overwhelmed)."""


def utc_now() -> str:
    """The timestamps the log stores: ISO 8601 UTC with microseconds (they sort as strings)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(an invalid database URL)"


def describe(exc: BaseException) -> str:
    """The driver's first line for a database error (SQLAlchemy's own text appends the SQL and parameters)."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        first = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
        return f"{type(exc.orig).__name__}: {first[:200]}"
    if isinstance(exc, SQLAlchemyError):
        return type(exc).__name__
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def make_engine(url: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL (``postgresql://`` means psycopg 3)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(f"not a database URL: {url[:200]!r}") from None
    if parsed.get_backend_name() not in DIALECTS:
        raise StoreError(f"the vote store supports SQLite and PostgreSQL, not {parsed.get_backend_name()!r}")
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        # deadlines (above); a pooled connection is checked before use, so that the first requests after the
        # server's restart get a fresh one instead of an error
        options = {
            "pool_pre_ping": True,
            "pool_timeout": POOL_TIMEOUT_S,
            "pool_size": POOL_SIZE,
            "max_overflow": POOL_OVERFLOW,
            "connect_args": {
                "connect_timeout": CONNECT_TIMEOUT_S,
                "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                "keepalives": 1,
                "keepalives_idle": 5,
                "keepalives_interval": 1,
                "keepalives_count": 3,
                "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
            },
        }
    try:
        engine = create_engine(parsed, **options)
    except ImportError as exc:  # the driver is missing
        raise StoreError(f"PostgreSQL needs its driver: pip install 'ragnarok-rag[postgres]' ({exc})") from None
    if engine.dialect.name == "sqlite":
        _sqlite_transactions(engine)
    return engine


def _sqlite_transactions(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _: Any) -> None:
        dbapi_conn.isolation_level = None  # pysqlite emits no BEGIN/COMMIT itself: DDL stays transactional
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA busy_timeout=30000")  # first: switching to WAL waits for other openers too
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get(_BEGIN, "BEGIN"))


def lock_id(name: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_xact_lock``."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


@contextmanager
def serialised(engine: Engine, name: str) -> Iterator[Connection]:
    """A write transaction that no other transaction serialised on ``name`` overlaps (on SQLite: none at all
    that writes). Commits on success, rolls back on any exception."""
    if engine.dialect.name == "sqlite":
        with engine.execution_options(**{_BEGIN: "BEGIN IMMEDIATE"}).begin() as conn:
            yield conn
    else:
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_id(name)})
            yield conn
