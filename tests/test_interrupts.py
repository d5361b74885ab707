"""SIGINT and SIGTERM stop the long commands within 5 s: exit code 130 / 143, one ``interrupted: ...`` line on
stderr that says how to resume, no traceback, no JVM crash file; what was finished is kept and valid, and
running the same command again resumes (``ragnarok run``: the same submission as an uninterrupted run)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fakes import flaky_openai_app
from servers import serve_app

from ragnarok.core.topics import read_tsv
from ragnarok.track.validate import validate

ROOT = Path(__file__).resolve().parent.parent
TOPICS = read_tsv(ROOT / "topics" / "demo.tsv")
SLOW = "slow200"  # the fake OpenAI server's model that answers after 200 ms


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ragnarok.cli", *args]


def lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


class Stopped:
    def __init__(self, code: int, seconds: float, after: str, stderr: str):
        self.code, self.seconds, self.after, self.stderr = code, seconds, after, stderr


def interrupt(
    cmd: list[str], env: dict[str, str], cwd: Path, sig: int, ready: Callable[[], bool], timeout: float = 240
) -> Stopped:
    """Start ``cmd``, send ``sig`` once ``ready()``, and see how it ends (stderr said after the signal apart)."""
    cwd.mkdir(parents=True, exist_ok=True)
    err = cwd / f"stderr.{time.monotonic_ns()}.txt"
    with open(err, "wb") as handle:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=handle)
    try:
        deadline = time.monotonic() + timeout
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"ended before it was interrupted:\n{err.read_text()[-3000:]}"
        assert ready(), f"not ready after {timeout} s:\n{err.read_text()[-3000:]}"
        before = len(err.read_bytes())
        start = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = -999
        seconds = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = err.read_bytes()
    err.unlink()
    return Stopped(code, seconds, data[before:].decode("utf-8", "replace"), data.decode("utf-8", "replace"))


def assert_stopped(stopped: Stopped, sig: int, cwd: Path, *words: str) -> str:
    """Exit 128 + signal within 5 s, one line after the signal (returned), no traceback, no JVM crash file."""
    assert stopped.code == 128 + sig, (stopped.code, stopped.stderr[-3000:])
    assert stopped.seconds < 5, (stopped.seconds, stopped.stderr[-3000:])
    said = [line for line in stopped.after.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("interrupted: "), stopped.after
    assert "run the same command again" in said[0], said[0]
    for word in words:
        assert word in said[0], (word, said[0])
    print(f"{stopped.seconds:.2f} s: {said[0]}")
    assert "Traceback" not in stopped.stderr and "Error" not in stopped.after, stopped.stderr[-3000:]
    assert not list(cwd.glob("hs_err_pid*.log")) and not list(cwd.glob("core*")), sorted(os.listdir(cwd))
    return said[0]


@pytest.fixture(scope="module")
def slow_llm():
    with serve_app(flaky_openai_app()) as url:
        yield [
            {"name": SLOW, "backend": "openai", "base_url": f"{url}/v1", "model": "fixed-200ms", "max_concurrency": 8}
        ]


def environment(data_dir: Path, generators: list) -> dict[str, str]:
    return {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data_dir),
        "RAGNAROK_GENERATORS": json.dumps(generators),
        "PYTHONPATH": str(ROOT),
    }


def records(path: Path) -> dict[str, dict]:
    out = {}
    for line in path.read_bytes().splitlines():
        record = json.loads(line)  # every line whole
        assert record["topic_id"] not in out
        out[record["topic_id"]] = record
    return out


@pytest.mark.parametrize(
    "sig, pipeline, topics",
    [
        (signal.SIGINT, f"bm25@20 | {SLOW}", 50),
        (signal.SIGTERM, f"bm25@10 | mmr@5 | {SLOW}", 12),  # Lucene and PyTorch (MiniLM) threads busy together
    ],
    ids=["sigint", "sigterm-mmr"],
)
def test_run_stops_keeps_whole_lines_and_resumes(demo_settings, slow_llm, tmp_path, sig, pipeline, topics):
    env = environment(demo_settings.data_dir, slow_llm)
    chosen = tmp_path / "topics.tsv"
    chosen.write_text("".join((ROOT / "topics" / "demo.tsv").read_text().splitlines(keepends=True)[:topics]))
    out = tmp_path / "run.jsonl"
    cmd = cli(
        "run",
        "--topics",
        str(chosen),
        "--pipeline",
        pipeline,
        "--run-id",
        "stopped",
        "--output",
        str(out),
        "--concurrency",
        "2",
        "--no-progress",
    )
    stopped = interrupt(cmd, env, tmp_path / "cwd", sig, lambda: lines(out) >= 3)
    said = assert_stopped(stopped, sig, tmp_path / "cwd", str(out), f"of {topics} topics written")
    kept = records(out)
    assert 3 <= len(kept) < topics and out.read_bytes().endswith(b"\n")
    assert said.startswith(f"interrupted: {len(kept)} of {topics} topics written to {out}")
    resumed = subprocess.run(cmd, cwd=tmp_path / "cwd", env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{topics - len(kept)} topics written, {len(kept)} already done" in resumed.stderr
    whole = tmp_path / "whole.jsonl"
    once = subprocess.run(
        cmd[: cmd.index("--output") + 1] + [str(whole)] + cmd[cmd.index("--output") + 2 :],
        cwd=tmp_path / "cwd",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert once.returncode == 0, once.stderr[-3000:]
    assert records(out) == records(whole)  # resumed = uninterrupted
    result = validate(out, {t.qid: t.text for t in TOPICS[:topics]})
    assert result.ok, [str(p) for p in result.problems]


def test_search_stops_on_sigint(demo_settings, slow_llm, tmp_path):
    """Each topic's query is rewritten by the slow LLM first: the search is interrupted while the pipeline runs."""
    env = environment(demo_settings.data_dir, slow_llm)
    out = tmp_path / "run.txt"
    calls = slow_llm[0]["base_url"].removesuffix("/v1") + "/stats"  # the server counts calls per model
    start = httpx.get(calls).json()["calls"].get("fixed-200ms", 0)
    cmd = cli(
        "search", "--topics", "demo", "--pipeline", f"hyde:{SLOW} > bm25@20", "--output", str(out), "--threads", "2"
    )
    stopped = interrupt(
        cmd,
        env,
        tmp_path / "cwd",
        signal.SIGINT,
        lambda: httpx.get(calls).json()["calls"].get("fixed-200ms", 0) >= start + 4,
    )
    assert_stopped(stopped, signal.SIGINT, tmp_path / "cwd", "nothing written yet")
    assert not out.exists()


def test_optimize_stops_on_sigterm_and_resumes_its_study(demo_settings, tmp_path):
    """The case that crashed (a JVM SIGSEGV in libtorch, exit 134, an hs_err_pid*.log); the trial in flight is
    given back to the study, not left running."""
    config = tmp_path / "search.yaml"
    config.write_text(
        f"""index: {demo_settings.demo_index_dir}
topics: {ROOT / "topics" / "demo.tsv"}
qrels: {ROOT / "topics" / "qrels.demo.txt"}
objective: nDCG@10
strategy: random
budget: {{trials: 8}}
nodes:
  - node: lexical
    modules:
      - {{module: bm25, k1: [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]}}
      - {{module: bm25+rocchio, terms: [5, 10, 20]}}
  - node: retrieval
    modules:
      - {{module: lexical, depth: 100}}
""",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    env = {**environment(demo_settings.data_dir, []), "RAGNAROK_OPTIMIZE_HEARTBEAT_S": "1"}
    cmd = cli("optimize", str(config), "--output", str(out), "--no-cache")

    def finished() -> int:
        try:
            with sqlite3.connect(out / "study.db", timeout=1) as db:
                return db.execute("SELECT count(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0]
        except sqlite3.Error:
            return 0

    stopped = interrupt(cmd, env, tmp_path / "cwd", signal.SIGTERM, lambda: finished() >= 2)
    said = assert_stopped(stopped, signal.SIGTERM, tmp_path / "cwd", "of 8 trials", "study.db")
    kept = finished()
    assert 2 <= kept < 8, said
    with sqlite3.connect(out / "study.db") as db:  # a seeded repeat of a finished trial (same_as) is no trial kept
        counted = db.execute(
            "SELECT count(*) FROM trials WHERE state = 'COMPLETE' AND trial_id NOT IN "
            "(SELECT trial_id FROM trial_user_attributes WHERE key = 'same_as')"
        ).fetchone()[0]
    with sqlite3.connect(out / "study.db") as db:  # the trial in flight was given back, not left running
        assert db.execute("SELECT count(*) FROM trials WHERE state = 'RUNNING'").fetchone()[0] == 0
    resumed = subprocess.run(cmd, cwd=tmp_path / "cwd", env=env, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert finished() >= 8
    # the count goes on from what was kept (it restarted at 1), and no pipeline ran twice (the seeded
    # sampler replayed its proposals: 8 trials covered 4 pipelines)
    counts = [
        line.split("[", 1)[1].split("/", 1)[0]
        for line in resumed.stderr.splitlines()
        if " [" in line and "/8] " in line
    ]
    assert counts and counts[0] == str(counted + 1), resumed.stderr[-3000:]
    with sqlite3.connect(out / "study.db") as db:
        specs = [
            row[0]
            for row in db.execute(
                "SELECT a.value_json FROM trials t JOIN trial_user_attributes a ON a.trial_id = t.trial_id "
                "WHERE t.state = 'COMPLETE' AND a.key = 'spec' AND t.trial_id NOT IN "
                "(SELECT trial_id FROM trial_user_attributes WHERE key = 'same_as')"
            )
        ]
    assert len(specs) == 8 and len(set(specs)) == 8, specs


def write_answers(path: Path, run_id: str, topics) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for t in topics:
            f.write(
                json.dumps(
                    {
                        "run_id": run_id,
                        "topic_id": t.qid,
                        "topic": t.text,
                        "references": ["d1", "d2"],
                        "response_length": 12,
                        "answer": [{"text": f"{run_id} says {t.text} is answered here.", "citations": [0]}],
                    }
                )
                + "\n"
            )


def judgments(data_dir: Path) -> int:
    try:
        with sqlite3.connect(data_dir / "judgments.db", timeout=1) as db:
            return db.execute("SELECT count(*) FROM judgments").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize(
    "sig, command",
    [(signal.SIGINT, "eval-rag"), (signal.SIGTERM, "judge pairwise")],
    ids=["sigint-eval-rag", "sigterm-judge-pairwise"],
)
def test_judging_stops_and_keeps_its_judgments(slow_llm, tmp_path, sig, command):
    data = tmp_path / "data"
    env = environment(data, slow_llm)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_answers(a, "a", TOPICS[:20])
    write_answers(b, "b", TOPICS[:20])
    if command == "eval-rag":
        nuggets = tmp_path / "nuggets.jsonl"
        nuggets.write_text(
            "".join(
                json.dumps(
                    {"qid": t.qid, "query": t.text, "nuggets": [{"text": f"{t.text} matters", "importance": "vital"}]}
                )
                + "\n"
                for t in TOPICS[:20]
            )
        )
        cmd = cli("eval-rag", str(a), "--nuggets", str(nuggets), "--judge", SLOW, "--concurrency", "1")
    else:
        cmd = cli("judge", "pairwise", str(a), str(b), "--judge", SLOW, "--concurrency", "1")
    stopped = interrupt(cmd, env, tmp_path / "cwd", sig, lambda: judgments(data) >= 3)
    said = assert_stopped(stopped, sig, tmp_path / "cwd", "judgments cached in", "judgments.db")
    kept = judgments(data)
    assert said.startswith(f"interrupted: {kept} new judgments") or said.startswith(f"interrupted: {kept - 1} new")
    cmd[cmd.index("--concurrency") + 1] = "8"  # the rest, quicker: the cache does not depend on it
    resumed = subprocess.run(cmd, cwd=tmp_path / "cwd", env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]  # pairwise: 1 when every verdict was unreadable
    assert f"{kept} from the cache" in resumed.stderr, resumed.stderr[-3000:]


def test_index_stops_on_sigterm_and_leaves_the_old_index(tmp_path):
    docs = tmp_path / "docs.jsonl"
    sentence = "Lucene indexes segments of ten sentences with a stride of five in this collection."
    with open(docs, "w", encoding="utf-8") as f:
        for n in range(6000):
            f.write(
                json.dumps(
                    {
                        "docid": f"doc{n}",
                        "url": f"https://example.org/{n}",
                        "title": f"Doc {n}",
                        "headings": "",
                        "body": " ".join(f"{sentence} Word{n}x{i}." for i in range(40)),
                    }
                )
                + "\n"
            )
    target = tmp_path / "index"
    from test_index_lifecycle import docs as old_docs

    from ragnarok.collection.lucene_index import index_documents

    index_documents(iter(old_docs(3)), target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    err_seen = tmp_path / "cwd"
    cmd = cli("index", str(docs), str(target), "--workers", "2")
    stopped = interrupt(
        cmd,
        env,
        err_seen,
        signal.SIGTERM,  # Anserini indexing, in Java on the main thread
        lambda: any((tmp_path / "index.partial" / "shards").glob("*")),
    )
    assert_stopped(stopped, signal.SIGTERM, err_seen, "the index was not changed", "resumes")
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    time.sleep(0.5)
    # the build's work directory is kept for the next run to resume, and nothing else is left
    assert (tmp_path / "index.partial" / "chunked.json").exists(), os.listdir(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["cwd", "data", "docs.jsonl", "index", "index.partial"] or sorted(
        os.listdir(tmp_path)
    ) == ["cwd", "docs.jsonl", "index", "index.partial"], os.listdir(tmp_path)


def test_an_interrupted_collection_rebuild_leaves_the_live_index_as_it_was(tmp_path):
    """``ragnarok index DIR INDEX --collection ...`` builds beside INDEX and swaps it in when complete: stopped
    half-way, INDEX holds exactly its files before (Lucene's ``_1.*`` and ``*.tmp`` files were left in
    it) and no partial index is left beside it."""
    import hashlib

    from ragnarok.collection.lucene_index import index_collection

    def collection(folder: Path, docs: int) -> Path:
        folder.mkdir()
        words = [f"w{i}" for i in range(5000)]
        with open(folder / "docs.jsonl", "w", encoding="utf-8") as f:
            for n in range(docs):
                text = " ".join(words[(n * 7 + i * 13) % len(words)] for i in range(120))
                f.write(json.dumps({"id": f"doc{n}", "contents": text}) + "\n")
        return folder

    target = tmp_path / "index"
    index_collection(collection(tmp_path / "small", 20), target, "JsonCollection", 1)

    def snapshot() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(target.iterdir())}

    before = snapshot()
    big = collection(tmp_path / "big", 60_000)
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    cmd = cli("index", str(big), str(target), "--collection", "JsonCollection", "--threads", "1")
    stopped = interrupt(
        cmd,
        env,
        tmp_path / "cwd",
        signal.SIGTERM,
        lambda: any((tmp_path / "index.partial").glob("*")) or {p.name for p in target.iterdir()} != set(before),
    )
    assert_stopped(stopped, signal.SIGTERM, tmp_path / "cwd", "the index was not changed")
    assert snapshot() == before
    time.sleep(0.5)
    assert not (tmp_path / "index.partial").exists(), os.listdir(tmp_path)


def test_the_resume_line_starts_a_line_of_its_own_after_a_progress_bar(tmp_path):
    """A tqdm bar writes its line with carriage returns, in a log file too: the resume line starts on the next
    line, not glued to the bar."""
    script = """
import sys, time
from tqdm import tqdm
from ragnarok.runtime.interrupt import stop_on_signals
with stop_on_signals("3 of 10 things kept; run the same command again"):
    bar = tqdm(total=10, desc="work", file=sys.stderr, mininterval=0)
    bar.update(3)
    print("ready", flush=True)
    time.sleep(60)
"""
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(out, "w") as stdout, open(err, "w") as stderr:  # a log file: no terminal
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env, stdout=stdout, stderr=stderr)
    deadline = time.monotonic() + 120
    while "ready" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    said = err.read_text()
    assert "3/10" in said and said.endswith("\ninterrupted: 3 of 10 things kept; run the same command again\n"), said


def test_a_main_thread_blocked_in_java_stops_at_once(tmp_path):
    """The JVM leaves SIGTERM to us (-Xrs) and the stop does not wait for the main thread's Java call."""
    script = """
import sys
from ragnarok.runtime.interrupt import stop_on_signals
from ragnarok.core.java import start_jvm
start_jvm()
from jnius import autoclass
with stop_on_signals("3 of 5 things kept; run the same command again"):
    print("ready", flush=True)
    autoclass("java.lang.Thread").sleep(60000)
print("not interrupted")
"""
    out = tmp_path / "out.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(out, "w") as handle:
        cmd = [sys.executable, "-c", script]
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=handle, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while "ready" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stderr = proc.communicate(timeout=30)[1]
    assert proc.returncode == 143 and time.monotonic() - start < 5, (proc.returncode, stderr)
    assert stderr == "interrupted: 3 of 5 things kept; run the same command again\n"
    assert out.read_text() == "ready\n" and not list(tmp_path.glob("hs_err_pid*.log"))
