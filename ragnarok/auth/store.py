"""Keys, budgets and the audit log in the service database (the vote store's SQLite or PostgreSQL).

:class:`AuthStore` looks keys up by their hash (cached briefly, so a revocation reaches every worker within
``cache_s``), reserves a request's worst-case calls against its owner's budget in a transaction serialised per
owner, settles the reservation with what was really spent, and queues audit rows for a background writer so
that no request waits on the database. Spend that cannot be recorded while the database is away waits in a
backlog.

Design notes: docs/internals/auth.md.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ragnarok.arena.db import CONNECT_TIMEOUT_S, StoreError, describe, make_engine, safe_url, serialised, utc_now
from ragnarok.arena.migrations import migrate
from ragnarok.auth import audit as audit_log
from ragnarok.auth import budgets, reservations
from ragnarok.auth.backlog import Backlog, unreachable
from ragnarok.auth.keys import KEY_PREFIX, insert_key, new_secret, principal_of, secret_hash
from ragnarok.auth.principal import Principal
from ragnarok.auth.records import KEY_COLUMNS as _KEY_COLUMNS
from ragnarok.auth.records import KeyRecord, check_fields, when
from ragnarok.auth.records import record as _record
from ragnarok.auth.reservations import DAY_S, Reservation, period_bounds
from ragnarok.auth.spool import Spool
from ragnarok.auth.store_errors import AuthError, BudgetExceeded, Errors

# the key helpers and the errors are imported from here by the service and the command line
__all__ = ["KEY_PREFIX", "AuthError", "AuthStore", "BudgetExceeded", "database_url", "new_secret", "secret_hash"]

log = logging.getLogger(__name__)
#: Lookups remembered at most (unknown secrets included, so guessing keys costs no database reads).
CACHE_ENTRIES = 10_000


def database_url(settings: Any) -> str:
    """The service database: ``database_url``, else SQLite ``arena.db`` in the data directory."""
    if settings.database_url:
        return settings.database_url
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{settings.data_dir / 'arena.db'}"


_when = when


class AuthStore:
    """Keys, spend and audit at a SQLAlchemy URL, migrated on first use (see the module's docstring)."""

    _shared: dict[str, AuthStore] = {}
    _shared_lock = threading.Lock()

    def __init__(self, url: str, cache_s: float = 1.0, reservation_ttl_s: float = 900.0, spool_dir: Path | None = None):
        self._engine: Engine = make_engine(url)  # no connection yet: the database is opened on first use
        self._where = safe_url(url)
        self.cache_s, self.reservation_ttl_s = cache_s, reservation_ttl_s
        self._cache: OrderedDict[str, tuple[float, KeyRecord | None]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.spool = Spool(spool_dir) if spool_dir is not None else None
        self._audit = Backlog("ragnarok-audit", self._write_audit, "audit row", spool=self.spool)
        self._unsettled = Backlog("ragnarok-spend", self._write_spend, "request's spend")
        self._opened = False
        self._opening = threading.Lock()

    @property
    def engine(self) -> Engine:
        """The engine, its database migrated on first use (:class:`StoreError` while it cannot be): a store
        made while its database is unreachable opens once it is back, and what was queued meanwhile (audit
        rows, spends) waits in the backlogs instead of being lost."""
        if not self._opened:
            # one thread migrates; the others wait for it at most as long as one connection attempt, then fail
            # as a connection not had in time does (unreachable: the backlogs keep their rows and try again)
            if not self._opening.acquire(timeout=CONNECT_TIMEOUT_S):
                raise StoreError(
                    f"the service database at {self._where} could not be opened: another thread "
                    f"is still opening it ({CONNECT_TIMEOUT_S} s)"
                ) from PoolTimeout("still opening")
            try:
                if not self._opened:
                    migrate(self._engine)
                    self._opened = True
            except StoreError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise StoreError(f"the service database at {self._where} cannot be opened: {describe(exc)}") from exc
            finally:
                self._opening.release()
        return self._engine

    @classmethod
    def for_settings(cls, settings: Any) -> AuthStore:
        """One store per database URL in this process (keys looked up by one cache)."""
        url = database_url(settings)
        with cls._shared_lock:
            store = cls._shared.get(url)
            if store is None or store.cache_s != settings.auth_cache_s:
                store = cls._shared[url] = cls(
                    url,
                    cache_s=settings.auth_cache_s,
                    reservation_ttl_s=max(900.0, 2 * settings.gateway_timeout_s),
                    spool_dir=settings.data_dir / "spool",
                )
            return store

    # -- keys ---------------------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        scopes: list[str],
        generators: list[str] | None = None,
        rpm: int | None = None,
        parallel: int | None = None,
        budget_calls: int | None = None,
        budget_tokens: int | None = None,
        period_s: float | None = None,
        expires_in_s: float | None = None,
    ) -> tuple[KeyRecord, str]:
        """A new key and its secret (shown once; only its hash is stored)."""
        name = check_fields(
            name,
            scopes,
            {"rpm": rpm, "parallel": parallel, "budget_calls": budget_calls, "budget_tokens": budget_tokens},
            period_s,
            expires_in_s,
        )
        if (budget_calls is not None or budget_tokens is not None) and period_s is None:
            period_s = DAY_S
        secret = new_secret()
        limits = {"rpm": rpm, "parallel": parallel, "budget_calls": budget_calls, "budget_tokens": budget_tokens}
        with self._errors("create a key"), serialised(self.engine, "ragnarok.auth.keys") as conn:
            row = insert_key(conn, name, secret, scopes, generators, limits, period_s, expires_in_s)
        return _record(row), secret

    def ping(self) -> None:
        """One round trip to the database (readiness); :class:`StoreError` when it does not answer."""
        with self._errors("answer a ping"), self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def keys(self) -> list[KeyRecord]:
        with self._errors("list the keys"), self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(text(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY id"))]

    def find(self, ident: str) -> KeyRecord:
        """A key by id or name; ``LookupError`` naming it when there is none."""
        column, value = ("id", int(ident)) if ident.strip().isdigit() else ("name", ident)
        with self._errors("read a key"), self.engine.connect() as conn:
            row = conn.execute(text(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE {column} = :v"), {"v": value}).first()
        if row is None:
            raise LookupError(f"no key {ident!r} (ragnarok keys list)")
        return _record(row)

    def revoke(self, ident: str) -> KeyRecord:
        key = self.find(ident)
        with self._errors("revoke a key"), serialised(self.engine, "ragnarok.auth.keys") as conn:
            conn.execute(
                text("UPDATE api_keys SET revoked_at = :t WHERE id = :id AND revoked_at IS NULL"),
                {"t": utc_now(), "id": key.id},
            )
        with self._cache_lock:
            self._cache.clear()
        return self.find(str(key.id))

    def cached(self, secret: str) -> Principal | None:
        """:meth:`lookup` from the cache alone (no database read): None when it would have to read."""
        digest = secret_hash(secret)
        with self._cache_lock:
            hit = self._cache.get(digest)
            if hit is None or time.monotonic() - hit[0] >= self.cache_s:
                return None
            self._cache.move_to_end(digest)
        return self._principal(hit[1])

    def lookup(self, secret: str) -> Principal:
        """The principal of ``secret``, or :class:`AuthError` saying why not (read through the cache)."""
        if (found := self.cached(secret)) is not None:
            return found
        digest = secret_hash(secret)
        now = time.monotonic()
        with self._errors("check a key"), self.engine.connect() as conn:
            row = conn.execute(
                text(f"SELECT {_KEY_COLUMNS}, secret_sha256 FROM api_keys WHERE secret_sha256 = :h"), {"h": digest}
            ).first()
        record = _record(row) if row is not None and hmac.compare_digest(row[-1], digest) else None
        with self._cache_lock:
            self._cache[digest] = (now, record)
            self._cache.move_to_end(digest)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return self._principal(record)

    @staticmethod
    def _principal(record: KeyRecord | None) -> Principal:
        return principal_of(record)

    # -- budgets ------------------------------------------------------------------------------------------

    def _spent(self, conn: Any, owner: str, start: float) -> tuple[int, int]:
        return budgets.spent(conn, owner, start)

    def _reserved(self, conn: Any, owner: str, start: float, now: float) -> int:
        return budgets.reserved(conn, owner, start, now - self.reservation_ttl_s)

    def reserve(self, principal: Principal, calls: int) -> Reservation:
        """Reserve ``calls`` from the principal's budget (see the module's docstring), or raise
        :class:`BudgetExceeded` saying what is left and when the period ends."""
        now = time.time()
        start, length = period_bounds(principal, now)
        if not principal.has_budget:
            return Reservation(None, principal.owner, start, calls, None)
        retry, reservation_id = max(1.0, start + length - now), uuid.uuid4().hex
        with (
            self._errors("reserve a budget"),
            serialised(self.engine, f"ragnarok.auth.budget:{principal.owner}") as conn,
        ):  # a refusal is raised once this commits (the abandoned reservations settled stay so)
            reservations.settle_abandoned(conn, principal.owner, now - self.reservation_ttl_s)
            spent_calls, spent_tokens = self._spent(conn, principal.owner, start)
            left = (
                principal.budget_calls - spent_calls - self._reserved(conn, principal.owner, start, now)
                if principal.budget_calls is not None
                else calls
            )
            refusal = budgets.refusal(principal, calls, left, spent_tokens, start + length)
            if refusal is None:
                budgets.insert_reservation(conn, reservation_id, principal.owner, start, calls, now)
        if refusal is not None:
            raise BudgetExceeded(refusal, retry)
        token_limit = None if principal.budget_tokens is None else principal.budget_tokens - spent_tokens
        return Reservation(reservation_id, principal.owner, start, calls, token_limit)

    def unreserved(self, principal: Principal) -> Reservation:
        """Nothing reserved, in the principal's current period: to record the spend of a key without a budget."""
        return Reservation(None, principal.owner, period_bounds(principal, time.time())[0], 0, None)

    def settle(self, reservation: Reservation, calls: int, tokens: int) -> None:
        """The request is over: its reservation goes, what it spent is counted. When the database cannot be
        reached the spend waits in the backlog (its reservation counting meanwhile: the budget is never
        overspent) and is recorded when it is back."""
        if reservation.id is None and not calls and not tokens:
            return
        try:
            with self._errors("record spend"):
                self._write_spend([(reservation, calls, tokens)])
        except StoreError as exc:
            if not unreachable(exc):
                raise
            log.warning(
                "the spend of a request of %s (%d calls) waits for the database: %s", reservation.owner, calls, exc
            )
            self._unsettled.put((reservation, calls, tokens))

    def _write_spend(self, spends: list[tuple[Reservation, int, int]]) -> None:
        """Settle each ``(reservation, calls, tokens)`` in its own transaction; a reservation already gone
        (settled before, its answer lost) adds nothing."""
        for reservation, calls, tokens in spends:
            with serialised(self.engine, f"ragnarok.auth.budget:{reservation.owner}") as conn:
                if reservation.id is not None:
                    gone = conn.execute(text("DELETE FROM key_reservations WHERE id = :id"), {"id": reservation.id})
                    if gone.rowcount == 0:
                        continue
                if calls or tokens:
                    reservations.add_spend(conn, reservation.owner, reservation.period_start, calls, tokens)

    def record_call(self, reservation: Reservation) -> None:
        """One backend call of the request, written before it is made (:mod:`ragnarok.auth.reservations`);
        :class:`StoreError` when it cannot be: the call is not made."""
        with self._errors("record a backend call"), self.engine.begin() as conn:
            if not reservations.use(conn, reservation.id):
                raise StoreError("the request's reservation was settled as abandoned (past its TTL)")

    def sweep(self) -> int:
        """Settle every abandoned reservation (each owner's under its budget lock) and write the spooled audit
        rows of dead processes of this host (:mod:`ragnarok.auth.spool`); the calls counted."""
        with self._errors("settle abandoned reservations"):
            for path, rows in self.spool.orphans() if self.spool is not None else ():
                for i in range(0, len(rows), 500):
                    self._write_audit(rows[i : i + 500])
                path.unlink(missing_ok=True)
            with self.engine.connect() as conn:
                owners = [r[0] for r in conn.execute(text("SELECT DISTINCT owner FROM key_reservations"))]
            settled = 0
            for owner in owners:
                with serialised(self.engine, f"ragnarok.auth.budget:{owner}") as conn:
                    settled += reservations.settle_abandoned(conn, owner, time.time() - self.reservation_ttl_s)
            return settled

    def left(self, principal: Principal) -> int | None:
        """Calls left in the principal's current period (None: no call budget)."""
        if principal.budget_calls is None:
            return None
        now = time.time()
        start, _ = period_bounds(principal, now)
        with self._errors("read a budget"), self.engine.connect() as conn:
            spent, _tokens = self._spent(conn, principal.owner, start)
            return max(0, principal.budget_calls - spent - self._reserved(conn, principal.owner, start, now))

    def usage(self, owner: str | None = None) -> list[dict[str, Any]]:
        """Spend per owner and period, newest first."""
        where, args = ("WHERE owner = :o", {"o": owner}) if owner else ("", {})
        with self._errors("read the usage"), self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT owner, period_start, calls, tokens FROM key_spend {where} "
                    "ORDER BY period_start DESC, owner"
                ),
                args,
            ).all()
        return [{"owner": o, "period_start": _when(p), "calls": int(c), "tokens": int(t)} for o, p, c, t in rows]

    # -- audit --------------------------------------------------------------------------------------------

    def audit(self, row: dict[str, Any]) -> None:
        """Queue one audit row (written by a background thread in batches)."""
        self._audit.put({**row, "at": utc_now(), "row_id": uuid.uuid4().hex})

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait (at most ``timeout_s``) until every queued audit row and waiting spend is written (tests,
        shutdown); whether they were."""
        started = time.monotonic()
        spends = self._unsettled.flush(timeout_s)
        return self._audit.flush(max(0.0, timeout_s - (time.monotonic() - started))) and spends

    def _write_audit(self, batch: list[dict[str, Any]]) -> None:
        """Idempotent: a batch retried after a commit whose acknowledgement was lost adds no row twice."""
        audit_log.write_rows(self.engine, batch)

    def audit_rows(self, owner: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        with self._errors("read the audit log"), self.engine.connect() as conn:
            return audit_log.read_rows(conn, owner, limit)

    def _errors(self, what: str) -> Any:
        return Errors(self._where, what)
