"""A budget's arithmetic inside the reserving transaction: what the period has spent, what the requests in
flight hold, and the refusal when one more request's worst case does not fit.

:meth:`~ragnarok.auth.store.AuthStore.reserve` runs these on a connection serialised per owner, so the count
and the insert of a reservation cannot interleave with another request's, across processes and instances.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from ragnarok.auth import reservations
from ragnarok.auth.principal import Principal
from ragnarok.auth.records import when


def spent(conn: Any, owner: str, start: float) -> tuple[int, int]:
    """The calls and tokens the owner has spent in the period starting at ``start``."""
    row = conn.execute(
        text("SELECT calls, tokens FROM key_spend WHERE owner = :o AND period_start = :p"), {"o": owner, "p": start}
    ).first()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def reserved(conn: Any, owner: str, start: float, since: float) -> int:
    """The calls the owner's reservations made after ``since`` hold in the period starting at ``start``."""
    return int(
        conn.execute(
            text(
                "SELECT COALESCE(SUM(calls), 0) FROM key_reservations WHERE owner = :o AND period_start = :p "
                "AND created_epoch > :since"
            ),
            {"o": owner, "p": start, "since": since},
        ).scalar()
    )


def refusal(principal: Principal, calls: int, left: int, spent_tokens: int, end: float) -> str | None:
    """Why a request of ``calls`` calls in the worst case does not fit (None: it does), saying what is left and
    when the period ends."""
    if principal.budget_tokens is not None and spent_tokens >= principal.budget_tokens:
        return (
            f"{principal.name}'s token budget ({principal.budget_tokens:,} a period) is spent; the "
            f"period ends at {when(end)}"
        )
    if calls > left:
        return (
            f"this request could make {calls} backend call(s) in the worst case; {principal.name}'s "
            f"budget has {max(0, left)} of {principal.budget_calls:,} left until {when(end)}"
        )
    return None


def insert_reservation(conn: Any, reservation_id: str, owner: str, start: float, calls: int, now: float) -> None:
    """The reservation's row, naming this process as its holder (:func:`ragnarok.auth.reservations.holder`)."""
    conn.execute(
        text(
            "INSERT INTO key_reservations (id, owner, period_start, calls, created_epoch, "
            "holder) VALUES (:id, :o, :p, :c, :t, :h)"
        ),
        {"id": reservation_id, "o": owner, "p": start, "c": calls, "t": now, "h": reservations.holder()},
    )
