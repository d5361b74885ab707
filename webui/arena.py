"""The arena's logic behind the UI: battles, votes and leaderboards (no Gradio here; the UI calls these).

Battles are blinded: the browser only gets a battle id, and nothing shown before the vote names a pipeline
or holds a timing that tells the sides apart. Both answers stream into their panes, each pipeline's latency
feeds the sampler that keeps battles within the time budget, and on a network every battle is admitted
against the pool, a rate limit and the arena's own daily budget before it runs anything.

Design notes: docs/internals/webui.md.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from ragnarok.arena.health import PauseBook
from ragnarok.arena.pool import (
    NO_RERANKER,
    LatencyBook,
    PipelineId,
    components,
    compose,
    default_specs,
    make_pool,
    pick_pair,
    shares_slot,
    speed_weights,
)
from ragnarok.arena.store import StoreError, VoteStore
from ragnarok.auth.principal import Principal, acting_as
from ragnarok.core.meter import metering
from ragnarok.core.settings import Settings
from ragnarok.core.topics import Topic, read_topics
from ragnarok.runtime import metrics
from webui import render
from webui.admission import Admission, Hold, arena_principal, listing_principal, pool_generators
from webui.client import PaneResult, RagClient
from webui.final_view import final_view
from webui.streaming import Race
from webui.views import BattleView, VoteView, drawn_less, last, out_of_time, refusal, slow_notes
from webui.votes import WINNERS, VoteLog, database_url, unavailable
from webui.warmup import WARM_UP_TOPIC, WarmUp, measure

__all__ = ["WINNERS", "Arena", "BattleView", "VoteView", "arena_principal", "database_url", "pool_generators"]

DEFAULT_TOPICS = Path(__file__).resolve().parent.parent / "ragnarok" / "data" / "topics" / "demo.tsv"  # installed too
#: How long a pool built from what the services report is reused (a dense index may finish building).
POOL_TTL_S = 30.0


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
        self._pool: list[PipelineId] | None = None
        self._pool_at = 0.0
        self._pool_lock = asyncio.Lock()
        self.latency = LatencyBook()
        self.pauses = PauseBook()
        self.admission = Admission(settings)
        self.votes = VoteLog(settings, elo_k, bootstrap_rounds)
        self.warming = WarmUp()
        self._topics: list[Topic] | None = None

    # -- lazily opened resources (nothing at construction: building the UI does no I/O) --

    @property
    def store(self) -> VoteStore:
        return self.votes.store

    @property
    def auth_store(self) -> Any:
        """The service database's keys and budgets (the arena's calls per day are spent there)."""
        return self.admission.auth_store

    @contextmanager
    def _as(self, principal: Principal | None) -> Iterator[None]:
        """In process, run the block's requests (and the tasks it creates) as ``principal``; over HTTP, the
        client's key speaks for the arena."""
        with acting_as(principal) if principal is not None and self.client.in_process else nullcontext():
            yield

    async def pool(self) -> list[PipelineId]:
        """``settings.arena_pool`` when set; else every available retriever (and the fusion of sparse and
        dense ones) × available generator that costs nothing (``paid`` false) the services list, re-read
        after ``POOL_TTL_S`` so a dense index that finishes building joins the pool. A paid generator is in
        the pool only when ``arena_pool`` lists it. The services are asked as the arena
        (:func:`webui.admission.listing_principal`), whatever the auth mode."""
        async with self._pool_lock:
            stale = not self.settings.arena_pool and time.monotonic() - self._pool_at > POOL_TTL_S
            if self._pool is None or stale:
                specs = list(self.settings.arena_pool)
                if not specs:
                    with self._as(listing_principal()):
                        index = self.settings.default_index
                        retrievers, generators = await self.client.offline_components(index)
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

    def _weights(self, pool: list[PipelineId]) -> dict[str, float]:
        return speed_weights(pool, self.latency.medians(), self.settings.arena_time_budget_s, self.latency.misses())

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
            raise RuntimeError(f"No battle now: {unavailable(exc, 'count the votes')}.") from exc
        medians, budget = self.latency.medians(), self.settings.arena_time_budget_s
        serial, paused = self.serial_generators(), self.pauses.paused_specs(pool)
        return pick_pair(pool, counts, self.rng, self._weights(pool), medians, budget, serial, paused)

    def serial_generators(self) -> set[str]:
        """Generators that answer one request at a time (the embedded llama.cpp model: one slot), so that a
        battle of two of their pipelines runs its sides one after the other."""
        return {
            name
            for name, c in self.settings.generator_configs().items()
            if c.backend == "llama-cpp" or c.max_concurrency == 1
        }

    async def warm_up(self, topic: str = WARM_UP_TOPIC) -> dict[str, float]:
        """Measure before drawing (:mod:`webui.warmup`): one answer per generator of the pool, as the arena's
        principal, recorded for every pool pipeline of that generator. Returns the seconds per generator."""
        pool = await self.pool()
        principal, problem = await self._principal()
        if principal is not None:  # each answer's /rag then reserves its own worst case
            problem = await self.admission.budget(principal, pool[0], pool[0])
        if problem:  # the day's calls are spent (or cannot be counted): measure nothing
            return {}
        with self._as(principal):
            return await measure(self.client, pool, self._record, topic)

    def start_warm_up(self) -> asyncio.Task[Any] | None:
        """:meth:`warm_up` in the background, until the first battle asks it to give way."""
        return self.warming.start(self.warm_up)

    async def _admit(self, rate_key: str | None) -> str | None:
        """Count a battle against ``arena_battles_per_minute`` for ``rate_key`` (:meth:`Admission.admit`)."""
        return await self.admission.admit(rate_key)

    async def _principal(self) -> tuple[Principal | None, str | None]:
        """The principal the arena's calls run as in process, or why there is none. Standalone (the gateway
        over HTTP) none: the gateway's key budget applies."""
        if not self.client.in_process:
            return None, None
        try:
            pool = await self.pool()
        except Exception as exc:  # noqa: BLE001 - the services are down or the pool is misconfigured: say so
            return None, f"The arena cannot build its pipeline pool: {exc}"
        return arena_principal(self.settings, pool), None

    async def _hold(self, a: PipelineId, b: PipelineId) -> tuple[Principal | None, Hold | None, str | None]:
        """The principal both sides run as and the battle's worst case reserved from the arena's calls left
        today (:meth:`Admission.reserve`), or the refusal (nothing reserved)."""
        principal, problem = await self._principal()
        if principal is None or problem:
            return None, None, problem
        hold, problem = await self.admission.reserve(principal, a, b)
        return principal, hold, problem

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

    async def _warmed(self, tick_s: float) -> AsyncIterator[BattleView]:
        """Stop the start-up warm-up before a battle draws or runs anything (it frees the slot it holds), with
        a progress view while it winds down."""
        if not self.warming.running:
            self.warming.over = True
            return
        stopping, start = asyncio.ensure_future(self.warming.give_way()), time.monotonic()
        while not stopping.done():
            await asyncio.wait([stopping], timeout=tick_s)
            if not stopping.done():
                waited = time.monotonic() - start
                status = render.counter_html("Your battle is next, after the start-up check: ", waited, " s so far.")
                yield BattleView(None, render.waiting_html(), render.waiting_html(), {}, False, status, done=False)

    async def battle_stream(
        self, topic: str, topic_id: str, session_id: str, tick_s: float = 1.0, rate_key: str | None = None
    ) -> AsyncIterator[BattleView]:
        """A blinded battle as it happens: progress views, then the final view. ``rate_key`` (the client's
        address) is what the battles-per-minute cap counts."""
        if problem := self._check_topic(topic):
            yield refusal(problem)
            return
        if problem := await self._admit(rate_key):
            yield refusal(problem)
            return
        async for view in self._warmed(tick_s):
            yield view
        try:
            a, b = await self.pick()
        except RuntimeError as exc:
            yield refusal(str(exc))
            return
        async for view in self._run_stream("blinded", a, b, topic, topic_id, session_id, tick_s):
            yield view

    async def compare_stream(
        self,
        a: PipelineId,
        b: PipelineId,
        topic: str,
        topic_id: str,
        session_id: str,
        tick_s: float = 1.0,
        rate_key: str | None = None,
    ) -> AsyncIterator[BattleView]:
        """An unblinded battle between two chosen pipelines, as it happens."""
        if problem := self._check_topic(topic):
            yield refusal(problem)
            return
        if a.spec == b.spec:
            yield refusal(f"A and B are the same pipeline ({a.spec}); choose two different ones.")
            return
        if problem := await self._in_pool(a, b) or await self._admit(rate_key):
            yield refusal(problem)
            return
        async for view in self._warmed(tick_s):
            yield view
        async for view in self._run_stream("unblinded", a, b, topic, topic_id, session_id, tick_s):
            yield view

    async def battle(self, topic: str, topic_id: str, session_id: str, rate_key: str | None = None) -> BattleView:
        """A blinded battle's final view."""
        return await last(self.battle_stream(topic, topic_id, session_id, tick_s=3600, rate_key=rate_key))

    async def compare(
        self, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str, rate_key: str | None = None
    ) -> BattleView:
        """An unblinded battle's final view."""
        return await last(self.compare_stream(a, b, topic, topic_id, session_id, tick_s=3600, rate_key=rate_key))

    def _record(self, pipeline: PipelineId, result: PaneResult, elapsed: float) -> None:
        """A side's answer goes into the latency book when it answered (late: past the time budget, a miss)
        or failed for lack of time (a 504, a client time-out: a miss); other failures say nothing of speed. A
        backend failure pauses the pipeline, and its generator's others when that failed (:class:`PauseBook`);
        an answer resumes them."""
        late = elapsed > self.settings.arena_time_budget_s
        timed_out = not result.ok and out_of_time(result.error or "")
        if result.ok or late or timed_out:
            self.latency.record(pipeline.spec, elapsed, missed=late or timed_out)
        self.pauses.record_side(pipeline.spec, pipeline.generator, None if result.ok else result.error or "")

    async def _drawn_less(self) -> str:
        try:
            pool = await self.pool()
        except Exception:  # noqa: BLE001 - the battle ran: its pool was built
            return ""
        return drawn_less(self._weights(pool), self.settings.arena_time_budget_s)

    async def _run_stream(
        self, mode: str, a: PipelineId, b: PipelineId, topic: str, topic_id: str, session_id: str, tick_s: float
    ) -> AsyncIterator[BattleView]:
        principal, hold, problem = await self._hold(a, b)
        if problem:
            yield refusal(problem)
            return
        route = f"arena battle ({mode})"
        try:
            # each side's task copies the context as it is created: both sides run as the arena's principal,
            # their in-process /rag requests spending the battle's reservation through its meter, stream or not
            with self._as(principal), metering(hold.meter) if hold is not None else nullcontext():
                one_slot = shares_slot(a, b, self.serial_generators())  # only when the pool has no other pair
                race = Race(self.client, {"a": a, "b": b}, topic, topic_id, self._record, one_slot)
            async for pane_a, pane_b, status in race.views(tick_s):
                yield BattleView(None, pane_a, pane_b, {}, False, status, done=False)
            (result_a, seconds_a), (result_b, seconds_b) = race.outcome("a"), race.outcome("b")
            await self.admission.settle(hold, 200 if result_a.ok and result_b.ok else 502, route)
        finally:  # cancelled, or its page went away: what it did not spend is given back all the same
            await self.admission.settle(hold, 499, route)
        yield await self._finish(
            mode,
            a,
            b,
            topic,
            topic_id,
            session_id,
            result_a,
            result_b,
            (seconds_a, seconds_b),
            (race.sides["a"].timing(), race.sides["b"].timing()),
        )

    async def _finish(
        self,
        mode: str,
        a: PipelineId,
        b: PipelineId,
        topic: str,
        topic_id: str,
        session_id: str,
        result_a: PaneResult,
        result_b: PaneResult,
        seconds: tuple[float, float],
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
            return refusal(f"This battle could not be recorded: {unavailable(exc, 'record a battle')}.")
        votable = result_a.ok and result_b.ok
        metrics.arena_battle(mode, votable)
        slow = slow_notes(
            (("A", a, result_a, seconds[0]), ("B", b, result_b, seconds[1])),
            self.settings.arena_time_budget_s,
            self.latency.misses(),
        )
        if votable:
            self.votes.timings[battle_id] = timings
        note = await self._drawn_less() if votable else ""
        return final_view(
            mode, battle_id, (a, b), (result_a, result_b), slow, timings, self.settings.arena_time_budget_s, note
        )

    # -- votes and leaderboards (webui.votes) --

    def vote(self, battle_id: str | None, winner: str, session_id: str, rate_key: str) -> VoteView:
        """Record the battle's one vote and reveal its pipelines (:meth:`VoteLog.vote`)."""
        return self.votes.vote(battle_id, winner, session_id, rate_key)

    def leaderboards(self, include_unblinded: bool = False) -> tuple[str, dict[str, str]]:
        return self.votes.leaderboards(include_unblinded)

    def judge_board(self, include_unblinded: bool = False, votes: Any = None) -> str:
        return self.votes.judge_board(include_unblinded, votes)

    async def side_choices(self) -> tuple[list[str], list[str], list[str]]:
        return components(await self.pool())

    @staticmethod
    def compose(retriever: str, reranker: str, generator: str) -> PipelineId:
        return compose(retriever, reranker, generator)
