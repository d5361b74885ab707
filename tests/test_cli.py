"""The CLI: help on every command, and bad input as one line on stderr with exit code 2."""

import subprocess
import sys

import pytest

COMMANDS = ["serve", "index", "search", "eval"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("command", COMMANDS)
def test_help(command):
    out = run(command, "--help")
    assert out.returncode == 0 and "Usage" in out.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["eval", "/nonexistent/qrels", "/nonexistent/run"], "cannot read qrels"),
    (["search", "--topics", "nope", "--output", "x.txt"], "unknown topic set or file 'nope'"),
    (["index", "/nonexistent", "/tmp/x", "--collection", "HtmlCollection"], "collection not found"),
    (["index", "/nonexistent.jsonl", "/tmp/x"], "collection not found"),
    (["index"], "give INPUT and OUTPUT"),
    (["index", "--from-lucene", "/nonexistent"], "give --dense MODEL"),
])
def test_errors_are_one_line(args, message, tmp_path):
    out = subprocess.run([sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], out.stderr[-1000:]
    assert "Traceback" not in out.stderr


def test_malformed_collection_line_is_reported(tmp_path):
    (tmp_path / "docs.jsonl").write_text('{"docid": "a", "body": "x."}\n{"docid": \n')
    out = run("index", str(tmp_path / "docs.jsonl"), str(tmp_path / "idx"))
    assert out.returncode == 2 and "docs.jsonl:2: malformed JSON" in out.stderr
    assert not (tmp_path / "idx").exists()
