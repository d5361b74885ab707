"""``ragnarok describe [COMMAND]``: every command's arguments and options (name, flags, type, default, help,
required) and a few examples, as data: for scripts and agents that drive the CLI. Read from the click commands
the CLI is built from, so it is always what ``--help`` says."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import PurePath
from typing import Annotated, Any, Optional

import typer

from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import PARAM, Format, OutputOpt

#: command -> command lines that run as they are here (the demo collection, offline)
EXAMPLES: dict[str, list[str]] = {
    "doctor": ["ragnarok doctor", "ragnarok doctor --output json"],
    "serve": ["ragnarok serve", "ragnarok serve --port 8000 --workers 2"],
    "index": ["ragnarok index --demo", "ragnarok index docs.jsonl my-index --dense minilm"],
    "search": [
        "ragnarok search --topics demo --output bm25.txt",
        "ragnarok search --topics demo --pipeline 'rrf(bm25, dense:minilm)@100' --output rrf.txt --output-format json",
    ],
    "eval": ["ragnarok eval demo bm25.txt", "ragnarok eval demo bm25.txt rrf.txt --output json"],
    "eval-rag": ["ragnarok eval-rag run.jsonl --nuggets demo", "ragnarok eval-rag a.jsonl b.jsonl --nuggets demo"],
    "compare": ["ragnarok compare bm25@100 'bm25@100 | mmr@20' --topics demo --qrels demo"],
    "optimize": ["ragnarok optimize search.yaml --trials 20"],
    "run": [
        "ragnarok run --topics demo --pipeline 'bm25@20 | extractive' --output run.jsonl",
        "ragnarok run --topics demo --output run.jsonl --output-format json",
    ],
    "validate": ["ragnarok validate run.jsonl --topics demo --no-v21"],
    "view": ["ragnarok view run.jsonl --topics demo-01", "ragnarok view a.jsonl b.jsonl --html diff.html"],
    "prompt": ["ragnarok prompt --generator smollm2 --topic 'how do I parse arguments'"],
    "schema": ["ragnarok schema", "ragnarok schema run-line-2024", "ragnarok schema result search"],
    "describe": ["ragnarok describe", "ragnarok describe keys list --output json"],
    "topics list": ["ragnarok topics list --output json"],
    "topics fetch": ["ragnarok topics fetch rag24.test"],
    "keys create": ["ragnarok keys create --name team-a --scopes retrieve,generate --rpm 60"],
    "keys list": ["ragnarok keys list --output json"],
    "keys revoke": ["ragnarok keys revoke team-a"],
    "keys usage": ["ragnarok keys usage team-a"],
    "judge nuggets": ["ragnarok judge nuggets --topics demo --qrels demo --output nuggets.jsonl"],
    "judge relevance": ["ragnarok judge relevance bm25.txt --topics demo --output more.qrels"],
    "judge pairwise": ["ragnarok judge pairwise a.jsonl b.jsonl", "ragnarok judge pairwise --arena --judge gpt-4o"],
    "collection dedup": ["ragnarok collection dedup docs.jsonl kept.jsonl --threshold 0.8"],
    "collection segment": ["ragnarok collection segment docs.jsonl segments.jsonl"],
    "prebuilt list": ["ragnarok prebuilt list msmarco-v2.1"],
    "prebuilt fetch": ["ragnarok prebuilt fetch msmarco-v2.1-doc-segmented"],
    "convert trec25-format": ["ragnarok convert trec25-format run24.jsonl run25.jsonl"],
}


def commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every command under ``group`` (a click group) as ``("keys list", command)``, in the order of ``--help``."""
    for name, command in group.commands.items():
        path = f"{prefix} {name}".strip()
        if getattr(command, "hidden", False):
            continue
        if hasattr(command, "commands"):
            yield from commands(command, path)
        else:
            yield path, command


def _plain(value: Any) -> Any:
    """A default as JSON: an enum's value, a path as text, a tuple as a list; an unset or computed one: null."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return None  # click's "no default" sentinel, a callable


def _type_name(param: Any) -> str:
    """What a parameter takes, as ``--help`` shows it (``str``, ``int range``, ``path``, ``text|json``)."""
    shown = getattr(param, "display_type", None)  # typer >= 0.2x: its own click, types made on use
    if callable(shown):
        try:
            return str(shown(None)).strip("<>")
        except (AttributeError, TypeError):  # pragma: no cover - a parameter that needs its context
            pass
    kind = getattr(param, "type", None)
    return str(getattr(kind, "name", kind))


def option(param: Any) -> dict[str, Any]:
    """One argument or option of a click command."""
    is_option = getattr(param, "param_type_name", "") == "option"
    flag = bool(getattr(param, "is_flag", False))
    return {
        "name": param.name,
        "kind": "option" if is_option else "argument",
        "flags": [*param.opts, *getattr(param, "secondary_opts", [])] if is_option else [],
        "type": "flag" if flag else _type_name(param),
        "default": None if param.required else _plain(param.default),
        "required": bool(param.required),
        "multiple": bool(getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1),
        "help": " ".join((getattr(param, "help", None) or "").split()),
    }


def command_info(path: str, command: Any) -> dict[str, Any]:
    """A command's help (its first paragraph), its arguments and options, its examples."""
    params = [p for p in command.params if not getattr(p, "hidden", False) and p.name != "help"]
    return {
        "command": path,
        "help": " ".join((command.help or "").split("\n\n")[0].split()),
        "options": [option(p) for p in params],
        "examples": EXAMPLES.get(path, []),
        "output_json": any(p.name == PARAM for p in params),
    }


def text(info: dict[str, Any]) -> str:
    """A command's description for people: its help, each option on a line, its examples."""
    lines = [f"ragnarok {info['command']}: {info['help']}"]
    for o in info["options"]:
        said = ", ".join(o["flags"]) or o["name"].upper()
        kind = "" if o["type"] == "flag" else f" {o['type'].upper()}"
        when = " (required)" if o["required"] else "" if o["default"] in (None, False) else f" [{o['default']}]"
        lines.append(f"  {said}{kind}{when}  {o['help']}")
    lines += [f"  example: {example}" for example in info["examples"]]
    return "\n".join(lines)


@fails_cleanly
def describe(
    ctx: typer.Context,
    command: Annotated[
        Optional[list[str]],
        typer.Argument(metavar="[COMMAND]", help="A command (e.g. search, keys list) or a group (keys); none: all."),
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Describe the commands as data: each one's arguments and options (name, flags, type, default, help,
    required) and examples; with --output json, a list of them in the envelope."""
    root = ctx.find_root().command  # the whole `ragnarok` app, whichever command this one is registered as

    wanted = " ".join(command or [])
    found = [
        command_info(path, cmd)
        for path, cmd in commands(root)
        if not wanted or path == wanted or path.startswith(wanted + " ")
    ]
    if not found:
        from ragnarok.core.registry import UnknownComponentError  # noqa: PLC0415

        raise UnknownComponentError("command", wanted, [path for path, _ in commands(root)])
    cli_output.result(found)
    typer.echo("\n\n".join(text(info) for info in found))
