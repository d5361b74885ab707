"""A key's row: what ``ragnarok keys create`` may write (:func:`check_fields`: every value checked before
anything is written) and how a row reads back (:func:`record`: any row, one an older version or a hand edit
left with odd values included, reads as a :class:`KeyRecord`; what is wrong with it is in ``problems``, and such
a key is ``invalid``: it is listed, marked, and authenticates nothing)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ragnarok.auth.principal import SCOPES, Principal

#: Bounds of a key's numbers: what the database's columns hold (``rpm`` and ``parallel`` are 32-bit on
#: PostgreSQL) and a date any clock can show (periods and expiries at most 100 years).
MAX_RATE = 1_000_000_000
MAX_BUDGET = 10**15
MAX_DURATION_S = 100 * 365.25 * 86_400.0
_LIMITS = (
    ("rpm", 1, MAX_RATE),
    ("parallel", 1, MAX_RATE),
    ("budget_calls", 0, MAX_BUDGET),
    ("budget_tokens", 0, MAX_BUDGET),
)


def when(epoch: float | None) -> str:
    """``epoch`` as ISO 8601 UTC seconds ("" for None; one no calendar shows is written as the number)."""
    if epoch is None:
        return ""
    try:
        return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError, TypeError):
        return f"epoch {epoch!r}"


def check_fields(
    name: str, scopes: list[str], limits: dict[str, int | None], period_s: float | None, expires_in_s: float | None
) -> str:
    """The key's name, stripped, once every value is one the store writes and reads back; else
    ``ValueError`` saying which is not (one line, naming the option)."""
    name = name.strip()
    if not name or len(name) > 200 or not name.isprintable():
        raise ValueError("a key's name has 1 to 200 printable characters")
    if name.isdigit():
        raise ValueError(f"a key's name cannot be a number ({name}): numbers name keys by id")
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise ValueError(f"scopes are {', '.join(SCOPES)}; got {', '.join(unknown) or 'none'}")
    for what, low, high in _LIMITS:
        value = limits.get(what)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
            raise ValueError(f"--{what.replace('_', '-')} is an integer from {low} to {high:,}")
    for what, value in (("period", period_s), ("expires", expires_in_s)):
        if value is not None and not (isinstance(value, (int, float)) and 0 < value <= MAX_DURATION_S):
            raise ValueError(f"--{what} is a duration from 1s to 100 years (36525d)")
    return name


@dataclass(frozen=True)
class KeyRecord:
    id: int
    name: str
    prefix: str
    scopes: tuple[str, ...]
    generators: tuple[str, ...] | None
    rpm: int | None
    parallel: int | None
    budget_calls: int | None
    budget_tokens: int | None
    period_s: float | None
    created_at: str
    created_epoch: float
    expires_epoch: float | None
    revoked_at: str | None
    problems: tuple[str, ...] = ()  # the columns whose value could not be read: the key is invalid

    def principal(self) -> Principal:
        return Principal(
            owner=f"key:{self.id}",
            name=self.name,
            scopes=frozenset(self.scopes),
            generators=None if self.generators is None else frozenset(self.generators),
            rpm=self.rpm,
            parallel=self.parallel,
            budget_calls=self.budget_calls,
            budget_tokens=self.budget_tokens,
            period_s=self.period_s,
            created_at=self.created_epoch,
            expires_at=self.expires_epoch,
            key_id=self.id,
        )

    def status(self, now: float | None = None) -> str:
        if self.problems:
            return "invalid"
        if self.revoked_at:
            return "revoked"
        if self.expires_epoch is not None and (now or time.time()) >= self.expires_epoch:
            return "expired"
        return "active"


KEY_COLUMNS = (
    "id, name, prefix, scopes, generators, rpm, parallel, budget_calls, budget_tokens, period_s, "
    "created_at, created_epoch, expires_epoch, revoked_at"
)


class _Reader:
    """One row's columns read leniently: a value of the wrong type or out of bounds is noted, not raised."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, column: str, default: Any) -> Any:
        self.problems.append(column)
        return default

    def text(self, column: str, value: Any, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        return value if isinstance(value, str) else self.bad(column, "" if value is None else repr(value)[:80])

    def integer(self, column: str, value: Any, low: int, high: int) -> int | None:
        if value is None:
            return None
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return value if ok else self.bad(column, None)

    def number(self, column: str, value: Any, optional: bool = True) -> float | None:
        if value is None and optional:
            return None
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            return self.bad(column, None if optional else 0.0)
        return number if math.isfinite(number) and abs(number) < 1e11 else self.bad(column, None if optional else 0.0)

    def names(self, column: str, value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        try:
            names = json.loads(value)
        except (TypeError, ValueError):
            return self.bad(column, ())
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return self.bad(column, ())
        return tuple(names)


def record(row: Any) -> KeyRecord:
    """The row (:data:`KEY_COLUMNS`) as a record; never raises."""
    read = _Reader()
    key_id = read.integer("id", row[0], -(2**63), 2**63 - 1)
    scopes = read.text("scopes", row[3])
    scope_list = tuple(s for s in scopes.split(",") if s)
    if set(scope_list) - set(SCOPES):
        read.bad("scopes", ())
    bounds = {what: (low, high) for what, low, high in _LIMITS}
    return KeyRecord(
        id=key_id if key_id is not None else 0,
        name=read.text("name", row[1]),
        prefix=read.text("prefix", row[2]),
        scopes=scope_list,
        generators=read.names("generators", row[4]),
        rpm=read.integer("rpm", row[5], *bounds["rpm"]),
        parallel=read.integer("parallel", row[6], *bounds["parallel"]),
        budget_calls=read.integer("budget_calls", row[7], *bounds["budget_calls"]),
        budget_tokens=read.integer("budget_tokens", row[8], *bounds["budget_tokens"]),
        period_s=_positive(read, "period_s", read.number("period_s", row[9])),
        created_at=read.text("created_at", row[10]),
        created_epoch=read.number("created_epoch", row[11], False) or 0.0,
        expires_epoch=read.number("expires_epoch", row[12]),
        revoked_at=read.text("revoked_at", row[13], True),
        problems=tuple(dict.fromkeys(read.problems)),
    )


def _positive(read: _Reader, column: str, value: float | None) -> float | None:
    return value if value is None or value > 0 else read.bad(column, None)
