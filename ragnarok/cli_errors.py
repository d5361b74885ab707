"""How every ``ragnarok`` command fails: one ``error: ...`` line on stderr and exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer


def _no_type_shown_for_flags() -> None:
    """Typer >= 0.2x shows every option's type in help, flags too (``--verbose <bool>``, ``--progress /
    --no-progress <bool>``, ``--help <bool>``), which reads as if they took a value: a flag shows none."""
    try:
        from typer.core import TyperOption  # noqa: PLC0415
    except ImportError:  # pragma: no cover - an older typer shows no types
        return
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_untyped", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.flags_untyped = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_type_shown_for_flags()


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
