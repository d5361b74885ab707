"""Keys, rates and spend for every request from outside: one ASGI middleware, :class:`AuthMiddleware`.

It lets the probes and open pages through, authenticates the key (``RAGNAROK_AUTH=keys``) and enforces its
rates, runs the request under a spend meter that allows no backend call until the route reserves its worst
case, and settles and audits the spend however the request ended. The route helpers (``needs``,
:func:`reserve`, :func:`spent`) are in :mod:`api.route_auth` and importable from here too.

Design notes: docs/internals/service-api.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from typing import Any

import anyio
import anyio.to_thread
from fastapi.responses import JSONResponse

from api.route_auth import SpendOut, check_scope, needs, reserve, spent
from api.sse import CLIENT_CLOSED, OUTCOME
from api.store_call import retry_after, store_call, unavailable
from ragnarok.arena.db import StoreError
from ragnarok.auth import principal as principals
from ragnarok.auth import rates
from ragnarok.auth.principal import ANONYMOUS, Principal
from ragnarok.auth.store import KEY_PREFIX, AuthError, AuthStore
from ragnarok.core import meter as meters
from ragnarok.core.settings import Settings

__all__ = ["Auth", "AuthMiddleware", "SpendOut", "check_scope", "is_open", "needs", "reserve", "spent"]

log = logging.getLogger(__name__)
#: The owner of the audit rows of requests refused before a key was known (none, unknown, expired, revoked).
UNAUTHENTICATED = "unauthenticated"
#: The most shutdown waits for the requests cut off to record their spend and audit row (they do at once).
DRAIN_S = 2.0
#: The characters of a secret that ``ragnarok keys list`` shows (``api_keys.prefix``).
PUBLIC_PREFIX_CHARS = 11
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
OPEN_PREFIXES = ("/arena/",)


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path == "/arena" or path.startswith(OPEN_PREFIXES)


class Auth:
    """What the middleware needs, made once per app: the store (opened on first use), the rate limiter and
    the per-process count of each principal's requests in flight."""

    def __init__(self, settings: Settings, default: Principal | None = None):
        self.settings = settings
        self.default = default  # every request runs as this (the operator's CLI in process), keys or not
        self._store: AuthStore | None = None
        self._limiter: Any = None
        self.in_flight: defaultdict[str, int] = defaultdict(int)
        self.running = 0  # requests in the middleware now, whoever's (their audit rows not yet all queued)

    @property
    def store(self) -> AuthStore:
        if self._store is None:
            self._store = AuthStore.for_settings(self.settings)
        return self._store

    async def drain(self, timeout_s: float) -> None:
        """At shutdown: wait (at most ``timeout_s``) for the requests still in the middleware to queue their
        audit rows and spend (the ones cut by shutdown answer at once), then write every queued row: the
        process exits without waiting for the audit thread."""
        with anyio.move_on_after(min(timeout_s, DRAIN_S)):
            while self.running:
                await anyio.sleep(0.01)
        if self._store is not None:
            await anyio.to_thread.run_sync(self._store.flush, timeout_s)

    def limiter(self) -> Any:
        """The rate-limit limiter, opened if it was not."""
        if self._limiter is None:
            with rates.OPENING:
                if self._limiter is None:
                    self._limiter = rates.moving_window(self.settings.rate_limit_storage)
        return self._limiter

    def open_limiter(self) -> None:
        """The rate-limit storage, opened once at start-up (opened by two requests at once, ``limits`` failed
        in one: its check of the redis package's version saw it half-imported); connecting waits for a hit."""
        if self._limiter is None and self.settings.auth == "keys":
            self._limiter = rates.moving_window(self.settings.rate_limit_storage)

    def rate_limited(self, principal: Principal) -> float | None:
        """None when the principal may make one more request this minute, else the seconds to wait;
        :class:`~ragnarok.auth.rates.RateStoreDown` when the rate-limit store cannot count (fail closed)."""
        if principal.rpm is None:
            return None
        from limits import RateLimitItemPerMinute  # noqa: PLC0415

        return rates.hit(self.limiter(), RateLimitItemPerMinute(principal.rpm), "key", principal.owner)

    async def rate_limited_async(self, principal: Principal) -> float | None:
        """:meth:`rate_limited` off the event loop when the store is remote (a slow Redis stalls no request)."""
        if principal.rpm is None or self.settings.rate_limit_storage.startswith("memory://"):
            return self.rate_limited(principal)
        return await anyio.to_thread.run_sync(self.rate_limited, principal)

    async def authenticate(self, scope: dict) -> Principal:
        """The caller's principal, or :class:`AuthError`."""
        header = (authorization(scope) or b"").decode("latin-1").strip()
        kind, _, secret = header.partition(" ")
        if not header:
            raise AuthError("this server needs an API key: send `Authorization: Bearer KEY`")
        if kind.lower() != "bearer" or not secret.strip():
            raise AuthError("the Authorization header must be `Bearer KEY`")
        secret = secret.strip()
        if len(secret) > 200:
            raise AuthError("unknown API key")
        store = self.store
        found = store.cached(secret)  # on the event loop: a dictionary read
        return found if found is not None else await store_call(store.lookup, secret)


def _error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def authorization(scope: dict) -> bytes | None:
    """The request's one ``Authorization`` header (None: none; checked to be one by the middleware)."""
    return next((value for name, value in scope["headers"] if name.lower() == b"authorization"), None)


def _several_authorizations(scope: dict) -> bool:
    """Whether the request carries more than one ``Authorization`` header (refused: which one counts would be
    a guess, and the last one won before)."""
    return sum(name.lower() == b"authorization" for name, _ in scope["headers"]) > 1


def presented_prefix(scope: dict) -> str:
    """The public prefix of the key a request sent (``rk_`` and 8 characters, as ``ragnarok keys list`` shows
    it), or "" when it sent none that looks like one of ours: the audit never keeps more of a secret."""
    header = (authorization(scope) or b"").decode("latin-1")
    secret = header.strip().partition(" ")[2].strip()
    if not secret.startswith(KEY_PREFIX) or len(secret) < 2 * PUBLIC_PREFIX_CHARS:
        return ""
    return secret[:PUBLIC_PREFIX_CHARS]


class AuthMiddleware:
    """Pure ASGI middleware (see the module's docstring)."""

    def __init__(self, app: Any, auth: Auth):
        self.app, self.auth = app, auth

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        outer = principals.current()
        if outer is not None:  # a request the service makes to itself: inside the caller's principal
            if meters.current() is not None:
                await self.app(scope, receive, send)
                return
            await self._run(outer, scope, receive, send)  # e.g. the arena's /rag calls: a meter of their own
            return
        if _several_authorizations(scope):
            refusal = _error(400, "send one Authorization header, not several")
            await self._refuse(refusal, scope, receive, send, time.perf_counter())
            return
        if is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        auth = self.auth
        if auth.default is not None:
            principal = auth.default
        elif auth.settings.auth != "keys":
            principal = ANONYMOUS
        else:
            start = time.perf_counter()
            try:
                principal = await auth.authenticate(scope)
            except AuthError as exc:
                refusal = _error(401, str(exc), {"WWW-Authenticate": "Bearer"})
                await self._refuse(refusal, scope, receive, send, start)
                return
            except StoreError as exc:
                log.error("keys cannot be checked: %s", exc)
                refusal = _error(
                    503, f"API keys cannot be checked now ({unavailable(exc)})", {"Retry-After": str(retry_after(exc))}
                )
                await self._refuse(refusal, scope, receive, send, start)
                return
            try:
                wait = await auth.rate_limited_async(principal)
            except rates.RateStoreDown as exc:  # fail closed: a request that must be counted is refused
                log.error("the requests of %s cannot be counted: %s", principal.name, exc)
                refusal = _error(
                    503,
                    f"key {principal.name!r} is limited to {principal.rpm} requests a minute "
                    f"and {exc}: try again shortly",
                    {"Retry-After": str(rates.RETRY_AFTER_S)},
                )
                await self._refuse(refusal, scope, receive, send, start, principal)
                return
            if wait is not None:
                refusal = _error(
                    429,
                    f"key {principal.name!r} is limited to {principal.rpm} requests a minute",
                    {"Retry-After": str(int(wait + 0.999))},
                )
                await self._refuse(refusal, scope, receive, send, start, principal)
                return
            if principal.parallel is not None and auth.in_flight[principal.owner] >= principal.parallel:
                refusal = _error(
                    429,
                    f"key {principal.name!r} is limited to {principal.parallel} request(s) in parallel",
                    {"Retry-After": "1"},
                )
                await self._refuse(refusal, scope, receive, send, start, principal)
                return
        credentials = authorization(scope)
        with principals.forwarding(credentials.decode("latin-1") if credentials else None):
            await self._run(principal, scope, receive, send)

    async def _refuse(
        self,
        response: JSONResponse,
        scope: dict,
        receive: Any,
        send: Any,
        start: float,
        principal: Principal | None = None,
    ) -> None:
        """The middleware's own answer (401, 429, 503): it spent nothing (the spend headers say 0) and gets
        its audit row; a request without a valid key is the ``unauthenticated`` owner's, named by the prefix
        of the key it sent (as ``ragnarok keys list`` shows it), never more of it."""
        response.raw_headers.extend(meters.Meter().headers())
        try:
            await response(scope, receive, send)
        finally:
            who = principal or Principal(UNAUTHENTICATED, presented_prefix(scope), scopes=frozenset())
            ms = (time.perf_counter() - start) * 1000
            self._audit(who, meters.Meter(), scope, response.status_code, ms, always=True)

    async def _run(self, principal: Principal, scope: dict, receive: Any, send: Any) -> None:
        auth, start = self.auth, time.perf_counter()
        meter = meters.Meter(limit=0 if principal.limited else None)
        status: int | None = None
        settled = False

        async def metered_send(message: dict) -> None:
            nonlocal status, settled
            if message["type"] == "http.response.start":
                status = message["status"]
                if any(
                    k.lower() == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in message.get("headers", [])
                ):
                    # a streamed answer: its work goes on after the start; settled when the stream ends
                    await send(message)
                    return
                message = {**message, "headers": [*message.get("headers", []), *meter.headers()]}
                # the answer's work is done: its spend is recorded before the client can see the answer
                settled = True
                await self._settle(principal, meter)
            await send(message)

        auth.in_flight[principal.owner] += 1
        auth.running += 1
        try:
            with principals.acting_as(principal), meters.metering(meter):
                await self.app(scope, receive, metered_send)
        except BaseException as exc:
            if status is None:  # no answer: cancelled (the client went away, the server stopped), or a crash
                status = CLIENT_CLOSED if isinstance(exc, anyio.get_cancelled_exc_class()) else 500
            raise
        finally:
            auth.in_flight[principal.owner] -= 1
            if auth.in_flight[principal.owner] <= 0:
                del auth.in_flight[principal.owner]
            # queued at once, however the request ends (even cancelled again meanwhile); the spend shielded;
            # a stream's status is what its client saw at the end (api/sse.py: its error event's, or 499)
            status = scope.get(OUTCOME, status)
            self._audit(principal, meter, scope, status or 500, (time.perf_counter() - start) * 1000)
            try:
                if not settled:
                    with anyio.CancelScope(shield=True):
                        await self._settle(principal, meter)
            finally:
                auth.running -= 1

    async def _settle(self, principal: Principal, meter: meters.Meter) -> None:
        """The request's reservation replaced by what it spent (a key's or a budget's spend only)."""
        if not (principal.owner.startswith("key:") or principal.has_budget):
            return
        if meter.reservation is None and not meter.calls and not meter.tokens:
            return
        store = self.auth.store
        reservation, meter.reservation = meter.reservation or store.unreserved(principal), None
        try:
            await store_call(store.settle, reservation, meter.calls, meter.tokens)
        except StoreError as exc:
            log.error(
                "the spend of a request of %s (%d calls, %d tokens) was not recorded: %s",
                principal.name,
                meter.calls,
                meter.tokens,
                exc,
            )

    def _audit(
        self, principal: Principal, meter: meters.Meter, scope: dict, status: int, ms: float, always: bool = False
    ) -> None:
        if not (always or principal.owner.startswith("key:") or principal.has_budget):
            return
        try:
            self.auth.store.audit(
                {
                    "owner": principal.owner,
                    "key_name": principal.name,
                    "method": scope.get("method", ""),
                    "route": scope.get("path", "")[:300],
                    "status": status,
                    "generators": json.dumps(meter.generators, sort_keys=True),
                    "calls": meter.calls,
                    "tokens": meter.tokens,
                    "ms": round(ms, 3),
                }
            )
        except StoreError as exc:
            log.error("the audit row of a request of %s was not queued: %s", principal.name, exc)
