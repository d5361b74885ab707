"""The audit log's rows in the service database: one per request (key, route, generators, calls, tokens,
status), written in batches and read back newest first.

Writing is idempotent (each row carries its ``row_id``), so a batch retried after a commit whose
acknowledgement was lost, or spooled rows written again by another process, add no row twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text


def write_rows(engine: Engine, batch: list[dict[str, Any]]) -> None:
    """Insert a batch of audit rows in one transaction; rows already written are skipped."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO audit_log (row_id, at, owner, key_name, method, route, status, generators, calls, "
                "tokens, ms) VALUES (:row_id, :at, :owner, :key_name, :method, :route, :status, :generators, "
                ":calls, :tokens, :ms) ON CONFLICT (row_id) DO NOTHING"
            ),
            batch,
        )


def read_rows(conn: Any, owner: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` audit rows, of ``owner`` alone when given."""
    where, args = ("WHERE owner = :o", {"o": owner, "n": limit}) if owner else ("", {"n": limit})
    rows = (
        conn.execute(
            text(
                f"SELECT at, owner, key_name, method, route, status, generators, calls, tokens, "
                f"ms FROM audit_log {where} ORDER BY id DESC LIMIT :n"
            ),
            args,
        )
        .mappings()
        .all()
    )
    return [dict(r) for r in rows]
