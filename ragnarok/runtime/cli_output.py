"""``--output json``: one envelope ``{"command", "ok", "result", "errors", "warnings"}`` on stdout, the human text
on stderr. A command takes the option (:data:`OutputOpt`, or :data:`OutputFormatOpt` where its ``--output`` names
a file) and reports with :func:`result` and :func:`warn`; :func:`ragnarok.runtime.cli_errors.fails_cleanly` opens the
envelope around the command (:func:`enveloped`) and writes it, on success and on failure alike. Warnings logged
meanwhile are in it too; each command's result has a JSON Schema in :mod:`ragnarok.runtime.cli_schemas`."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer


class Format(str, Enum):
    text = "text"
    json = "json"


PARAM = "output_format"  # the parameter's name in every command that takes it
LEGACY_JSON = "as_json"  # a deprecated ``--json`` flag of that name (keys list, keys usage): ``--output json``
_HELP = "text: for people; json: one envelope {command, ok, result, errors, warnings} on stdout (text on stderr)."
OutputOpt = Annotated[Format, typer.Option("--output", "--output-format", help=_HELP)]
# run and search: --output is the file they write, so the format is --output-format only
OutputFormatOpt = Annotated[Format, typer.Option("--output-format", help=_HELP)]


def file_not_format(path: Path) -> None:
    """``run`` and ``search``: their ``--output`` is the file they write. ``--output json`` (or ``text``) there
    is the envelope meant, not a file called ``json``: refused, naming the option to use."""
    if path.parent == Path(".") and str(path) in {f.value for f in Format}:
        raise ValueError(
            f"--output names the file this command writes; for the JSON envelope give "
            f"--output-format {path} (to write a file named {path}, give --output ./{path})"
        )


@dataclass
class Envelope:
    command: str
    ok: bool = True
    result: Any = None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def dumps(self) -> str:
        return json.dumps(
            {
                "command": self.command,
                "ok": self.ok and not self.errors,
                "result": finite(self.result),
                "errors": self.errors,
                "warnings": self.warnings,
            },
            ensure_ascii=False,
            default=str,
            allow_nan=False,
        )


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity (no JSON number) as null, in dicts, lists and tuples at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


_open: ContextVar[Envelope | None] = ContextVar("ragnarok_envelope", default=None)


def result(value: Any) -> None:
    """The command's result in the envelope (nothing without ``--output json``)."""
    if (envelope := _open.get()) is not None:
        envelope.result = value


def warn(message: str, echo: bool = True, prefix: str = "warning: ") -> None:
    """``warning: message`` on stderr (``prefix`` instead of ``warning:``, e.g. ``note:``; nothing when ``echo``
    is false: the command said it), and the message in the envelope's warnings."""
    if echo:
        typer.echo(f"{prefix}{message}", err=True)
    if (envelope := _open.get()) is not None:
        envelope.warnings.append(message)


def error(message: str) -> None:
    """An error the command reports itself (it then exits non-zero): in the envelope's errors."""
    if (envelope := _open.get()) is not None:
        envelope.errors.append(message)


def command_name() -> str:
    """The command as typed after ``ragnarok`` (``keys list``), from the CLI's context."""
    try:  # typer >= 0.2x carries its own copy of click
        from typer._click.globals import get_current_context  # noqa: PLC0415
    except ImportError:  # pragma: no cover - an older typer on click
        from click import get_current_context  # noqa: PLC0415
    ctx = get_current_context(silent=True)
    return (
        ctx.command_path.split(" ", 1)[1]
        if ctx is not None and " " in ctx.command_path
        else (ctx.info_name or "")
        if ctx is not None
        else ""
    )


class _WarningsHandler(logging.Handler):
    """Every log record of level WARNING or above in the envelope's warnings; on stderr too when nothing else
    would print it (no handler on the root logger: Python's last-resort handler prints such records there)."""

    def __init__(self, envelope: Envelope, echo: bool) -> None:
        super().__init__(logging.WARNING)
        self.envelope, self.echo = envelope, echo

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.envelope.warnings.append(message)
        if self.echo:
            sys.stderr.write(message + "\n")


@contextlib.contextmanager
def _logged_warnings(envelope: Envelope) -> Iterator[None]:
    """The warnings logged while the command runs (``logger.warning``, any library's) in its envelope."""
    root = logging.getLogger()
    handler = _WarningsHandler(envelope, echo=not root.handlers)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


@contextlib.contextmanager
def enveloped(kwargs: dict[str, Any]) -> Iterator[Envelope | None]:
    """With ``--output json`` (``kwargs[PARAM]``): the command's stdout goes to stderr, and the envelope is
    written to stdout when it ends, however it ends (``ok`` false on an error or a non-zero exit)."""
    if (kwargs.get(PARAM) != "json" and kwargs.get(LEGACY_JSON) is not True) or _open.get() is not None:
        yield None
        return
    envelope = Envelope(command_name())
    token = _open.set(envelope)
    stdout = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr), _logged_warnings(envelope):
            yield envelope
    except typer.Exit as exc:  # a chosen exit code (click's own Exit in an older typer)
        envelope.ok = exc.exit_code == 0
        raise
    except BaseException as exc:
        envelope.ok = False
        if not envelope.errors:
            envelope.errors.append(str(exc) or type(exc).__name__)
        raise
    finally:
        _open.reset(token)
        stdout.write(envelope.dumps() + "\n")
        stdout.flush()
