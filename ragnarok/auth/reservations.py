"""A budget reservation is the durable record of its request's spend until the request settles it.

Each backend call is written into the reservation before it is made, so a call that reached a backend is on
disk even when the process is killed the next moment. A reservation whose request will never settle it
(its holder process is gone, or it outlived the TTL) is turned into spend exactly once by
:func:`settle_abandoned`, whoever gets there first.

Design notes: docs/internals/auth.md.
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

from ragnarok.auth.principal import Principal

DAY_S = 86_400.0


@dataclass(frozen=True)
class Reservation:
    id: str | None  # None: nothing reserved (no call budget)
    owner: str
    period_start: float
    calls: int
    token_limit: int | None  # tokens left in the period when the request started


def period_bounds(principal: Principal, now: float) -> tuple[float, float]:
    """The start and length of the principal's current budget period (no period: the UTC day, for usage)."""
    length = principal.period_s or DAY_S
    origin = principal.created_at if principal.period_s else 0.0
    start = origin + math.floor((now - origin) / length) * length
    return start, length


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat``, field 22), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def holder() -> str:
    """This process: ``host:pid:start``."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid()) or 0}"


def is_dead(name: str | None) -> bool:
    """Whether the holder ``name`` is a process of this host that no longer runs."""
    if not name:
        return False
    host, _, rest = name.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another host's process: only the TTL ends its reservations
    return _start_time(int(pid)) != start


def use(conn: Any, reservation_id: str) -> bool:
    """One more call on the reservation; False when it is gone (settled as abandoned meanwhile)."""
    done = conn.execute(text("UPDATE key_reservations SET used = used + 1 WHERE id = :id"), {"id": reservation_id})
    return done.rowcount == 1


def settle_abandoned(conn: Any, owner: str | None, expired_before: float) -> int:
    """Turn the abandoned reservations (of ``owner``, or everyone's) into spend; the calls they held."""
    where, args = ("WHERE owner = :o", {"o": owner}) if owner else ("", {})
    rows = conn.execute(
        text(f"SELECT id, owner, period_start, used, holder, created_epoch FROM key_reservations {where}"), args
    ).all()
    settled = 0
    for rid, who, period, used, name, created in rows:
        if created > expired_before and not is_dead(name):
            continue
        if conn.execute(text("DELETE FROM key_reservations WHERE id = :id"), {"id": rid}).rowcount != 1:
            continue
        if used:
            add_spend(conn, who, period, int(used), 0)
        settled += int(used)
    return settled


def add_spend(conn: Any, owner: str, period_start: float, calls: int, tokens: int) -> None:
    conn.execute(
        text(
            "INSERT INTO key_spend (owner, period_start, calls, tokens) VALUES (:o, :p, :c, :t) "
            "ON CONFLICT (owner, period_start) DO UPDATE SET calls = key_spend.calls + excluded.calls, "
            "tokens = key_spend.tokens + excluded.tokens"
        ),
        {"o": owner, "p": period_start, "c": calls, "t": tokens},
    )
