"""The wheel: built from the tracked files, it carries every file the package reads besides its code (the demo's
topics, qrels, nuggets and references; the generator and judge templates), and installed into a fresh virtual
environment (no checkout, no PYTHONPATH) it gives a working ``ragnarok`` that finds the demo topics and qrels."""

from __future__ import annotations

import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ragnarok/", "api/", "webui/")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.decode().split("\0") if p]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of a copy of the tracked files (the build writes build/ and *.egg-info where it runs)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in tracked():
        if name.startswith(PACKAGES) or name in ("pyproject.toml", "README.md"):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes((ROOT / name).read_bytes())
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("ragnarok_rag-*.whl"))


def test_the_wheel_carries_topics_templates_and_presets(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [p for p in tracked() if p.startswith(PACKAGES) and not p.endswith(".py")]
    assert "ragnarok/data/topics/demo.tsv" in data and "ragnarok/stages/generate/prompts/ragnarok.yaml" in data
    assert sorted(set(data) - names) == []  # every data file of the packages: topics, qrels, nuggets, templates
    for module in (
        "ragnarok/__init__.py",
        "ragnarok/api.py",
        "ragnarok/core/presets.py",
        "ragnarok/cli/main.py",
        "api/main.py",
        "webui/app.py",
    ):
        assert module in names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ragnarok = ragnarok.cli.main:app" in zipfile.ZipFile(wheel).read(entry).decode()


def test_the_installed_wheel_finds_its_demo_topics(wheel, tmp_path):
    """--no-deps into a fresh venv that sees this interpreter's packages (the dependencies) as plain paths: the
    code and data are the wheel's, not the checkout's."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = next(venv.glob("lib/python3*/site-packages"))
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "RAGNAROK_DATA_DIR": str(tmp_path / "d"),
        "RAGNAROK_TOPICS_DIR": str(tmp_path / "none"),
    }
    (tmp_path / "run.txt").write_text("demo-01 Q0 stdlib.gzip#0_0 1 9.0 r\n")

    def run(*args: str) -> str:
        out = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout + out.stderr

    where = run(
        str(venv / "bin" / "python"),
        "-c",
        "import ragnarok, ragnarok.core.topic_sets as t; "
        "print(t.PACKAGE_TOPICS); print(ragnarok.load_topics('demo')[0].qid)",
    )
    assert where.split() == [str(purelib / "ragnarok" / "data" / "topics"), "demo-01"]
    assert "demo\tavailable" in run(str(venv / "bin" / "ragnarok"), "topics", "list")
    assert "covers 1 of the 50 topics of qrels.demo.txt" in run(
        str(venv / "bin" / "ragnarok"), "eval", "demo", "run.txt"
    )
    assert "ragnarok 0.1.0" in run(str(venv / "bin" / "ragnarok"), "--version")
