"""Who the arena's calls run as, and whether a battle may run: no Gradio, no UI.

- in process (the arena mounted in the API), every call the arena makes — the pool's discovery, the start-up
  warm-up, both sides of each battle — runs as the arena's own principal, whatever ``RAGNAROK_AUTH`` is:
  :func:`listing_principal` before the pool is known (it may list, never generate), :func:`arena_principal`
  once it is (the pool's generators, ``arena_calls_per_day`` backend calls per UTC day for the whole arena);
- a battle counts against ``arena_battles_per_minute`` for its rate key: :meth:`Admission.admit`;
- its worst case (both sides' :func:`ragnarok.auth.cost.pipeline_cost`) is reserved from the calls left today
  (:meth:`Admission.reserve`); both sides spend it through one meter (each call written into the reservation
  first), and :meth:`Admission.settle` gives back what the battle did not spend, however it ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragnarok.arena.db import StoreError
from ragnarok.arena.pool import PipelineId
from ragnarok.auth import rates
from ragnarok.auth.cost import pipeline_cost
from ragnarok.auth.principal import Principal
from ragnarok.auth.store_errors import BudgetExceeded
from ragnarok.core.meter import CallNotRecorded, Meter
from ragnarok.core.settings import Settings
from ragnarok.core.spec import parse

if TYPE_CHECKING:
    from ragnarok.auth.reservations import Reservation
    from ragnarok.auth.store import AuthStore

log = logging.getLogger(__name__)

#: The arena's budget period: a UTC day (periods are counted from the epoch).
DAY_S = 86400.0
#: The ``limits`` namespace of the battles-per-minute counts.
BATTLES = "arena-battles"
SCOPES = frozenset({"retrieve", "generate"})


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
    return Principal(
        owner="arena",
        name="arena",
        scopes=SCOPES,
        generators=pool_generators(settings, pool),
        budget_calls=settings.arena_calls_per_day,
        period_s=DAY_S,
        created_at=0.0,
    )


def listing_principal() -> Principal:
    """The arena while it reads what the services offer (its pool is not known yet): it may list retrievers and
    generators, and may call no generator (so it spends nothing)."""
    return Principal(owner="arena", name="arena", scopes=SCOPES, generators=frozenset())


@dataclass
class Hold:
    """A battle's reservation of its worst case, and the meter both its sides spend through."""

    principal: Principal
    meter: Meter
    started: float = field(default_factory=time.perf_counter)
    settled: bool = False


def _recorder(store: AuthStore, reservation: Reservation) -> Callable[[], None]:
    """What the meter calls before each backend call: the call written into the battle's reservation, or
    :class:`CallNotRecorded` and no call."""

    def record() -> None:
        try:
            store.record_call(reservation)
        except StoreError as exc:  # not written down: not made
            raise CallNotRecorded(f"the backend call was not made: its spend cannot be recorded now ({exc})") from None

    return record


class Admission:
    """The arena's rate limit per client address and its daily budget of backend calls."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._limiter: Any = None  # limits.strategies.MovingWindowRateLimiter, opened on the first battle
        self._auth_store: AuthStore | None = None
        self._lock = threading.Lock()

    @property
    def auth_store(self) -> AuthStore:
        """The service database's keys and budgets (the arena's calls per day are spent there)."""
        from ragnarok.auth.store import AuthStore  # noqa: PLC0415

        with self._lock:
            if self._auth_store is None:
                self._auth_store = AuthStore.for_settings(self.settings)
            return self._auth_store

    def _battle_limiter(self) -> Any:
        with self._lock:  # one limiter, however many battles arrive at once (in threads)
            if self._limiter is None:
                self._limiter = rates.moving_window(self.settings.rate_limit_storage)
            return self._limiter

    async def admit(self, rate_key: str | None) -> str | None:
        """Count a battle against ``arena_battles_per_minute`` for ``rate_key``; the refusal, or None.
        ``rate_key`` None (a caller in this process, not a browser) is not counted."""
        if rate_key is None:
            return None
        from limits import RateLimitItemPerMinute  # noqa: PLC0415

        per_minute = self.settings.arena_battles_per_minute
        item = RateLimitItemPerMinute(per_minute)

        try:
            wait = await asyncio.to_thread(lambda: rates.hit(self._battle_limiter(), item, BATTLES, rate_key))
        except Exception as exc:  # noqa: BLE001 - the rate-limit storage is down: refuse, never run unbounded
            cause = exc if isinstance(exc, rates.RateStoreDown) else exc.__class__.__name__
            return f"The arena cannot count battles right now ({cause}); try again in {rates.RETRY_AFTER_S} s."
        if wait is None:
            return None
        return (
            f"Too many battles from your address: at most {per_minute} a minute. "
            f"Try again in {max(1, math.ceil(wait))} s."
        )

    async def budget(self, principal: Principal, a: PipelineId, b: PipelineId) -> str | None:
        """The refusal when the battle's worst case does not fit in ``principal``'s calls left today (or
        None). A read, reserving nothing: the warm-up's check (each of its ``/rag`` requests reserves its own)."""
        configs = self.settings.generator_configs()
        need = sum(pipeline_cost(parse(p.spec), configs).total for p in (a, b))
        if need == 0:
            return None
        try:
            left = await asyncio.to_thread(lambda: self.auth_store.left(principal))
        except Exception as exc:  # noqa: BLE001 - fail closed: no budget check, no paid calls
            return f"The arena cannot check its daily budget right now ({exc.__class__.__name__})."
        return self._spent(need, left) if left is not None and need > left else None

    def _spent(self, need: int, left: int) -> str:
        return (
            f"The arena has spent its backend calls for today: this battle may need {need}, "
            f"{left} of {self.settings.arena_calls_per_day} are left. Try again after 00:00 UTC."
        )

    async def reserve(self, principal: Principal, a: PipelineId, b: PipelineId) -> tuple[Hold | None, str | None]:
        """Reserve the battle's worst case from ``principal``'s calls left today
        (:meth:`~ragnarok.auth.store.AuthStore.reserve`): the hold both sides run under (a request the service
        makes to itself is covered by its caller's meter), or the refusal, nothing reserved. Settle the hold
        with :meth:`settle` however the battle ends."""
        configs = self.settings.generator_configs()
        costs = [pipeline_cost(parse(p.spec), configs).total for p in (a, b)]
        need, most = sum(costs), self.settings.max_calls_per_request
        if max(costs) > most:
            return None, f"A pipeline of this battle could make more than {most} backend calls (the most per request)."
        hold = Hold(principal, Meter(limit=need, reserved=True))
        if need == 0:
            return hold, None
        try:
            store = await asyncio.to_thread(lambda: self.auth_store)
            hold.meter.reservation = reservation = await self._reserved(store, principal, need)
        except BudgetExceeded as exc:
            try:
                left = await asyncio.to_thread(store.left, principal)
            except Exception:  # noqa: BLE001 - only the refusal's wording needs it
                return None, f"The arena has spent its backend calls for today: {exc}."
            return None, self._spent(need, left or 0)
        except Exception as exc:  # noqa: BLE001 - fail closed: nothing reserved, no paid calls
            return None, f"The arena cannot check its daily budget right now ({exc.__class__.__name__})."
        hold.meter.token_limit = reservation.token_limit
        if reservation.id is not None:
            hold.meter.record = _recorder(store, reservation)
        return hold, None

    @staticmethod
    async def _reserved(store: AuthStore, principal: Principal, need: int) -> Reservation:
        """``store.reserve`` in a thread; a reservation that arrives after the battle went away is given back."""
        reserving = asyncio.ensure_future(asyncio.to_thread(store.reserve, principal, need))
        try:
            return await asyncio.shield(reserving)
        except asyncio.CancelledError:
            loop = asyncio.get_running_loop()

            def give_back(done: asyncio.Future[Reservation]) -> None:
                if not done.cancelled() and done.exception() is None:
                    loop.run_in_executor(None, store.settle, done.result(), 0, 0)

            reserving.add_done_callback(give_back)
            raise

    async def settle(self, hold: Hold | None, status: int, route: str) -> None:
        """The battle is over: its meter takes no more calls, its reservation is replaced by what it spent
        (:meth:`~ragnarok.auth.store.AuthStore.settle`) and its audit row is queued. Once per hold; a
        cancellation meanwhile does not stop it."""
        if hold is None or hold.settled:
            return
        hold.settled, meter = True, hold.meter
        calls, tokens = meter.close()
        reservation, meter.reservation = meter.reservation, None
        ms = (time.perf_counter() - hold.started) * 1000

        def write() -> None:
            store = self.auth_store
            if reservation is not None:
                store.settle(reservation, calls, tokens)
            store.audit(
                {
                    "owner": hold.principal.owner,
                    "key_name": hold.principal.name,
                    "method": "BATTLE",
                    "route": route,
                    "status": status,
                    "generators": json.dumps(meter.generators, sort_keys=True),
                    "calls": calls,
                    "tokens": tokens,
                    "ms": round(ms, 3),
                }
            )

        try:  # cancelled meanwhile, the settlement goes on in its thread
            await asyncio.shield(asyncio.to_thread(write))
        except Exception as exc:  # noqa: BLE001 - the reservation then ends with its TTL (its calls counted)
            log.error("the spend of an arena battle (%d calls) was not recorded: %s", calls, exc)
