"""Judge votes in the vote log (``judge_votes``, migration 7): written by ``ragnarok judge pairwise --arena``,
read by the leaderboards' judge board and the judge-human agreement.

A judge vote is its own kind of vote: ``voter`` is ``judge:<judge name>`` (``judge:proxy`` for the proxy
judge), one vote per battle and judge, append-only like the human log. Human boards never count judge votes
unless a caller names the judges to mix in (:func:`board_rows` with ``judges``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from ragnarok.arena.db import StoreError, describe, safe_url, utc_now
from ragnarok.arena.store import StoredBattle, VoteRefused, VoteStore

PREFIX = "judge:"
JUDGE_OUTCOMES = ("a", "b", "tie")
MAX_BATCH = 10_000  # battles read for judging in one call


def voter_name(judge_name: str) -> str:
    """The vote log's voter for a judge: ``judge:<name>`` (at most 200 characters)."""
    return (PREFIX + judge_name)[:200]


def _fail(store: VoteStore, what: str, exc: SQLAlchemyError) -> StoreError:
    return StoreError(f"the vote store at {safe_url(str(store.engine.url))} could not {what}: {describe(exc)}")


def _battle(row: Any) -> StoredBattle:
    return StoredBattle(
        row[0],
        row[1],
        row[2],
        row[3],
        json.loads(row[4]),
        json.loads(row[5]),
        json.loads(row[6]) if row[6] else None,
        json.loads(row[7]) if row[7] else None,
        row[8],
        row[9],
        None,
    )


def unjudged(store: VoteStore, voter: str, limit: int = 1000) -> list[StoredBattle]:
    """Battles with both answers (no failed side) that ``voter`` has not voted on, oldest first, at most
    ``limit``. ``winner`` is left None: the human vote is not shown to the judge."""
    query = text(
        "SELECT b.id, b.mode, b.topic_id, b.topic, b.pipeline_a, b.pipeline_b, b.answer_a, b.answer_b, "
        "b.error_a, b.error_b FROM battles b WHERE b.answer_a IS NOT NULL AND b.answer_b IS NOT NULL "
        "AND b.error_a IS NULL AND b.error_b IS NULL AND NOT EXISTS (SELECT 1 FROM judge_votes j "
        "WHERE j.battle_id = b.id AND j.voter = :voter) ORDER BY b.created_at, b.id LIMIT :limit"
    )
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(query, {"voter": voter, "limit": max(0, min(limit, MAX_BATCH))}).all()
    except SQLAlchemyError as exc:
        raise _fail(store, "read the battles to judge", exc) from exc
    return [_battle(r) for r in rows]


def record(store: VoteStore, battle_id: str, voter: str, winner: str, verdicts: str) -> None:
    """One judge vote (``winner`` a, b or tie); a second vote of the same judge on a battle is refused."""
    if winner not in JUDGE_OUTCOMES:
        raise VoteRefused(f"a judge's winner is one of {', '.join(JUDGE_OUTCOMES)}", 422)
    if not voter.startswith(PREFIX):
        raise VoteRefused(f"a judge's voter name starts with {PREFIX!r}", 422)
    try:
        with store.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO judge_votes (battle_id, voter, voted_at, winner, verdicts) "
                    "VALUES (:id, :voter, :t, :w, :v)"
                ),
                {"id": battle_id, "voter": voter[:200], "t": utc_now(), "w": winner, "v": verdicts[:32]},
            )
    except IntegrityError:
        raise VoteRefused(
            f"{voter[:200]} has voted on battle {battle_id[:64]!r} already, or it does not exist", 409
        ) from None
    except SQLAlchemyError as exc:
        raise _fail(store, "record the judge's vote", exc) from exc


@dataclass(frozen=True)
class JudgeVote:
    voter: str
    battle_id: str
    pipeline_a: dict[str, str]
    pipeline_b: dict[str, str]
    winner: str  # the judge's: a, b or tie
    human: str | None  # the human vote on the same battle (a, b, tie, bothbad), if any


def judge_votes(store: VoteStore, include_unblinded: bool = False) -> list[JudgeVote]:
    """Every judge vote in vote order, with the human vote on the same battle where there is one."""
    query = text(
        "SELECT j.voter, j.battle_id, b.pipeline_a, b.pipeline_b, j.winner, v.winner, b.mode "
        "FROM judge_votes j JOIN battles b ON b.id = j.battle_id LEFT JOIN votes v ON v.battle_id = j.battle_id "
        "ORDER BY j.voted_at, j.battle_id, j.voter"
    )
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(query).all()
    except SQLAlchemyError as exc:
        raise _fail(store, "read the judge votes", exc) from exc
    return [
        JudgeVote(r[0], r[1], json.loads(r[2]), json.loads(r[3]), r[4], r[5])
        for r in rows
        if include_unblinded or r[6] == "blinded"
    ]


def board_rows(
    store: VoteStore, include_unblinded: bool = False, judges: Sequence[str] = ()
) -> list[tuple[dict[str, str], dict[str, str], str]]:
    """The human boards' battles ``(pipeline_a, pipeline_b, winner)`` in vote order, with the votes of the
    named ``judges`` (voters ``judge:<name>``) mixed in only when asked. Each judge counts as one more voter:
    a battle voted by a person and by two judges counts three times."""
    human = (
        "SELECT b.pipeline_a, b.pipeline_b, v.winner, b.mode, v.voted_at AS t, v.battle_id AS id "
        "FROM votes v JOIN battles b ON b.id = v.battle_id"
    )
    if not judges:
        query = text(f"{human} ORDER BY t, id")
        params: dict[str, Any] = {}
    else:
        query = text(
            f"{human} UNION ALL SELECT b.pipeline_a, b.pipeline_b, j.winner, b.mode, j.voted_at AS t, "
            "j.battle_id AS id FROM judge_votes j JOIN battles b ON b.id = j.battle_id "
            "WHERE j.voter IN :voters ORDER BY t, id"
        ).bindparams(bindparam("voters", expanding=True))
        params = {"voters": list(judges)}
    try:
        with store.engine.connect() as conn:
            rows = conn.execute(query, params).all()
    except SQLAlchemyError as exc:
        raise _fail(store, "read the votes", exc) from exc
    return [(json.loads(a), json.loads(b), w) for a, b, w, mode, _, _ in rows if include_unblinded or mode == "blinded"]
