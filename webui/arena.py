"""The arena's logic behind the UI: battles, votes and leaderboards (no Gradio here; the UI calls these).

Blinding: a battle's pipelines are written to the vote log when the server creates the battle, and the
browser only ever gets the battle id. What a battle returns before the vote (both answer panes, the raw JSON,
the status line) names no pipeline; :meth:`Arena.vote` reveals them. A battle where a pipeline failed cannot
be voted on, so it is over at once and its pipelines are shown with the error.

Votes are recorded under the browser's session and rate-limited per *rate key*, which the caller derives on
the server side (the UI passes the client's address: :func:`webui.app.rate_key`), never from the session id a
browser can change at will. A vote log that cannot be reached is said in one line, as a refusal is.
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.arena.pool import PipelineId, components, compose, default_specs, make_pool, pick_pair
from ragnarok.arena.store import StoreError, StoredBattle, VoteRefused, VoteStore
from ragnarok.settings import Settings
from ragnarok.topics import Topic, read_topics
from webui import boards, render
from webui.client import PaneResult, RagClient

DEFAULT_TOPICS = Path(__file__).resolve().parent.parent / "topics" / "demo.tsv"
WINNERS = ("a", "b", "tie", "bothbad")


@dataclass
class BattleView:
    """What the browser gets for a battle: no pipeline names unless ``revealed``."""

    battle_id: str | None
    pane_a: str
    pane_b: str
    raw: dict[str, Any]
    votable: bool
    status: str
    revealed: bool = False


@dataclass
class VoteView:
    status: str
    voted: bool
    raw: dict[str, Any] = field(default_factory=dict)


def database_url(settings: Settings) -> str:
    """The vote log's SQLAlchemy URL: ``database_url``, else SQLite ``arena.db`` in the data directory."""
    if settings.database_url:
        return settings.database_url
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{settings.data_dir / 'arena.db'}"


class Arena:
    def __init__(
        self,
        settings: Settings,
        client: RagClient,
        topics_path: Path | None = DEFAULT_TOPICS,
        rng: random.Random | None = None,
        elo_k: float = 4.0,
        bootstrap_rounds: int = 100,
    ):
        self.settings, self.client = settings, client
        self.topics_path = topics_path
        self.rng = rng or random.Random()
        self.elo_k, self.bootstrap_rounds = elo_k, bootstrap_rounds
        self._store: VoteStore | None = None
        self._store_lock = threading.Lock()
        self._pool: list[PipelineId] | None = None
        self._pool_lock = asyncio.Lock()
        self._topics: list[Topic] | None = None

    # -- lazily opened resources (nothing at construction: building the UI does no I/O) --

    @property
    def store(self) -> VoteStore:
        with self._store_lock:
            if self._store is None:
                self._store = VoteStore(
                    database_url(self.settings), votes_per_minute=self.settings.arena_votes_per_minute
                )
            return self._store

    async def pool(self) -> list[PipelineId]:
        """``settings.arena_pool`` when set; else every available retriever × generator the services list."""
        async with self._pool_lock:
            if self._pool is None:
                specs = list(self.settings.arena_pool)
                if not specs:
                    retrievers, generators = await self.client.offline_components(self.settings.default_index)
                    specs = default_specs(retrievers, generators)
                self._pool = make_pool(specs)
            return self._pool

    def topics(self) -> list[Topic]:
        if self._topics is None:
            if self.topics_path is None or not Path(self.topics_path).is_file():
                raise FileNotFoundError(f"no topic file at {self.topics_path}; type a topic instead")
            self._topics = read_topics(self.topics_path)
        return self._topics

    def random_topic(self) -> Topic:
        return self.rng.choice(self.topics())

    # -- battles --

    def _check_topic(self, topic: str) -> str | None:
        if not topic.strip():
            return "Type a topic (or draw a random one) first."
        if len(topic) > self.settings.max_query_chars:
            return f"The topic has {len(topic):,} characters; the limit is {self.settings.max_query_chars:,}."
        return None

    async def battle(self, topic: str, topic_id: str, session_id: str) -> BattleView:
        """A blinded battle: two different pool pipelines, favouring pairs with fewer votes, random sides."""
        if problem := self._check_topic(topic):
            return _refusal(problem)
        try:
            pool = await self.pool()
        except Exception as exc:  # noqa: BLE001 - the services are down or the pool is misconfigured: say so
            return _refusal(f"The arena cannot build its pipeline pool: {exc}")
        try:
            counts = await asyncio.to_thread(lambda: self.store.vote_counts())
        except StoreError as exc:
            return _refusal(f"The vote log is unavailable: {exc}")
        a, b = pick_pair(pool, counts, self.rng)
        return await self._run("blinded", a, b, topic, topic_id, session_id)

    async def compare(
        self, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str
    ) -> BattleView:
        """An unblinded battle between two chosen pipelines."""
        if problem := self._check_topic(topic):
            return _refusal(problem)
        if a.spec == b.spec:
            return _refusal(f"A and B are the same pipeline ({a.spec}); choose two different ones.")
        return await self._run("unblinded", a, b, topic, topic_id, session_id)

    async def _run(
        self, mode: str, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str
    ) -> BattleView:
        result_a, result_b = await asyncio.gather(
            self.client.run(a, topic, topic_id), self.client.run(b, topic, topic_id)
        )
        try:
            battle_id = await asyncio.to_thread(
                lambda: self.store.create_battle(
                    mode,
                    topic_id,
                    topic,
                    a.as_dict(),
                    b.as_dict(),
                    result_a.answer,
                    result_b.answer,
                    result_a.error,
                    result_b.error,
                    session_id,
                )
            )
        except StoreError as exc:
            return _refusal(f"The vote log could not record this battle: {exc}")
        raw = {"battle": battle_id, "A": _raw(result_a), "B": _raw(result_b)}
        votable = result_a.ok and result_b.ok
        if votable:
            status = "Read both answers (hover or focus a citation to see its source), then vote."
            if mode == "unblinded":
                raw["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
            return BattleView(
                battle_id,
                _pane(result_a),
                _pane(result_b),
                raw,
                True,
                render.message_html(status),
                revealed=mode == "unblinded",
            )
        raw["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
        reveal = render.reveal_html(a, b, None, "A pipeline failed, so this battle cannot be voted on.")
        return BattleView(battle_id, _pane(result_a), _pane(result_b), raw, False, reveal, revealed=True)

    # -- votes --

    def vote(self, battle_id: str | None, winner: str, session_id: str, rate_key: str) -> VoteView:
        """Record the battle's one vote and reveal its pipelines; refusals come back as a message.
        ``rate_key`` is what the vote rate limit counts (server-derived: the client's address)."""
        if not battle_id:
            return VoteView(
                render.message_html("There is no battle to vote on: start one first.", "error"), False
            )
        if winner not in WINNERS:
            return VoteView(render.message_html(f"Unknown vote {winner!r}.", "error"), False)
        try:
            stored = self.store.vote(battle_id, winner, session_id, rate_key)
        except (VoteRefused, StoreError) as exc:
            return VoteView(render.message_html(f"Vote not recorded: {exc}.", "error"), False)
        return VoteView(
            _reveal(stored, "Thanks! Your vote is recorded; start a new round."),
            True,
            {
                "battle": stored.id,
                "A": stored.answer_a,
                "B": stored.answer_b,
                "winner": stored.winner,
                "pipelines": {"A": stored.pipeline_a, "B": stored.pipeline_b},
            },
        )

    # -- leaderboards --

    def leaderboards(self, include_unblinded: bool = False) -> tuple[str, dict[str, str]]:
        """The summary line and each board's HTML, recomputed from the log."""
        rows = self.store.battles(include_unblinded=include_unblinded)
        computed = boards.compute(rows, k=self.elo_k, rounds=self.bootstrap_rounds)
        return (
            boards.summary_html(len(rows), include_unblinded),
            {name: boards.board_html(board) for name, board in computed.items()},
        )

    async def side_choices(self) -> tuple[list[str], list[str], list[str]]:
        return components(await self.pool())

    @staticmethod
    def compose(retriever: str, reranker: str, generator: str) -> PipelineId:
        return compose(retriever, reranker, generator)


def _raw(result: PaneResult) -> dict[str, Any]:
    return result.answer if result.ok else {"error": result.error}  # type: ignore[return-value]


def _pane(result: PaneResult) -> str:
    if result.ok:
        return render.answer_html(result.answer or {}, result.segments)
    return render.error_html(result.error or "unknown error")


def _refusal(message: str) -> BattleView:
    placeholder = render.placeholder_html()
    return BattleView(None, placeholder, placeholder, {}, False, render.message_html(message, "error"))


def _reveal(stored: StoredBattle, note: str) -> str:
    a, b = (
        PipelineId(p["spec"], p["retriever"], p["reranker"], p["generator"])
        for p in (stored.pipeline_a, stored.pipeline_b)
    )
    return render.reveal_html(a, b, stored.winner, note)
