"""Who is asking: the principal of the request in progress, a context variable.

The auth middleware sets it for every request from outside. A call that the service makes to itself in
process (the gateway's stage calls, the arena's ``/rag`` calls through ``httpx.ASGITransport``) runs in the
context of the request that caused it, so it finds the principal already set and is neither authenticated nor
counted again: the outer request was, for all of its work. Nothing from outside can set a context variable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

SCOPES = ("retrieve", "generate", "evaluate", "admin")


@dataclass(frozen=True)
class Principal:
    """A caller and what it may do. ``generators`` None: every generator; ``budget_calls`` None: no budget.

    ``owner`` keys its spend in the database (``key:ID``, ``arena``); ``name`` is what logs and the audit show.
    ``limited`` False (the operator's own CLI in process) skips the per-request call bound too."""

    owner: str
    name: str
    scopes: frozenset[str] = frozenset(SCOPES)
    generators: frozenset[str] | None = None
    rpm: int | None = None
    parallel: int | None = None
    budget_calls: int | None = None
    budget_tokens: int | None = None
    period_s: float | None = None
    created_at: float = 0.0  # epoch seconds: budget periods are counted from here
    expires_at: float | None = None
    key_id: int | None = None
    limited: bool = True
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    def allows_generator(self, name: str) -> bool:
        return self.generators is None or name in self.generators

    @property
    def has_budget(self) -> bool:
        return self.budget_calls is not None or self.budget_tokens is not None


#: No keys (``RAGNAROK_AUTH=off``): anyone who can reach the service, every scope, the per-request bound only.
ANONYMOUS = Principal(owner="anonymous", name="anonymous")
#: The operator's own commands running the app in process (``ragnarok run``, ``search``, ``optimize``).
LOCAL = Principal(owner="local", name="local", limited=False)

_current: ContextVar[Principal | None] = ContextVar("ragnarok_principal", default=None)


def current() -> Principal | None:
    return _current.get()


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block (and every in-process request it makes) as ``principal``."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


_forwarded: ContextVar[str | None] = ContextVar("ragnarok_forwarded_credentials", default=None)


def forwarded_credentials() -> str | None:
    """The caller's ``Authorization`` header, for the gateway's calls to R and AG services on other hosts."""
    return _forwarded.get()


@contextmanager
def forwarding(credentials: str | None) -> Iterator[None]:
    token = _forwarded.set(credentials)
    try:
        yield
    finally:
        _forwarded.reset(token)
