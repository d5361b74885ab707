"""The route side of keys and spend: scope checks, the worst-case reservation and what a request spent.

:class:`~api.auth.AuthMiddleware` authenticates a request and meters it; the routes then declare their scope
with ``dependencies=[needs("retrieve")]`` (403 when the key lacks it) and call :func:`reserve` with the
request's :class:`~ragnarok.auth.cost.Cost` before anything spends, so no backend call is made past a key's
budget. A streamed answer puts :func:`spent` in its ``done`` event, since its headers leave before anything
is spent.

Design notes: docs/internals/service-api.md.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import HTTPException, Request
from pydantic import BaseModel, Field

from api.store_call import call_recorder, retry_after, store_call, unavailable
from ragnarok.arena.db import StoreError
from ragnarok.auth import principal as principals
from ragnarok.auth.cost import Cost
from ragnarok.auth.principal import ANONYMOUS
from ragnarok.auth.store import BudgetExceeded
from ragnarok.core import meter as meters
from ragnarok.core.settings import Settings
from ragnarok.runtime.quoting import quote

log = logging.getLogger(__name__)


class SpendOut(BaseModel):
    """What a request spent on backends: the spend headers' figures, in a streamed answer's ``done`` event."""

    backend_calls: int = Field(description="LLM calls made (every attempt, retries included): Ragnarok-Backend-Calls.")
    prompt_tokens: int = Field(description="Prompt tokens the backends reported: Ragnarok-Prompt-Tokens.")
    completion_tokens: int = Field(description="Completion tokens the backends reported: Ragnarok-Completion-Tokens.")


def spent() -> SpendOut:
    """The current request's spend so far (a streamed answer's ``done`` event: all of it)."""
    meter = meters.current() or meters.Meter()
    return SpendOut(
        backend_calls=meter.calls, prompt_tokens=meter.prompt_tokens, completion_tokens=meter.completion_tokens
    )


def check_scope(scope: str) -> None:
    """403 naming ``scope`` unless the caller's key carries it."""
    principal = principals.current() or ANONYMOUS
    if scope not in principal.scopes:
        raise HTTPException(
            403,
            f"key {principal.name!r} lacks the {scope!r} scope (it has: "
            f"{', '.join(sorted(principal.scopes)) or 'none'})",
        )


def needs(*scopes: str) -> Any:
    """A route (or router) dependency: the caller's key must carry every one of ``scopes`` (403 otherwise)."""

    async def dependency() -> None:
        for scope in scopes:
            check_scope(scope)

    dependency.__name__ = "needs_" + "_".join(scopes)
    return dependency


async def reserve(http: Request, cost: Cost) -> None:
    """Before a route spends: the generators it would call must be granted (403), its worst case within
    ``max_calls_per_request`` (413) and the key's budget (429, reserved until the request ends). A request the
    service makes to itself is covered by its caller's reservation."""
    settings: Settings = http.app.state.settings
    principal = principals.current() or ANONYMOUS
    for generator in sorted(cost.generators):
        if not principal.allows_generator(generator):
            granted = ", ".join(sorted(principal.generators or ())) or "none"
            known = generator in http.app.state.generation.configs  # else it is the caller's text: not echoed
            raise HTTPException(
                403,
                f"key {principal.name!r} may not use generator "
                f"{quote(generator, 80) if known else '(not echoed)'} (it may use: {granted})",
            )
    meter = meters.current()
    if meter is None or meter.reserved:
        return
    total = cost.total
    if principal.limited and total > settings.max_calls_per_request:
        spread = ", ".join(f"{g}: {n}" for g, n in sorted(cost.calls.items()))
        raise HTTPException(
            413,
            f"this request could make {total} backend calls in the worst case ({spread}, "
            f"retries included); the limit is {settings.max_calls_per_request} per request",
        )
    if principal.has_budget and (total or principal.budget_tokens is not None):  # nothing to reserve: no read
        store = http.app.state.auth.store
        try:  # a reservation made after its request was refused (the database answered late) is given back
            meter.reservation = await store_call(
                store.reserve, principal, total, undo=lambda late: store.settle(late, 0, 0)
            )
        except BudgetExceeded as exc:
            raise HTTPException(429, str(exc), headers={"Retry-After": str(int(exc.retry_after_s + 0.999))}) from None
        except StoreError as exc:  # nothing reserved: nothing may be spent
            log.error("the budget of %s cannot be reserved: %s", principal.name, exc)
            raise HTTPException(
                503,
                f"key {principal.name!r}'s budget cannot be checked now ({unavailable(exc)}); "
                "nothing was spent: try again shortly",
                headers={"Retry-After": str(retry_after(exc))},
            ) from None
        meter.token_limit = meter.reservation.token_limit
        if meter.reservation.id is not None:
            meter.record = call_recorder(store, meter.reservation)
    meter.reserved = True
    meter.limit = total if principal.limited else None
