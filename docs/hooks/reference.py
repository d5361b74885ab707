"""MkDocs hook: the reference pages, written from the code at build time so that they cannot go stale.

- ``reference/settings.md``: every field of :class:`ragnarok.core.settings.Settings`, with its environment
  variable, type, default, bounds and description;
- ``reference/cli.md``: the ``--help`` of every command of the ``ragnarok`` CLI (the typer app of
  ``[project.scripts]``), walked from the live command tree, so commands added later appear on their own;
- ``reference/schemas.md``: every JSON Schema ``ragnarok schema`` prints, each also as a file beside the page.

The output is deterministic: help is rendered by click's plain formatter at a fixed width (no terminal, no
colour), and a default computed from the machine (the home directory, the number of cores) is named as such.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

WIDTH = 100
ENV_PREFIX = "RAGNAROK_"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "reference/settings.md", content=settings_page()))
    files.append(File.generated(config, "reference/cli.md", content=cli_page()))
    page, schemas = schemas_page()
    files.append(File.generated(config, "reference/schemas.md", content=page))
    for name, text in schemas.items():
        files.append(File.generated(config, f"reference/schemas/{name}.json", content=text))
    return files


# -- settings ---------------------------------------------------------------------------------------------------


def type_name(annotation: Any) -> str:
    """``str | None``, ``dict[str, str]``, ``Path``, ``Literal['text', 'json']``: without module paths."""
    text = annotation.__name__ if isinstance(annotation, type) and not getattr(annotation, "__args__", None) else None
    if text is None:
        text = repr(annotation).replace("typing.", "")
    return re.sub(r"\b(?:[a-z_][\w]*\.)+(\w+)", r"\1", text)


def shown(value: Any) -> str:
    """A default as an environment variable would spell it (complex values are JSON)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, Path):
        home = str(Path.home())
        text = str(value)
        return f"`~{text[len(home) :]}`" if text.startswith(home + "/") else f"`{text}`"
    if isinstance(value, (dict, list, tuple, set)):
        return f"`{json.dumps(list(value) if isinstance(value, (tuple, set)) else value, default=str)}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def default_of(field: Any) -> str:
    from pydantic_core import PydanticUndefined  # noqa: PLC0415

    factory = field.default_factory
    if factory is None:
        return "required" if field.default is PydanticUndefined else shown(field.default)
    if factory in (dict, list, set, tuple):
        return shown(factory())
    value = factory()
    if isinstance(value, Path):
        return shown(value)
    return "computed when the settings are read"


def bounds_of(field: Any) -> list[str]:
    """The field's constraints (``ge``, ``le``, ``pattern``, ...) in words."""
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥", "max_length": "length ≤"}
    found = []
    for meta in field.metadata:
        for attr, word in words.items():
            if getattr(meta, attr, None) is not None:
                found.append(f"{word} {getattr(meta, attr)}")
        if getattr(meta, "pattern", None):
            found.append(f"matches `{meta.pattern}`")
    return found


def settings_page() -> str:
    from ragnarok.core.settings import Settings  # noqa: PLC0415

    out = [
        "# Settings",
        "",
        "Every setting of the one `Settings` object (`ragnarok/core/settings.py`), read from its environment "
        f"variable (`{ENV_PREFIX}` and the name in capitals) or a `.env` file. A list or a mapping is given as "
        "JSON. This page is generated from the code when the site is built.",
        "",
    ]
    for name, field in Settings.model_fields.items():
        out += [f"## `{ENV_PREFIX}{name.upper()}`", ""]
        facts = [f"type `{type_name(field.annotation)}`", f"default {default_of(field)}", *bounds_of(field)]
        out += ["; ".join(facts) + ".", ""]
        if field.description:
            out += [" ".join(field.description.split()), ""]
    return "\n".join(out)


# -- commands ---------------------------------------------------------------------------------------------------


def commands(command: Any, path: tuple[str, ...], parent: Any = None):
    """``(path, help text)`` for ``command`` and every command below it, in the order ``--help`` lists them.

    Duck-typed: typer carries its own copy of click, whose classes are not the installed click's."""
    ctx = command.context_class(
        command, info_name=path[-1], parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )
    yield path, plain_help(command, ctx)
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from commands(sub, (*path, name), ctx)


def plain_help(command: Any, ctx: Any) -> str:
    """click's own help text: typer's rich panels turned off, so the width is the context's and no colour."""
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None  # the command object is ours: get_command builds a fresh tree
    formatter = ctx.make_formatter()
    command.format_help(ctx, formatter)
    return "\n".join(line.rstrip() for line in formatter.getvalue().splitlines()).strip("\n")


def cli_page() -> str:
    import typer  # noqa: PLC0415

    from ragnarok.cli.main import app  # noqa: PLC0415

    found = list(commands(typer.main.get_command(app), ("ragnarok",), None))
    out = [
        "# Commands",
        "",
        "The `--help` of every command of `ragnarok`, generated from the command line's own definitions when "
        "the site is built. [The command line](../command-line.md) says how they fit together.",
        "",
    ]
    out += [f"- [`{' '.join(path)}`](#{anchor(path)})" for path, _ in found[1:]]
    for path, text in found:
        out += ["", f"## {' '.join(path)}", "", "```text", text, "```"]
    return "\n".join(out) + "\n"


def anchor(path: tuple[str, ...]) -> str:
    """The id MkDocs' table of contents gives the heading ``## ragnarok keys create``."""
    return re.sub(r"[^\w-]", "", "-".join(path).lower())


# -- schemas ----------------------------------------------------------------------------------------------------


def schemas_page() -> tuple[str, dict[str, str]]:
    from ragnarok.cli.schema import SCHEMAS, json_schema  # noqa: PLC0415

    files = {name: json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n" for name in SCHEMAS}
    out = [
        "# JSON Schemas",
        "",
        "What `ragnarok schema NAME` prints, for every name it knows, generated from the models the API validates "
        "with when the site is built. Each is also a file: `schemas/NAME.json` beside this page.",
        "",
        "| name | what it describes |",
        "|---|---|",
    ]
    out += [f"| [`{name}`](schemas/{name}.json) | {cell(described)} |" for name, (described, _) in SCHEMAS.items()]
    for name, text in files.items():
        out += ["", f"## {name}", "", SCHEMAS[name][0][:1].upper() + SCHEMAS[name][0][1:] + ".", ""]
        out += ["```json", text.rstrip("\n"), "```"]
    return "\n".join(out) + "\n", files


def cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|")
