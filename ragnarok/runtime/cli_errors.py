"""How every ``ragnarok`` command fails: one ``error: ...`` line on stderr and exit code 2."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ragnarok.runtime import cli_output


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
    """Turn expected errors into ``error: ...`` on stderr and exit code 2 (no traceback). A command that takes
    ``--output json`` (:mod:`ragnarok.runtime.cli_output`) writes its envelope on stdout however it ends, the error in
    the envelope's ``errors``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with cli_output.enveloped(kwargs):
            try:
                return func(*args, **kwargs)
            except typer.Exit:  # a chosen exit code (click's Exit is a RuntimeError)
                raise
            except (ValueError, LookupError, OSError, RuntimeError) as exc:
                typer.echo(f"error: {exc}", err=True)
                cli_output.error(str(exc))
                raise typer.Exit(2) from None

    return wrapper


def row_names(run_name: list[str] | None, runs: list[Path]) -> list[str]:
    """The table's row names: ``--run-name`` (one per run, in order), else the run files' names.
    ``--run-name a b`` gives ``b`` to the runs (a ``--run-name`` takes one value): refused, ``b`` named."""
    names = run_name or [run.name for run in runs]
    absent = [str(run) for run in runs if not run.exists()]
    if run_name and (len(names) != len(runs) or absent):
        hint = f"{', '.join(absent[:3])}: no such run file; a name after the first?" if absent else ""
        said = (
            f"{len(names)} --run-name for {len(runs)} runs" + (f" ({hint})" if hint else "")
            if len(names) != len(runs)
            else hint
        )
        raise ValueError(
            f"{said}: --run-name takes one name; repeat it, one per run in order: --run-name a --run-name b"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"the rows need distinct names: give one distinct --run-name per run, not {names}")
    return names
