"""Every judgment is kept in SQLite (``judgments.db`` in ``data_dir``), keyed by the judge model, the prompt
and its version, and a hash of the inputs: a rerun costs nothing and a killed evaluation resumes. Each
judgment is committed as soon as it is made."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ragnarok.runtime import metrics

SCHEMA = """CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY, judge TEXT NOT NULL, prompt TEXT NOT NULL, result TEXT NOT NULL, raw TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (datetime('now')))"""


def judgment_key(judge: str, prompt: str, inputs: Any) -> str:
    blob = json.dumps([judge, prompt, inputs], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgeCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL: a commit is durable once written to the WAL (a killed process
            # keeps it; only a power cut can lose the last ones, which a rerun judges again), without the
            # ~5 ms fsync per commit that FULL costs (a judged topic commits once: 64 topics, ~0.3 s)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(SCHEMA)
            conn.commit()
            self._conn = conn
        return self._conn

    def get(self, key: str) -> tuple[Any, str] | None:
        """(result, raw output) of a judgment made before, or None."""
        with self._lock:
            row = self._db().execute("SELECT result, raw FROM judgments WHERE key = ?", (key,)).fetchone()
        metrics.cache_lookup("judgment", row is not None)
        return None if row is None else (json.loads(row[0]), row[1])

    def put(self, key: str, judge: str, prompt: str, result: Any, raw: str) -> None:
        with self._lock:
            db = self._db()
            db.execute(
                "INSERT OR REPLACE INTO judgments (key, judge, prompt, result, raw) VALUES (?, ?, ?, ?, ?)",
                (key, judge, prompt, json.dumps(result), raw),
            )
            db.commit()

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        """key -> result of the judgments made before (one query per 500 keys)."""
        out: dict[str, Any] = {}
        with self._lock:
            db = self._db()
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows = db.execute(
                    f"SELECT key, result FROM judgments WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                out.update((k, json.loads(r)) for k, r in rows)
        return out

    def put_many(self, rows: list[tuple[str, str, str, Any, str]]) -> None:
        """``(key, judge, prompt, result, raw)`` rows in one transaction."""
        with self._lock:
            db = self._db()
            db.executemany(
                "INSERT OR REPLACE INTO judgments (key, judge, prompt, result, raw) VALUES (?, ?, ?, ?, ?)",
                [(k, j, p, json.dumps(r), raw) for k, j, p, r, raw in rows],
            )
            db.commit()

    def count(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT count(*) FROM judgments").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
