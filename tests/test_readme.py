"""The runnable shell blocks of the README and the docs pages, run as they are written, so neither can drift
from the CLI.

A block is runnable when the line before its ```` ```bash ```` fence is ``<!-- runnable -->`` (run from the root of
a clone) or ``<!-- runnable: server -->`` (run against ``ragnarok serve`` on the demo index; the one change made
to such a block is ``localhost:8000`` → the test server's own port). They are collected from ``README.md`` and
every page under ``docs/``; the README's tour shows copies of the docs' runnable blocks, and a test checks that
each of its shell blocks is one. The clone is a fresh directory holding links to the checkout's files, with the
shared data beside it as ``../shared``, so the blocks' relative paths resolve as in a real clone and what they
write (``runs/``) stays in a temporary directory. Each block runs with ``bash -euo pipefail``: any failing
command fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- runnable(?:: (?P<kind>server))? -->\n```bash\n(?P<body>.*?)^```$", re.M | re.S)
FENCE = re.compile(r"^```bash\n(?P<body>.*?)^```$", re.M | re.S)


def sources() -> list[Path]:
    """README.md, then the docs' pages in the order of mkdocs.yml's nav (a reader's order: the server's first
    requests come from the getting-started page), then any page the nav lacks."""
    from test_docs import nav

    pages = [ROOT / "docs" / page for page in nav() if (ROOT / "docs" / page).is_file()]
    return [ROOT / "README.md", *pages, *sorted(set((ROOT / "docs").rglob("*.md")) - set(pages))]


def blocks(kind: str | None) -> list[str]:
    return [
        m["body"] for path in sources() for m in MARK.finditer(path.read_text(encoding="utf-8")) if m["kind"] == kind
    ]


def test_the_cacm_demo_and_server_blocks_are_marked():
    shell = blocks(None)
    assert any("cacm" in b and "ragnarok eval" in b for b in shell)
    assert any("--topics demo" in b for b in shell)
    assert any("ragnarok run --topics demo" in b and "ragnarok validate" in b for b in shell)
    assert len(shell) >= 6 and len(blocks("server")) >= 7  # as many as were marked when the README held them all


def test_the_readmes_shell_blocks_are_run():
    """Each shell block of the README but the set-up one is a runnable block of the docs, word for word."""
    runnable = set(blocks(None)) | set(blocks("server"))
    readme = [m["body"] for m in FENCE.finditer((ROOT / "README.md").read_text(encoding="utf-8"))]
    shown = [body for body in readme if not body.startswith("make serve")]
    assert len(shown) >= 3 and len(shown) < len(readme)
    assert [body for body in shown if body not in runnable] == []


@pytest.fixture
def clone(tmp_path, shared_data) -> Path:
    """A directory that looks like a fresh clone (links to the checkout's files, no ``runs/``), with
    ``../shared`` beside it; ``.venv`` is the environment running the tests."""
    root = tmp_path / "ragnarok"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".git", ".venv", "runs", "data"}:
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.prefix))
    (tmp_path / "shared").symlink_to(shared_data.parent)
    return root


def run_block(body: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    assert out.returncode == 0, f"block failed ({out.returncode}):\n{body}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.slow
def test_runnable_blocks_run_verbatim(clone, demo_settings):
    """The CACM reproduction, the demo's command-line blocks and the track run, exactly as written; the demo index is the
    session's (building it is tested in test_index_lifecycle.py)."""
    outputs = [
        run_block(body, clone, {"RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}).stdout for body in blocks(None)
    ]
    cacm = next(o for o, b in zip(outputs, blocks(None)) if "cacm" in b)
    rows = {line.split()[0]: line.split()[1:] for line in cacm.splitlines()[1:]}
    assert rows["bm25.txt"][3] == "0.3123" and rows["rm3.txt"][3] == "0.3648"  # MAP, as docs/command-line.md says
    assert (clone / "runs" / "demo-bm25.txt").stat().st_size > 0 and not (ROOT / "runs" / "cacm-index").exists()


@pytest.mark.slow
def test_server_blocks_run_against_the_demo(clone, demo_settings, tmp_path):
    from servers import ragnarok_serve

    env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}
    with ragnarok_serve(env, output=tmp_path / "serve.log") as base:
        for body in blocks("server"):
            out = run_block(body.replace("localhost:8000", base.removeprefix("http://")), clone, {})
            # an error body opens with "detail" (a trace's stages may carry a "detail" of their own)
            assert out.stdout.strip() and not re.search(r'^\{\s*"detail"', out.stdout, re.M), out.stdout[-2000:]
