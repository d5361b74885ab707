"""Who the arena's calls run as, and whether a battle may run: no Gradio, no UI.

- in process (the arena mounted in the API), every call the arena makes — the pool's discovery (``GET
  /v1/retrievers``, ``GET /v1/generators``), the start-up warm-up, both sides of each battle — runs as the arena's
  own principal, whatever ``RAGNAROK_AUTH`` is: :func:`listing_principal` before the pool is known (it may list,
  never generate), :func:`arena_principal` once it is (the pool's generators only, ``arena_calls_per_day`` backend
  calls per UTC day for the whole arena);
- a battle counts against ``arena_battles_per_minute`` for its rate key (a moving window in the ``limits``
  storage ``rate_limit_storage``): :meth:`Admission.admit`;
- its worst case (:func:`ragnarok.auth.cost.pipeline_cost` of both sides) must fit in the arena's calls left
  today: :meth:`Admission.budget`.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import TYPE_CHECKING, Any

from ragnarok.arena.pool import PipelineId
from ragnarok.auth import rates
from ragnarok.auth.cost import pipeline_cost
from ragnarok.auth.principal import Principal
from ragnarok.core.settings import Settings
from ragnarok.core.spec import parse

if TYPE_CHECKING:
    from ragnarok.auth.store import AuthStore

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
        None)."""
        configs = self.settings.generator_configs()
        need = sum(pipeline_cost(parse(p.spec), configs).total for p in (a, b))
        if need == 0:
            return None
        try:
            left = await asyncio.to_thread(lambda: self.auth_store.left(principal))
        except Exception as exc:  # noqa: BLE001 - fail closed: no budget check, no paid calls
            return f"The arena cannot check its daily budget right now ({exc.__class__.__name__})."
        if left is not None and need > left:
            return (
                f"The arena has spent its backend calls for today: this battle may need {need}, "
                f"{left} of {self.settings.arena_calls_per_day} are left. Try again after 00:00 UTC."
            )
        return None
