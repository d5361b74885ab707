"""The arena's logic behind the UI: battles, votes and leaderboards (no Gradio here; the UI calls these).

Blinding: a battle's pipelines are written to the vote log when the server creates the battle, and the
browser only ever gets the battle id. What a battle returns before the vote (both answer panes, the raw JSON,
the status line) names no pipeline; :meth:`Arena.vote` reveals them. A battle where a pipeline failed cannot
be voted on, so it is over at once and its pipelines are shown with the error.

Progress: :meth:`Arena.battle_stream` and :meth:`Arena.compare_stream` yield views while the pipelines run —
both answers stream into their panes as they are written (``POST /rag`` with ``"stream": true``; a pane waits
with an elapsed-seconds line until its first text, shows the text so far with its time to first token, then
its answer with citations once done: :mod:`webui.streaming`) — and the final, votable view once both are in.
Each pipeline's latency (to its whole answer) goes into a :class:`LatencyBook` that the blinded sampler uses to
keep battles within ``settings.arena_time_budget_s``.

Votes are recorded under the browser's session and rate-limited per *rate key*, which the caller derives on
the server side (the UI passes the client's address: :func:`webui.app.rate_key`), never from the session id a
browser can change at will. A vote log that cannot be reached is said in one line, as a refusal is.

On a network (issue 24), before a battle (blinded or side-by-side) runs anything:

- the pool is explicit: ``arena_pool``, else the available retrievers × the generators that cost nothing
  (``GET /v1/generators``' ``paid`` false); a paid generator is drawn, or offered side by side, only when
  ``arena_pool`` lists it, and a side-by-side pipeline must be made of the pool's rerankers and generators;
- the battle counts against ``arena_battles_per_minute`` for its rate key (a moving window in the ``limits``
  storage ``rate_limit_storage``); past it the battle is refused with the seconds to wait;
- in process (the arena mounted in the API), both sides run as :func:`arena_principal`, whose call budget is
  ``arena_calls_per_day`` for the whole arena: the battle's worst case
  (:func:`ragnarok.auth.cost.pipeline_cost` of both sides) must fit in what is left today, else it is refused; the ``/rag`` route then reserves each
  side's calls, so no backend call is made past the budget even when battles race. Standalone (``python -m
  webui``) the gateway's own key budget (``RAGNAROK_ARENA_KEY``) bounds it.

A refused battle runs nothing and stores nothing.
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ragnarok import metrics
from ragnarok.arena.pool import (
    NO_RERANKER,
    LatencyBook,
    PipelineId,
    components,
    compose,
    default_specs,
    make_pool,
    pick_pair,
    speed_weights,
)
from ragnarok.arena.store import StoredBattle, StoreError, VoteRefused, VoteStore
from ragnarok.auth.cost import pipeline_cost
from ragnarok.auth.principal import Principal, acting_as
from ragnarok.settings import Settings
from ragnarok.spec import parse
from ragnarok.topics import Topic, read_topics
from webui import boards, render
from webui.client import PaneResult, RagClient
from webui.streaming import Race
from webui.streaming import result_html as _pane

DEFAULT_TOPICS = Path(__file__).resolve().parent.parent / "topics" / "demo.tsv"
WINNERS = ("a", "b", "tie", "bothbad")
#: How long a pool built from what the services report is reused (a dense index may finish building).
POOL_TTL_S = 30.0
#: The arena's budget period: a UTC day (periods are counted from the epoch).
DAY_S = 86400.0
#: What the warm-up asks each generator (a topic the demo collection answers).
WARM_UP_TOPIC = "how do I parse command-line arguments"
#: The ``limits`` namespace of the battles-per-minute counts.
BATTLES = "arena-battles"

if TYPE_CHECKING:
    from ragnarok.auth.store import AuthStore


@dataclass
class BattleView:
    """What the browser gets for a battle: no pipeline names unless ``revealed``. A progress view (``done``
    False) has ``None`` for a pane that has not changed since the previous view."""

    battle_id: str | None
    pane_a: str | None
    pane_b: str | None
    raw: dict[str, Any]
    votable: bool
    status: str
    revealed: bool = False
    done: bool = True


@dataclass
class VoteView:
    status: str
    voted: bool
    raw: dict[str, Any] = field(default_factory=dict)


def pool_generators(settings: Settings, pool: list[PipelineId]) -> frozenset[str]:
    """Every generator a pool pipeline calls: its answer's generator and those of its query stages, listwise
    rerankers and LLM compressors."""
    configs = settings.generator_configs()
    names: set[str] = set()
    for p in pool:
        pipeline = parse(p.spec)
        names |= pipeline_cost(pipeline, configs).generators
        if pipeline.generate is not None:
            names.add(pipeline.generate.name)
    return frozenset(names)


def arena_principal(settings: Settings, pool: list[PipelineId]) -> Principal:
    """Who the arena's battles run as, in process: the pool's generators only, and ``arena_calls_per_day``
    backend calls per UTC day for the whole arena (every client's battles together)."""
    return Principal(owner="arena", name="arena", scopes=frozenset({"retrieve", "generate"}),
                     generators=pool_generators(settings, pool), budget_calls=settings.arena_calls_per_day,
                     period_s=DAY_S, created_at=0.0)


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
        self._pool_at = 0.0
        self._pool_lock = asyncio.Lock()
        self.latency = LatencyBook()
        self._topics: list[Topic] | None = None
        self._limiter: Any = None  # limits.strategies.MovingWindowRateLimiter, opened on the first battle
        self._boards: dict[tuple[Any, ...], tuple[str, dict[str, str]]] = {}  # the last boards, by log state
        self._auth_store: AuthStore | None = None

    # -- lazily opened resources (nothing at construction: building the UI does no I/O) --

    @property
    def store(self) -> VoteStore:
        with self._store_lock:
            if self._store is None:
                self._store = VoteStore(
                    database_url(self.settings), votes_per_minute=self.settings.arena_votes_per_minute
                )
            return self._store

    @property
    def auth_store(self) -> AuthStore:
        """The service database's keys and budgets (the arena's calls per day are spent there)."""
        from ragnarok.auth.store import AuthStore  # noqa: PLC0415

        with self._store_lock:
            if self._auth_store is None:
                self._auth_store = AuthStore.for_settings(self.settings)
            return self._auth_store

    async def pool(self) -> list[PipelineId]:
        """``settings.arena_pool`` when set; else every available retriever (and the fusion of sparse and
        dense ones) × available generator that costs nothing (``paid`` false) the services list, re-read
        after ``POOL_TTL_S`` so a dense index that finishes building joins the pool. A paid generator is in
        the pool only when ``arena_pool`` lists it."""
        async with self._pool_lock:
            stale = not self.settings.arena_pool and time.monotonic() - self._pool_at > POOL_TTL_S
            if self._pool is None or stale:
                specs = list(self.settings.arena_pool)
                if not specs:
                    retrievers, generators = await self.client.offline_components(self.settings.default_index)
                    specs = default_specs(retrievers, generators)
                self._pool, self._pool_at = make_pool(specs), time.monotonic()
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

    async def pick(self) -> tuple[PipelineId, PipelineId]:
        """A blinded pair: two different pool pipelines, favouring pairs with fewer votes and pipelines
        within the time budget, random sides. Raises ``RuntimeError`` with the reason it cannot."""
        try:
            pool = await self.pool()
        except Exception as exc:  # noqa: BLE001 - the services are down or the pool is misconfigured: say so
            raise RuntimeError(f"The arena cannot build its pipeline pool: {exc}") from exc
        try:
            counts = await asyncio.to_thread(lambda: self.store.vote_counts())
        except StoreError as exc:
            raise RuntimeError(f"The vote log is unavailable: {exc}") from exc
        medians, budget = self.latency.medians(), self.settings.arena_time_budget_s
        return pick_pair(pool, counts, self.rng, speed_weights(pool, medians, budget), medians, budget,
                         self.serial_generators())

    def serial_generators(self) -> set[str]:
        """Generators that answer one request at a time (the embedded llama.cpp model: one slot), so that a
        battle of two of their pipelines runs its sides one after the other."""
        return {name for name, c in self.settings.generator_configs().items()
                if c.backend == "llama-cpp" or c.max_concurrency == 1}

    async def warm_up(self, topic: str = WARM_UP_TOPIC) -> dict[str, float]:
        """Measure before drawing: one answer per generator of the pool (through its first pipeline), its
        latency recorded for every pool pipeline using that generator until real battles replace it, so a
        pipeline that cannot finish within the battle budget here is drawn less or not at all from the first
        battle on. Returns the seconds per generator."""
        pool = await self.pool()
        seen: dict[str, float] = {}
        principal, _ = await self._budget(pool[0], pool[0])
        for p in pool:
            if p.generator in seen:
                continue
            with acting_as(principal) if principal is not None else nullcontext():
                result, seconds = await self._timed(p, topic, "warm-up")
            if result.ok or seconds >= self.settings.arena_time_budget_s:  # as _timed records it
                seen[p.generator] = seconds
        measured = self.latency.medians()
        for p in pool:
            if p.spec not in measured and p.generator in seen:
                self.latency.record(p.spec, seen[p.generator])
        return seen

    def _battle_limiter(self) -> Any:
        if self._limiter is None:
            from limits.storage import storage_from_string  # noqa: PLC0415
            from limits.strategies import MovingWindowRateLimiter  # noqa: PLC0415

            self._limiter = MovingWindowRateLimiter(storage_from_string(self.settings.rate_limit_storage))
        return self._limiter

    async def _admit(self, rate_key: str | None) -> str | None:
        """Count a battle against ``arena_battles_per_minute`` for ``rate_key``; the refusal, or None.
        ``rate_key`` None (a caller in this process, not a browser) is not counted."""
        if rate_key is None:
            return None
        from limits import RateLimitItemPerMinute  # noqa: PLC0415

        per_minute = self.settings.arena_battles_per_minute
        item = RateLimitItemPerMinute(per_minute)

        def hit() -> float | None:
            limiter = self._battle_limiter()
            if limiter.hit(item, BATTLES, rate_key):
                return None
            return limiter.get_window_stats(item, BATTLES, rate_key).reset_time - time.time()

        try:
            wait = await asyncio.to_thread(hit)
        except Exception as exc:  # noqa: BLE001 - the rate-limit storage is down: refuse, never run unbounded
            return f"The arena cannot count battles right now ({exc.__class__.__name__}); try again later."
        if wait is None:
            return None
        return (f"Too many battles from your address: at most {per_minute} a minute. "
                f"Try again in {max(1, math.ceil(wait))} s.")

    async def _budget(self, a: PipelineId, b: PipelineId) -> tuple[Principal | None, str | None]:
        """The principal both sides run as, or the refusal when the battle's worst case does not fit in the
        arena's calls left today. Standalone (the gateway over HTTP), the gateway's key budget applies."""
        if not getattr(self.client, "in_process", False):
            return None, None
        try:
            pool = await self.pool()
        except Exception as exc:  # noqa: BLE001 - the services are down or the pool is misconfigured: say so
            return None, f"The arena cannot build its pipeline pool: {exc}"
        principal = arena_principal(self.settings, pool)
        configs = self.settings.generator_configs()
        need = sum(pipeline_cost(parse(p.spec), configs).total for p in (a, b))
        if need == 0:
            return principal, None
        try:
            left = await asyncio.to_thread(lambda: self.auth_store.left(principal))
        except Exception as exc:  # noqa: BLE001 - fail closed: no budget check, no paid calls
            return None, f"The arena cannot check its daily budget right now ({exc.__class__.__name__})."
        if left is not None and need > left:
            return None, (f"The arena has spent its backend calls for today: this battle may need {need}, "
                          f"{left} of {self.settings.arena_calls_per_day} are left. "
                          "Try again after 00:00 UTC.")
        return principal, None

    async def _in_pool(self, a: PipelineId, b: PipelineId) -> str | None:
        """A side-by-side pipeline must be made of the pool's rerankers and generators (any retriever)."""
        try:
            pool = await self.pool()
        except Exception as exc:  # noqa: BLE001
            return f"The arena cannot build its pipeline pool: {exc}"
        _, rerankers, generators = components(pool)
        for side, p in (("A", a), ("B", b)):
            if p.generator not in generators:
                return f"Pipeline {side}'s LLM {p.generator!r} is not in the arena's pool."
            if p.reranker not in (*rerankers, NO_RERANKER):
                return f"Pipeline {side}'s reranker {p.reranker!r} is not in the arena's pool."
        return None

    async def battle_stream(
        self, topic: str, topic_id: str, session_id: str, tick_s: float = 1.0, rate_key: str | None = None
    ) -> AsyncIterator[BattleView]:
        """A blinded battle as it happens: progress views, then the final view. ``rate_key`` (the client's
        address) is what the battles-per-minute cap counts."""
        if problem := self._check_topic(topic):
            yield _refusal(problem)
            return
        if problem := await self._admit(rate_key):
            yield _refusal(problem)
            return
        try:
            a, b = await self.pick()
        except RuntimeError as exc:
            yield _refusal(str(exc))
            return
        async for view in self._run_stream("blinded", a, b, topic, topic_id, session_id, tick_s):
            yield view

    async def compare_stream(
        self, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str, tick_s: float = 1.0,
        rate_key: str | None = None,
    ) -> AsyncIterator[BattleView]:
        """An unblinded battle between two chosen pipelines, as it happens."""
        if problem := self._check_topic(topic):
            yield _refusal(problem)
            return
        if a.spec == b.spec:
            yield _refusal(f"A and B are the same pipeline ({a.spec}); choose two different ones.")
            return
        if problem := await self._in_pool(a, b) or await self._admit(rate_key):
            yield _refusal(problem)
            return
        async for view in self._run_stream("unblinded", a, b, topic, topic_id, session_id, tick_s):
            yield view

    async def battle(
        self, topic: str, topic_id: str, session_id: str, rate_key: str | None = None
    ) -> BattleView:
        """A blinded battle's final view."""
        return await _last(self.battle_stream(topic, topic_id, session_id, tick_s=3600, rate_key=rate_key))

    async def compare(
        self, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str,
        rate_key: str | None = None,
    ) -> BattleView:
        """An unblinded battle's final view."""
        return await _last(self.compare_stream(a, b, topic, topic_id, session_id, tick_s=3600,
                                               rate_key=rate_key))

    async def _timed(self, pipeline: PipelineId, topic: str, topic_id: str) -> tuple[PaneResult, float]:
        """Run one side (not streamed); its latency is recorded as :meth:`_record` says."""
        start = time.monotonic()
        result = await self.client.run(pipeline, topic, topic_id)
        elapsed = time.monotonic() - start
        self._record(pipeline, result, elapsed)
        return result, elapsed

    def _record(self, pipeline: PipelineId, result: PaneResult, elapsed: float) -> None:
        """A side's latency is recorded when it answered, or failed no sooner than the budget."""
        if result.ok or elapsed >= self.settings.arena_time_budget_s:
            self.latency.record(pipeline.spec, elapsed)

    async def _run_stream(
        self, mode: str, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str,
        tick_s: float,
    ) -> AsyncIterator[BattleView]:
        principal, problem = await self._budget(a, b)
        if problem:
            yield _refusal(problem)
            return
        # each side's task copies the context as it is created: both sides run as the arena's principal (the
        # in-process /rag requests are metered, reserved and settled as that principal's, stream or not)
        with acting_as(principal) if principal is not None else nullcontext():
            race = Race(self.client, {"a": a, "b": b}, topic, topic_id, on_done=self._record)
        async for pane_a, pane_b, status in race.views(tick_s):
            yield BattleView(None, pane_a, pane_b, {}, False, status, done=False)
        (result_a, seconds_a), (result_b, seconds_b) = race.outcome("a"), race.outcome("b")
        yield await self._finish(mode, a, b, topic, topic_id, session_id, result_a, result_b,
                                 (seconds_a, seconds_b), (race.sides["a"].timing(), race.sides["b"].timing()))

    async def _finish(
        self, mode: str, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str,
        result_a: PaneResult, result_b: PaneResult, seconds: tuple[float, float],
        timings: tuple[str, str] = ("", ""),
    ) -> BattleView:
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
        metrics.arena_battle(mode, votable)
        if votable:
            status = (f"Both answers are in (A in {seconds[0]:.0f} s, B in {seconds[1]:.0f} s). Read both "
                      "(hover or focus a citation to see its source), then vote.")
            if mode == "unblinded":
                raw["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
            return BattleView(
                battle_id,
                _pane(result_a) + timings[0],
                _pane(result_b) + timings[1],
                raw,
                True,
                render.message_html(status),
                revealed=mode == "unblinded",
            )
        raw["pipelines"] = {"A": a.as_dict(), "B": b.as_dict()}
        reveal = render.reveal_html(a, b, None, "A pipeline failed, so this battle cannot be voted on.",
                                    failed=True)
        return BattleView(battle_id, _pane(result_a) + timings[0], _pane(result_b) + timings[1], raw, False,
                          reveal, revealed=True)

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
        metrics.arena_vote(winner)
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
        """The summary line and each board's HTML, recomputed from the log when it has changed: the log is
        append-only, so its vote counts name its state, and a refresh of an unchanged log is a lookup."""
        from ragnarok.arena.judge_log import judge_votes

        rows = self.store.battles(include_unblinded=include_unblinded, style=True)
        votes = judge_votes(self.store, include_unblinded)
        key = (include_unblinded, len(rows), len(votes), self.settings.arena_min_votes)
        if (cached := self._boards.get(key)) is not None:
            return cached
        computed = boards.compute(
            rows, k=self.elo_k, rounds=self.bootstrap_rounds, min_votes=self.settings.arena_min_votes
        )
        panes = {name: boards.board_html(board) for name, board in computed.items()}
        panes["judges"] = self.judge_board(include_unblinded, votes)
        self._boards = {key: (boards.summary_html(len(rows), include_unblinded), panes)}
        return self._boards[key]

    def judge_board(self, include_unblinded: bool = False, votes: Any = None) -> str:
        """The judges' boards and their agreement with human votes (judge votes count on no other board)."""
        from ragnarok.arena.judge_log import judge_votes
        from webui.judge_board import judges_html

        if votes is None:
            votes = judge_votes(self.store, include_unblinded)
        return judges_html(votes, k=self.elo_k, rounds=self.bootstrap_rounds)

    async def side_choices(self) -> tuple[list[str], list[str], list[str]]:
        return components(await self.pool())

    @staticmethod
    def compose(retriever: str, reranker: str, generator: str) -> PipelineId:
        return compose(retriever, reranker, generator)


async def _last(views: AsyncIterator[BattleView]) -> BattleView:
    last = None
    async for view in views:
        last = view
    assert last is not None  # every stream yields its final view
    return last


def _raw(result: PaneResult) -> dict[str, Any]:
    """A side as ``POST /rag`` answered it: the answer with its cited ``segments`` (the client keeps them
    apart for the pane), or the error."""
    return {**(result.answer or {}), "segments": result.segments} if result.ok else {"error": result.error}


def _refusal(message: str) -> BattleView:
    placeholder = render.placeholder_html()
    return BattleView(None, placeholder, placeholder, {}, False, render.message_html(message, "error"))


def _reveal(stored: StoredBattle, note: str) -> str:
    a, b = (
        PipelineId(p["spec"], p["retriever"], p["reranker"], p["generator"])
        for p in (stored.pipeline_a, stored.pipeline_b)
    )
    return render.reveal_html(a, b, stored.winner, note)
