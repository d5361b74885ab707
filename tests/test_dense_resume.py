"""Dense builds that take hours: a build killed with SIGKILL resumes from its last checkpoint and gives
the same index as an uninterrupted one; a second build of the same index is refused while one runs; a build the
disk cannot hold is refused before it starts, naming the estimate; `ragnarok index --dense-kind/--shards`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_index_lifecycle import docs, ragnarok

from ragnarok.collection.lucene_index import index_documents
from ragnarok.stages.retrieve.dense import dense_dir
from ragnarok.stages.retrieve.dense_build import build_dense_index
from ragnarok.stages.retrieve.dense_chunks import partial_dir


def cli(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys\nfrom ragnarok.cli.main import app\napp(sys.argv[1:], prog_name='ragnarok')",
        *args,
    ]


def test_a_killed_build_resumes_and_gives_the_same_index(tmp_path, slowdown):
    for name in ("killed", "whole"):
        index_documents(iter(docs(240)), tmp_path / name / "idx")
    whole = subprocess.run(
        cli("index", "--dense", "minilm", "--from-lucene", str(tmp_path / "whole" / "idx"), "--dense-batch-size", "4"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert whole.returncode == 0, whole.stderr[-2000:]

    lucene = tmp_path / "killed" / "idx"
    out, partial = dense_dir(lucene, "minilm"), partial_dir(dense_dir(lucene, "minilm"))
    build = subprocess.Popen(
        cli("index", "--dense", "minilm", "--from-lucene", str(lucene), "--dense-batch-size", "4"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300 * slowdown
    while not (partial / "chunk-00001").is_dir():  # two checkpoints of 40 segments written
        assert build.poll() is None and time.monotonic() < deadline, "the build ended before its second chunk"
        time.sleep(0.02)
    build.send_signal(signal.SIGKILL)
    assert build.wait(timeout=60) == -signal.SIGKILL
    assert not out.exists() and (partial / "lock").read_text() == str(build.pid)  # nothing looks like an index
    kept = sorted(p.name for p in partial.glob("chunk-*") if not p.name.endswith(".tmp"))
    assert 2 <= len(kept) < 6, kept

    resumed = subprocess.run(
        cli("index", "--dense", "minilm", "--from-lucene", str(lucene), "--dense-batch-size", "4"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming the dense build of {out} after the {40 * len(kept)} segments encoded before" in resumed.stderr
    assert "240/240" in resumed.stderr  # the bar counts from where it resumed, to the total
    reference = dense_dir(tmp_path / "whole" / "idx", "minilm")
    for name in ("index.faiss", "docids.txt", "sentences/vectors.f32", "sentences/keys.npy"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert json.loads((out / "meta.json").read_text())["count"] == 240
    assert not partial.exists()


def test_a_second_build_is_refused_while_one_runs_and_the_disk_is_checked_first(tmp_path):
    out = tmp_path / "dense"
    texts = [(f"d{i}", f"text number {i}") for i in range(6)]
    other = subprocess.Popen(["sleep", "60"])  # a live process holding the build's lock
    try:
        partial_dir(out).mkdir()
        (partial_dir(out) / "lock").write_text(str(other.pid))
        with pytest.raises(
            RuntimeError, match=f"another build of the dense index {out} is running \\(pid {other.pid}\\)"
        ):
            build_dense_index(iter(texts), out)
    finally:
        other.kill()
        other.wait()
    assert build_dense_index(iter(texts), out, batch_size=2) == 6  # a dead build's lock is taken over
    assert not partial_dir(out).exists()
    with pytest.raises(
        OSError,
        match=r"not enough disk for the dense index of 1,000,000,000,000 segments at .*: "
        r"it needs about [\d.]+ GB .* and [\d.]+ [GM]B is free",
    ):
        build_dense_index(iter(texts), tmp_path / "huge", total=10**12)
    assert not (tmp_path / "huge").exists()


def test_cli_builds_the_kind_and_shards_asked_and_refuses_a_bad_kind(tmp_path):
    lucene = tmp_path / "idx"
    index_documents(iter(docs(30)), lucene)
    out = ragnarok(
        "index",
        "--dense",
        "minilm",
        "--from-lucene",
        str(lucene),
        "--dense-kind",
        "hnsw-sq8",
        "--shards",
        "2",
        "--no-sentence-store",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    meta = json.loads((dense_dir(lucene, "minilm") / "meta.json").read_text())
    assert meta["kind"] == "hnsw-sq8" and [s["count"] for s in meta["shards"]] == [15, 15]
    assert meta["params"] == {"M": 32, "efConstruction": 100, "efSearch": 256, "quantizer": "QT_8bit"}
    for args, message in [
        (
            ["--dense-kind", "ivf"],
            "error: unknown dense index kind 'ivf': choose one of flat, hnsw, hnsw-sq8, lucene-hnsw, auto",
        ),
        (["--hnsw", "--dense-kind", "flat"], "error: --hnsw is --dense-kind hnsw"),
        (["--shards", "31"], "error: --shards must be between 1 and the number of segments (30)"),
    ]:
        bad = ragnarok("index", "--dense", "minilm", "--from-lucene", str(lucene), "--force", *args)
        errors = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
        assert bad.returncode == 2 and len(errors) == 1 and errors[0].startswith(message), bad.stderr[-2000:]
    assert json.loads((dense_dir(lucene, "minilm") / "meta.json").read_text()) == meta  # left as it was
    assert os.listdir(dense_dir(lucene, "minilm").parent) == ["minilm"]


def test_the_sentence_store_is_off_by_default_past_the_threshold_and_says_so(tmp_path, monkeypatch):
    lucene = tmp_path / "idx"
    index_documents(iter(docs(30)), lucene)
    store = dense_dir(lucene, "minilm") / "sentences"
    monkeypatch.setenv("RAGNAROK_SENTENCE_STORE_MAX_SEGMENTS", "29")
    off = ragnarok("index", "--dense", "minilm", "--from-lucene", str(lucene), "--dense-kind", "flat")
    assert off.returncode == 0, off.stderr[-2000:]
    assert "sentence store: off (30 segments, more than 29: it would take ~0 MB" in off.stderr
    assert "--sentence-store builds it" in off.stderr and not store.exists()
    monkeypatch.setenv("RAGNAROK_SENTENCE_STORE_MAX_SEGMENTS", "30")
    on = ragnarok("index", "--dense", "minilm", "--from-lucene", str(lucene), "--dense-kind", "flat", "--force")
    assert on.returncode == 0 and "sentence store: on (30 segments, at most 30;" in on.stderr, on.stderr[-2000:]
    assert (store / "vectors.f32").stat().st_size > 30 * 384 * 4  # the segments and their sentences
    forced = ragnarok(
        "index",
        "--dense",
        "minilm",
        "--from-lucene",
        str(lucene),
        "--dense-kind",
        "flat",
        "--force",
        "--no-sentence-store",
    )
    assert forced.returncode == 0 and "sentence store:" not in forced.stderr and not store.exists()
