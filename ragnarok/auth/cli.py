"""``ragnarok keys ...``: API keys in the service database (``RAGNAROK_DATABASE_URL``, else ``arena.db`` in the
data directory). The secret is printed once, as the last line of stdout; only its SHA-256 is stored."""

from __future__ import annotations

import re
import time
from typing import Annotated, Optional

import typer

from ragnarok.auth.records import check_fields
from ragnarok.auth.records import when as _when
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt

keys_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="API keys: scopes, generators, rates and budgets (RAGNAROK_AUTH=keys).",
)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def duration_s(text: str) -> float:
    """``30d``, ``12h``, ``15m``, ``45s``, ``2w`` or plain seconds, as seconds."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)", text.strip())
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"a duration is a positive number with s, m, h, d or w (e.g. 1d, 12h), got {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _integer(what: str, text: str | None) -> int | None:
    """An integer option's value (ASCII digits; its bounds are checked with the others: ``check_fields``)."""
    if text is None:
        return None
    if not re.fullmatch(r"-?[0-9]{1,40}", text.strip()):
        raise ValueError(f"--{what.replace('_', '-')} takes an integer, got {text[:40]!r}")
    return int(text.strip())


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [n.strip() for n in text.split(",") if n.strip()]


def _store():  # type: ignore[no-untyped-def]
    from ragnarok.auth.store import AuthStore  # noqa: PLC0415
    from ragnarok.core.settings import get_settings  # noqa: PLC0415

    return AuthStore.for_settings(get_settings())


def _known_generators(names: list[str] | None) -> list[str] | None:
    """``names``, once each is a configured generator (``ValueError`` listing the known ones otherwise)."""
    if names is None:
        return None
    from ragnarok.core.settings import get_settings  # noqa: PLC0415

    known = sorted(get_settings().generator_configs())
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"--generators takes configured generators ({', '.join(known) or 'none'}); "
            f"got {', '.join(map(repr, unknown)) or 'none'}"
        )
    return names


@keys_app.command()
@fails_cleanly
def create(
    name: Annotated[str, typer.Option(help="A unique name for the key (who holds it).")],
    scopes: Annotated[str, typer.Option(help="Comma-separated: retrieve, generate, evaluate, admin.")],
    generators: Annotated[
        Optional[str], typer.Option(help="Comma-separated generators the key may use (default: all).")
    ] = None,
    rpm: Annotated[Optional[str], typer.Option(metavar="N", help="Requests per minute at most.")] = None,
    parallel: Annotated[
        Optional[str], typer.Option(metavar="N", help="Requests in flight at most (per server process).")
    ] = None,
    budget_calls: Annotated[
        Optional[str],
        typer.Option(
            metavar="N", help="Backend (LLM) calls per period at most, reserved from each request's worst case."
        ),
    ] = None,
    budget_tokens: Annotated[
        Optional[str], typer.Option(metavar="N", help="Tokens per period at most (as the backends report them).")
    ] = None,
    period: Annotated[str, typer.Option(help="The budget's period (from the key's creation): 1d, 12h, ...")] = "1d",
    expires: Annotated[Optional[str], typer.Option(help="Expiry from now: 30d, 12h, ... (default: never).")] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Make a key; its secret is the last line of stdout (with --output json: the result's `secret`), shown
    once: store it now."""
    # everything is checked before the database is opened
    allowed, period_s = _known_generators(_names(generators)), duration_s(period)
    expires_s = None if expires is None else duration_s(expires)
    limits = {
        what: _integer(what, value)
        for what, value in (
            ("rpm", rpm),
            ("parallel", parallel),
            ("budget_calls", budget_calls),
            ("budget_tokens", budget_tokens),
        )
    }
    check_fields(name, _names(scopes) or [], limits, period_s, expires_s)
    record, secret = _store().create(
        name, _names(scopes) or [], allowed, **limits, period_s=period_s, expires_in_s=expires_s
    )
    typer.echo(
        f"key {record.id} {record.name!r}: scopes {','.join(record.scopes)}"
        + (f"; expires {_when(record.expires_epoch)}" if record.expires_epoch else ""),
        err=True,
    )
    cli_output.result(
        {
            "id": record.id,
            "name": record.name,
            "prefix": record.prefix,
            "scopes": list(record.scopes),
            "expires_at": _when(record.expires_epoch) or None,
            "secret": secret,
        }
    )
    if output_format != Format.json:  # the envelope holds it: not on stderr too
        typer.echo(secret)


@keys_app.command("list")
@fails_cleanly
def list_keys(
    as_json: Annotated[
        bool, typer.Option("--json", help="Deprecated: the same as --output json.", hidden=True)
    ] = False,
    output_format: OutputOpt = Format.text,
) -> None:
    """Every key: id, name, prefix, scopes, limits, status (never the secret)."""
    now = time.time()
    rows: list[dict] = []
    cli_output.result(rows)  # filled below
    for k in _store().keys():
        row = {
            "id": k.id,
            "name": k.name,
            "prefix": k.prefix,
            "scopes": list(k.scopes),
            "generators": None if k.generators is None else list(k.generators),
            "rpm": k.rpm,
            "parallel": k.parallel,
            "budget_calls": k.budget_calls,
            "budget_tokens": k.budget_tokens,
            "period_s": None if k.period_s is None else round(k.period_s),
            "created_at": k.created_at,
            "expires_at": _when(k.expires_epoch) or None,
            "status": k.status(now),
            **({"problems": list(k.problems)} if k.problems else {}),
        }
        rows.append(row)
        typer.echo(_key_line(k, row["status"]))


def _key_line(k, status: str) -> str:  # type: ignore[no-untyped-def]
    """One key as a line of text: id, name, prefix, scopes, generators, limits, status."""
    limits = ", ".join(
        f"{n} {v}"
        for n, v in (("rpm", k.rpm), ("parallel", k.parallel), ("calls", k.budget_calls), ("tokens", k.budget_tokens))
        if v is not None
    )
    return (
        f"{k.id}\t{k.name}\t{k.prefix}…\t{','.join(k.scopes)}\t"
        f"{','.join(k.generators) if k.generators is not None else 'all generators'}\t"
        f"{limits or 'no limits'}\t{status}" + (f" ({', '.join(k.problems)} unreadable)" if k.problems else "")
    )


@keys_app.command()
@fails_cleanly
def revoke(
    key: Annotated[str, typer.Argument(help="The key's id or name.")], output_format: OutputOpt = Format.text
) -> None:
    """Revoke a key: every server refuses it within RAGNAROK_AUTH_CACHE_S (1 s)."""
    record = _store().revoke(key)
    cli_output.result({"id": record.id, "name": record.name, "revoked_at": record.revoked_at})
    typer.echo(f"key {record.id} {record.name!r} revoked at {record.revoked_at}")


@keys_app.command()
@fails_cleanly
def usage(
    key: Annotated[Optional[str], typer.Argument(help="A key's id or name (default: every owner).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Deprecated: the same as --output json.", hidden=True)
    ] = False,
    output_format: OutputOpt = Format.text,
) -> None:
    """Calls and tokens spent per key (and the arena) per budget period, newest first."""
    store = _store()
    owner = None if key is None else f"key:{store.find(key).id}"
    rows = store.usage(owner)
    names = {f"key:{k.id}": k.name for k in store.keys()}
    named = [{**row, "name": names.get(row["owner"], row["owner"])} for row in rows]
    cli_output.result(named)
    for row in named:
        typer.echo(
            f"{row['period_start']}\t{row['owner']}\t{row['name']}\t{row['calls']} calls\t{row['tokens']} tokens"
        )
    if not rows:
        typer.echo("no spend recorded", err=True)
