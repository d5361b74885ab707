"""Static checks run in the suite: ruff's lint rules and its formatter over the whole project, and mypy over the
packages (``ragnarok/``, ``api/``, ``webui/``) against a checked-in baseline that may only shrink.

The baseline is mypy's errors as ``path: message [code]``, one a line, sorted; after fixing some, write it anew:
``mypy ragnarok api webui --no-error-summary | grep ': error:' | sed -E 's/:[0-9]+(:[0-9]+)?: error: /: /' | sort``."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BASELINE = ROOT / "tests" / "mypy-baseline.txt"


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    out = run(str(BIN / "ruff"), "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_tree_is_in_ruff_format():
    out = run(str(BIN / "ruff"), "format", "--check", "--no-cache", ".")
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-4000:]


def mypy_errors(text: str) -> Counter[str]:
    """``path: message [code]`` for each error, without its line number (which moves with every edit above it)."""
    found = Counter()
    for line in text.splitlines():
        m = re.match(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<msg>.*)$", line)
        if m:
            found[f"{m['path']}: {m['msg']}"] += 1
    return found


def test_mypy_finds_no_error_outside_the_baseline():
    out = run(str(BIN / "mypy"), "ragnarok", "api", "webui", "--no-error-summary")
    now = mypy_errors(out.stdout)
    baseline = Counter(line for line in BASELINE.read_text(encoding="utf-8").splitlines() if line.strip())
    new = now - baseline
    assert not new, "mypy errors not in tests/mypy-baseline.txt:\n" + "\n".join(sorted(new))
    gone = baseline - now
    assert not gone, "fixed, so take them out of tests/mypy-baseline.txt (it only shrinks):\n" + "\n".join(sorted(gone))
