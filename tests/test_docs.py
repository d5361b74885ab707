"""The documentation: the MkDocs site builds with ``--strict`` and warns about nothing, every page of ``docs/`` is
in its nav, the reference pages generated at build time cover every setting, command and schema, and the README
stays short, its links into ``docs/`` pointing at pages (and headings) that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GENERATED = {"reference/settings.md", "reference/cli.md", "reference/schemas.md"}  # docs/hooks/reference.py


def nav_pages(entries: list) -> list[str]:
    """The page paths of an mkdocs.yml ``nav`` (titles and sections unwrapped)."""
    found = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def nav() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return nav_pages(config["nav"])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100", "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return out, built.stdout + built.stderr


def test_the_site_builds_strict_without_warnings(site):
    _, log = site
    assert not re.findall(r"^WARNING\b.*", log, re.M), log[-4000:]


def test_every_page_is_in_the_nav():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts}
    listed = nav()
    assert sorted(pages - set(listed)) == []
    assert sorted(set(listed) - pages - GENERATED) == []  # and nothing in the nav is missing
    assert len(listed) == len(set(listed))


def test_the_reference_covers_every_setting_command_and_schema(site):
    import typer

    from ragnarok.cli.main import app
    from ragnarok.cli.schema import SCHEMAS
    from ragnarok.core.settings import Settings

    out, _ = site
    settings = (out / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert [name for name in Settings.model_fields if f"RAGNAROK_{name.upper()}" not in settings] == []
    assert str(Path.home()) not in settings  # a default made from the machine is not this machine's value

    commands = (out / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    missing, todo = [], [(("ragnarok",), typer.main.get_command(app))]
    while todo:
        path, command = todo.pop()
        if f'<h2 id="{"-".join(path)}"' not in commands:
            missing.append(" ".join(path))
        for name, sub in getattr(command, "commands", {}).items():
            todo.append(((*path, name), sub))
    assert missing == [] and "\x1b[" not in commands  # every command, and no terminal colour codes
    assert "Usage: ragnarok serve [OPTIONS]" in commands

    schemas = (out / "reference" / "schemas" / "index.html").read_text(encoding="utf-8")
    for name in SCHEMAS:
        assert f'id="{name}"' in schemas and (out / "reference" / "schemas" / f"{name}.json").stat().st_size > 100


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250


def slug(heading: str) -> str:
    """The id Python-Markdown's table of contents gives a heading (its default slugify)."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def test_the_readmes_links_into_the_docs_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)\s]+)\)", readme)
    assert len(links) >= 10
    for link in links:
        path, _, anchor = link.partition("#")
        assert (ROOT / path).is_file(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(encoding="utf-8"), re.M)
            assert anchor in {slug(h) for h in headings}, link
    mentioned = set(re.findall(r"\bdocs/[\w./-]+\.md\b", readme))
    assert [m for m in mentioned if not (ROOT / m).is_file()] == []
