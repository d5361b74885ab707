"""Per-minute limits (a key's requests, the arena's battles) in the ``limits`` storage ``rate_limit_storage``,
failing closed.

With Redis (``redis://…``) the store may be gone or hang: every command has a short socket timeout and one
retry (a connection made stale by a Redis restart is replaced), and a store that cannot count raises
:class:`RateStoreDown`, which the callers turn into a refusal (503 with ``Retry-After``; the arena's message):
a request that must be counted is never let through uncounted.
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: Seconds a Redis command may take (connecting included) before the store counts as unreachable.
SOCKET_TIMEOUT_S = 1.0
#: What a refusal for an unreachable store tells the caller to wait.
RETRY_AFTER_S = 5
# `limits` opening a redis:// storage in two threads at once fails in one of them (ConfigurationError: its check
# of the redis package's version sees the module half-imported by the other): one opening at a time
OPENING = threading.RLock()


class RateStoreDown(RuntimeError):
    """The rate-limit store cannot count now (unreachable, timed out): one line, never the URL."""


def moving_window(storage_url: str) -> Any:
    """A ``limits`` moving-window limiter on ``storage_url`` (Redis: with the deadlines above)."""
    from limits.storage import storage_from_string  # noqa: PLC0415
    from limits.strategies import MovingWindowRateLimiter  # noqa: PLC0415

    options: dict[str, Any] = {}
    if storage_url.split(":", 1)[0] in {"redis", "rediss", "redis+unix"}:
        from redis.backoff import NoBackoff  # noqa: PLC0415
        from redis.retry import Retry  # noqa: PLC0415

        options = {
            "socket_timeout": SOCKET_TIMEOUT_S,
            "socket_connect_timeout": SOCKET_TIMEOUT_S,
            "retry": Retry(NoBackoff(), 1),
        }
    with OPENING:
        return MovingWindowRateLimiter(storage_from_string(storage_url, wrap_exceptions=True, **options))


def hit(limiter: Any, item: Any, *identifiers: str) -> float | None:
    """Count one hit of ``item`` for ``identifiers``: None when it fits, else the seconds until it would.
    Raises :class:`RateStoreDown` when the store cannot count."""
    from limits.errors import StorageError  # noqa: PLC0415

    try:
        if limiter.hit(item, *identifiers):
            return None
        return max(1.0, limiter.get_window_stats(item, *identifiers).reset_time - time.time())
    except StorageError as exc:
        cause = exc.storage_error if getattr(exc, "storage_error", None) is not None else exc
        raise RateStoreDown(f"the rate-limit store is unreachable ({type(cause).__name__})") from exc
