"""The auth store's errors: a refused key (401), a budget that a request does not fit (429), and database
failures as one-line :class:`~ragnarok.arena.db.StoreError` (:class:`Errors`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import TimeoutError as PoolTimeout

from ragnarok.arena.db import POOL_TIMEOUT_S, StoreBusy, StoreError, describe


class AuthError(Exception):
    """401: no key, or one that is unknown, expired or revoked."""


class BudgetExceeded(Exception):
    """429: the request's worst case does not fit in what is left of the budget."""

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Errors:
    """Database failures as one-line :class:`StoreError`; our own errors pass through."""

    def __init__(self, where: str, what: str):
        self.where, self.what = where, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or isinstance(exc, (ValueError, LookupError, AuthError, BudgetExceeded, StoreError)):
            return False
        if isinstance(exc, PoolTimeout):
            raise StoreBusy(
                f"the service database at {self.where} is busy: no connection of this process's pool "
                f"freed within {POOL_TIMEOUT_S:g} s to {self.what}"
            ) from exc
        raise StoreError(f"the service database at {self.where} could not {self.what}: {describe(exc)}") from exc
