"""API keys as the database holds them: secrets and their hashes, the row a new key is written as, and the
principal a key's record stands for (or why it stands for none).

A key is 256 random bits shown once when it is made; the database keeps only its SHA-256, which is as strong
as the secret for a value that random. :class:`~ragnarok.auth.store.AuthStore` runs these in its own
transactions and caches what a lookup found.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from sqlalchemy import text

from ragnarok.arena.db import utc_now
from ragnarok.auth.principal import SCOPES, Principal
from ragnarok.auth.records import KEY_COLUMNS, KeyRecord, when
from ragnarok.auth.store_errors import AuthError

KEY_PREFIX = "rk_"


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def insert_key(
    conn: Any,
    name: str,
    secret: str,
    scopes: list[str],
    generators: list[str] | None,
    limits: dict[str, int | None],
    period_s: float | None,
    expires_in_s: float | None,
) -> Any:
    """Write a new key (its name checked to be free: ``ValueError`` naming it otherwise) and read its row back.
    ``limits``: ``rpm``, ``parallel``, ``budget_calls`` and ``budget_tokens``."""
    now = time.time()
    values = {
        "name": name,
        "prefix": secret[:11],
        "h": secret_hash(secret),
        "scopes": ",".join(s for s in SCOPES if s in scopes),
        "gens": None if generators is None else json.dumps(sorted(set(generators))),
        "rpm": limits["rpm"],
        "parallel": limits["parallel"],
        "bc": limits["budget_calls"],
        "bt": limits["budget_tokens"],
        "period": period_s,
        "at": utc_now(),
        "epoch": now,
        "exp": None if expires_in_s is None else now + expires_in_s,
    }
    if conn.execute(text("SELECT 1 FROM api_keys WHERE name = :n"), {"n": name}).first():
        raise ValueError(f"a key named {name!r} exists already (ragnarok keys list)")
    conn.execute(
        text(
            "INSERT INTO api_keys (name, prefix, secret_sha256, scopes, generators, rpm, parallel, budget_calls, "
            "budget_tokens, period_s, created_at, created_epoch, expires_epoch) VALUES (:name, :prefix, :h, "
            ":scopes, :gens, :rpm, :parallel, :bc, :bt, :period, :at, :epoch, :exp)"
        ),
        values,
    )
    return conn.execute(text(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE name = :n"), {"n": name}).one()


def principal_of(record: KeyRecord | None) -> Principal:
    """The principal a key's record stands for, or :class:`AuthError` saying why it stands for none."""
    if record is None:
        raise AuthError("unknown API key")
    status = record.status()
    if status == "invalid":
        raise AuthError(f"API key {record.name!r} cannot be used: its record is invalid")
    if status == "revoked":
        raise AuthError(f"API key {record.name!r} was revoked")
    if status == "expired":
        raise AuthError(f"API key {record.name!r} expired at {when(record.expires_epoch or 0)}")
    return record.principal()
