"""A judge votes on the arena's battles (``ragnarok judge pairwise --arena``), and how often it agrees with
the people who voted on the same battles.

Each battle is judged twice with the sides swapped: the same side preferred both times wins, two different
answers (or two ties) make a tie. A judgment that cannot be read (after the judge's one reminder) casts no
vote: the battle is counted as failed and judged again next time, never guessed. Votes go to the vote log's
``judge_votes`` (:mod:`ragnarok.arena.judge_log`) as voter ``judge:<name>``, one per battle and judge, so a
rerun only judges the battles that are new (and the cache makes the ones judged before free).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragnarok.arena.judge_log import JudgeVote, record, unjudged, voter_name
from ragnarok.arena.store import StoredBattle, VoteStore
from ragnarok.core.settings import Settings
from ragnarok.judge.service import Judge, run_all

MAX_ANSWER_CHARS = 8_000  # of each answer shown to the judge
SWAP = {"A": "B", "B": "A", "tie": "tie"}


def vote_log_url(settings: Settings) -> str:
    """The vote log the arena writes (the same rule as ``webui.arena.database_url``): ``database_url``, else
    SQLite ``arena.db`` in the data directory."""
    if settings.database_url:
        return settings.database_url
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{settings.data_dir / 'arena.db'}"


def answer_text(answer: Mapping[str, Any] | None) -> str:
    """The text of a stored RAG answer (its sentences joined), at most MAX_ANSWER_CHARS."""
    if not answer:
        return ""
    body = answer.get("answer")
    if isinstance(body, str):
        text = body
    elif isinstance(body, list):
        text = " ".join(s["text"] for s in body if isinstance(s, dict) and isinstance(s.get("text"), str))
    else:
        text = ""
    return text.strip()[:MAX_ANSWER_CHARS]


def two_orders(judge: Judge, query: str, answer_a: str, answer_b: str) -> tuple[str | None, str]:
    """``(winner, verdicts)``: winner ``a``, ``b`` or ``tie`` (None when a judgment could not be read);
    ``verdicts`` the two raw answers, ``first/second`` (the second with the sides swapped)."""
    first = judge.prefer(query, answer_a, answer_b)
    second = judge.prefer(query, answer_b, answer_a)
    verdicts = f"{first or '?'}/{second or '?'}"
    if first is None or second is None:
        return None, verdicts
    return (first.lower() if first == SWAP[second] else "tie"), verdicts


@dataclass(frozen=True)
class ArenaJudging:
    voter: str
    judged: int  # votes cast now
    failed: list[str]  # battles whose judgment could not be read (no vote; judged again next time)
    counts: dict[str, int]  # a, b, tie among the votes cast now


def judge_arena(
    judge: Judge, store: VoteStore, limit: int = 1000, concurrency: int = 4, progress: bool | None = None
) -> ArenaJudging:
    """Judge every battle of the log (both answers present) that this judge has not voted on, at most
    ``limit``; each vote is recorded as soon as it is made, so a failure keeps the votes cast before it."""
    voter = voter_name(judge.name)
    todo = unjudged(store, voter, limit)

    def one(battle: StoredBattle) -> str | None:
        winner, verdicts = two_orders(judge, battle.topic, answer_text(battle.answer_a), answer_text(battle.answer_b))
        if winner is not None:
            record(store, battle.id, voter, winner, verdicts)
        return winner

    winners = run_all(todo, one, concurrency, "judging battles", judge, progress)
    counts = {k: sum(w == k for w in winners) for k in ("a", "b", "tie")}
    failed = [b.id for b, w in zip(todo, winners) if w is None]
    return ArenaJudging(voter, len(todo) - len(failed), failed, counts)


def _outcome(winner: str) -> str:
    return "tie" if winner in ("tie", "bothbad") else winner


@dataclass(frozen=True)
class Agreement:
    """A judge against the people, on the battles both voted. ``same``: the same outcome (a human tie or
    both-bad is a tie); ``decided``/``same_decided``: only the battles where both picked a side (MT-Bench's
    agreement "without ties")."""

    voter: str
    votes: int  # the judge's votes
    both: int  # of them, battles a person voted on too
    same: int
    decided: int
    same_decided: int

    @property
    def rate(self) -> float | None:
        return self.same / self.both if self.both else None

    @property
    def rate_decided(self) -> float | None:
        return self.same_decided / self.decided if self.decided else None


def agreement(votes: Iterable[JudgeVote]) -> dict[str, Agreement]:
    """Per judge (voter), its agreement with the human votes on the same battles."""
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for v in votes:
        t = tally[v.voter]
        t[0] += 1
        if v.human is None:
            continue
        judge, human = _outcome(v.winner), _outcome(v.human)
        t[1] += 1
        t[2] += judge == human
        if judge != "tie" and human != "tie":
            t[3] += 1
            t[4] += judge == human
    return {voter: Agreement(voter, *t) for voter, t in sorted(tally.items())}


def judge_rows(votes: Iterable[JudgeVote], voter: str) -> list[tuple[dict[str, str], dict[str, str], str]]:
    """One judge's votes as board rows ``(pipeline_a, pipeline_b, winner)``."""
    return [(v.pipeline_a, v.pipeline_b, v.winner) for v in votes if v.voter == voter]
