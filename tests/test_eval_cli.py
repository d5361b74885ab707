"""``ragnarok eval``: ``--run-name a b`` is refused (a --run-name takes one name; ``b`` is not a run),
and a run that covers only some of the qrels' topics says so on stderr, its missing topics scored 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from ragnarok.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
cli = CliRunner()


def _qrels(path: Path, topics: int) -> Path:
    path.write_text("".join(f"t{q} 0 d{q}a 1\nt{q} 0 d{q}b 0\n" for q in range(topics)))
    return path


def _run(path: Path, topics: list[int]) -> Path:
    path.write_text("".join(f"t{q} Q0 d{q}a 1 2.0 x\nt{q} Q0 d{q}b 2 1.0 x\n" for q in topics))
    return path


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_run_name_with_two_values_is_refused(tmp_path):
    qrels, a, b = _qrels(tmp_path / "q.txt", 2), _run(tmp_path / "a.txt", [0, 1]), _run(tmp_path / "b.txt", [0, 1])
    for args in (["--run-name", "x", "y"], [str(b), "--run-name", "x", "y"]):
        out = cli.invoke(app, ["eval", str(qrels), str(a), *args])
        errors = _errors(out.output)
        assert out.exit_code == 2 and len(errors) == 1, out.output
        assert "y: no such run file" in errors[0] and "--run-name a --run-name b" in errors[0], errors[0]
    out = cli.invoke(app, ["eval", str(qrels), str(a), "y", "--run-name", "x", "--run-name", "z"])  # counts agree
    assert out.exit_code == 2 and "y: no such run file" in _errors(out.output)[0], out.output
    out = cli.invoke(app, ["eval", str(qrels), str(a), str(b), "--run-name", "x", "--run-name", "x"])
    assert out.exit_code == 2 and "distinct" in _errors(out.output)[0], out.output
    out = cli.invoke(app, ["eval", str(qrels), str(a), str(b), "--run-name", "x", "--run-name", "y"])
    assert out.exit_code == 0, out.output
    assert [line.split()[0] for line in out.output.splitlines()[1:]] == ["x", "y"]


def test_a_run_covering_some_topics_is_warned_about_and_its_missing_topics_count_as_0(tmp_path):
    qrels = _qrels(tmp_path / "q.txt", 50)
    few, every = _run(tmp_path / "few.txt", [0, 1]), _run(tmp_path / "every.txt", list(range(50)))
    done = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "eval", str(qrels), str(few), str(every)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: few.txt covers 2 of the 50 topics of q.txt; the 48 missing count as 0"], done.stderr
    rows = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in done.stdout.splitlines()[1:]}
    assert rows["every.txt"] == [1.0] * 4  # every topic answered perfectly
    assert rows["few.txt"] == [0.04] * 4  # 2 perfect topics of 50
