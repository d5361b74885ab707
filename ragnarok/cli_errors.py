"""How every ``ragnarok`` command fails: one ``error: ...`` line on stderr and exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer


def fails_cleanly(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected errors into ``error: ...`` on stderr and exit code 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:  # a chosen exit code (click's Exit is a RuntimeError)
            raise
        except (ValueError, LookupError, OSError, RuntimeError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper
