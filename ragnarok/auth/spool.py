"""Audit rows that wait for the service database, kept on local disk too, so that a process killed while they
wait (``kill -9`` during an outage) loses none of them.

While the database cannot take the audit log's rows, the :class:`~ragnarok.auth.backlog.Backlog` copies
them into this process's spool, a SQLite file ``audit-HOLDER.db`` in the data directory's ``spool/`` (HOLDER:
host, PID and start time, :func:`ragnarok.auth.reservations.holder`), and deletes them from it once written.
The spool of a process that died is written by another process of the same host
(:meth:`~ragnarok.auth.store.AuthStore.sweep`): rows carry their ``row_id``, so one written twice is
counted once. Nothing is written in the normal path: only while the database is away.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragnarok.auth import reservations

log = logging.getLogger(__name__)


class Spool:
    """This process's spool in ``directory`` (made on first use)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.path = directory / f"audit-{reservations.holder()}.db"

    @staticmethod
    @contextmanager
    def _open(path: Path) -> Iterator[sqlite3.Connection]:
        """A connection to the spool at ``path``, committed and closed on the way out."""
        conn = sqlite3.connect(path, timeout=5)
        try:
            with conn:
                conn.execute("CREATE TABLE IF NOT EXISTS rows (row_id TEXT PRIMARY KEY, row TEXT NOT NULL)")
                yield conn
        finally:
            conn.close()

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Keep ``rows`` (again: a row kept before is kept once)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._open(self.path) as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO rows VALUES (?, ?)", [(r["row_id"], json.dumps(r)) for r in rows]
                )
        except (OSError, sqlite3.Error) as exc:
            log.error("%d audit row(s) are kept in memory only (the spool %s: %s)", len(rows), self.path, exc)

    def remove(self, rows: list[dict[str, Any]]) -> None:
        """Forget ``rows`` (written to the database)."""
        try:
            with self._open(self.path) as conn:
                conn.executemany("DELETE FROM rows WHERE row_id = ?", [(r["row_id"],) for r in rows])
        except (OSError, sqlite3.Error) as exc:
            log.error("the spool %s could not forget %d written row(s): %s", self.path, len(rows), exc)

    def orphans(self) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
        """The spools of processes of this host that died, each with its rows."""
        for path in sorted(self.directory.glob("audit-*.db")):
            if path != self.path and reservations.is_dead(path.stem.removeprefix("audit-")):
                try:
                    with self._open(path) as conn:
                        rows = [json.loads(r) for (r,) in conn.execute("SELECT row FROM rows")]
                except (OSError, sqlite3.Error) as exc:
                    log.error("the spool %s cannot be read: %s", path, exc)
                    continue
                yield path, rows
