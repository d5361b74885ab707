"""`ragnarok index` at MS MARCO V2.1 scale, on tiny collections with real Lucene indexes and real
subprocesses: V2.1 segmented input indexed as it is and validated line by line; a build killed by SIGKILL
resumes by shard and gives the same BM25 index as one uninterrupted build; a second build of the same output is
refused; free disk is checked first; a disk that fills during the build is one clear error, the old index
untouched; progress with an estimate of the time left."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.types import Query
from ragnarok.stages.retrieve.lucene import LuceneRetriever

ROOT = Path(__file__).resolve().parent.parent
WORDS = [f"term{i}" for i in range(2000)]
runner = CliRunner()


def segments(n: int, seed: int = 5) -> list[dict]:
    """V2.1 segmented records (docids ``msmarco_v2.1_doc_NN_N#K_S``) with Zipf-like word frequencies."""
    rng = random.Random(seed)
    weights = [1 / (r + 1) for r in range(len(WORDS))]
    out = []
    for i in range(n):
        doc, k = divmod(i, 3)
        text = " ".join(rng.choices(WORDS, weights, k=rng.randint(40, 90))) + "."
        start = k * 500
        out.append(
            {
                "docid": f"msmarco_v2.1_doc_{doc % 60:02d}_{doc * 131}#{k}_{start}",
                "url": f"https://x.org/{doc}",
                "title": f"Title {doc}",
                "headings": f"Heading {doc}\nSub {k}",
                "segment": text,
                "start_char": start,
                "end_char": start + len(text),
            }
        )
    return out


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ragnarok.cli", *args]


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}


def snapshot(index: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(index.iterdir())}


def rankings(index: Path, queries: list[str]) -> list[list[tuple[str, float]]]:
    """Top 20 per query, as (docid, score rounded to 5 digits), ties in docid order."""
    retriever = LuceneRetriever("bm25", str(index))
    out = []
    for q in queries:
        hits = retriever.retrieve(Query(text=q), 20).candidates
        out.append(sorted(((c.docid, round(c.score, 5)) for c in hits), key=lambda h: (-h[1], h[0])))
    return out


def test_v21_segments_are_indexed_as_they_are(tmp_path):
    """A `segment` field and no `body` in the first record: the segments are indexed with their own docids,
    offsets and fields (documents, the other input, are still segmented in 10-sentence windows)."""
    records = segments(30)
    src = write_jsonl(tmp_path / "segs.jsonl", records)
    r = runner.invoke(app, ["index", str(src), str(tmp_path / "idx"), "--workers", "1", "--threads", "1"])
    assert r.exit_code == 0, r.output
    assert "indexed 30 segments (V2.1 segmented input, indexed as it is)" in r.stdout
    assert "indexed as they are, not segmented again" in r.stderr
    target = records[7]
    hits = LuceneRetriever("bm25", str(tmp_path / "idx")).retrieve(Query(text=target["segment"][:200]), 5)
    top = hits.candidates[0]
    assert top.docid == target["docid"] and top.doc.segment == target["segment"]
    assert (top.doc.start_char, top.doc.end_char, top.doc.title) == (
        target["start_char"],
        target["end_char"],
        target["title"],
    )
    assert not (tmp_path / "idx.partial").exists()  # the work directory goes once the index is in place
    documents = write_jsonl(
        tmp_path / "docs.jsonl", [{"docid": "d1", "body": " ".join(f"Sentence number {i} is here." for i in range(15))}]
    )
    r = runner.invoke(app, ["index", str(documents), str(tmp_path / "idx2"), "--workers", "1", "--threads", "1"])
    assert r.exit_code == 0 and "indexed 2 segments (1 documents segmented: 10-sentence windows" in r.stdout, r.output


@pytest.mark.parametrize(
    "bad, line, message",
    [
        (b'{"docid": "x", "segment": "unfinished', 3, "malformed JSON"),  # a truncated last line
        (b'{"docid": "y", "segment": "caf\xe9"}', 3, "not valid UTF-8"),
        (b'{"segment": "no id"}', 3, "a segment has no docid"),
        (b'{"docid": "y", "segment": 12}', 3, "malformed segment"),
    ],
)
def test_bad_v21_lines_fail_with_file_and_line(tmp_path, bad, line, message):
    good = [json.dumps(r).encode() for r in segments(2)]
    src = tmp_path / "segs.jsonl"
    src.write_bytes(b"\n".join([*good, bad]))  # no newline at the end: a last line cut short
    index = tmp_path / "idx"
    index.mkdir()
    (index / "marker").write_text("old index")
    r = runner.invoke(app, ["index", str(src), str(index), "--workers", "1"])
    assert r.exit_code == 2 and f"segs.jsonl:{line}: {message}" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 2 and r.stderr.strip().splitlines()[-1].startswith("error: ")
    assert snapshot(index) == {"marker": b"old index"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "segs.jsonl"]  # nothing left to resume


def test_duplicate_segment_docids_fail_or_are_left_out(tmp_path):
    records = segments(4)
    src = write_jsonl(tmp_path / "segs.jsonl", [*records, {**records[3], "segment": "another text"}])
    r = runner.invoke(app, ["index", str(src), str(tmp_path / "idx"), "--workers", "2"])
    assert r.exit_code == 2 and f"segs.jsonl:5: duplicate docid {records[3]['docid']!r}" in r.stderr, r.output
    r = runner.invoke(app, ["index", str(src), str(tmp_path / "idx"), "--workers", "2", "--skip-bad", "--threads", "1"])
    assert r.exit_code == 0 and "indexed 4 segments (V2.1" in r.stdout and "skipped bad lines: 1" in r.stderr, r.output


def _limit_file_size(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


def test_a_killed_build_resumes_by_shard_and_gives_the_same_index(tmp_path):
    """SIGKILL after 2 of 5 shards: a second build of the same output meanwhile is refused (the PID named);
    the next run, under a file-size limit, fails when the disk "fills" (one line, exit 2, the old index
    untouched); the one after resumes at shard 3 and its index ranks and scores every query as an
    uninterrupted build in one shard does."""
    records = segments(2000)
    src = write_jsonl(tmp_path / "segs.jsonl", records)
    out, one = tmp_path / "idx", tmp_path / "one"
    write_jsonl(tmp_path / "old.jsonl", segments(3, seed=9))
    assert runner.invoke(app, ["index", str(tmp_path / "old.jsonl"), str(out), "--threads", "1"]).exit_code == 0
    old = snapshot(out)
    cmd = cli("index", str(src), str(out), "--shard-segments", "400", "--threads", "1", "--workers", "1")
    shards = tmp_path / "idx.partial" / "shards"
    proc = subprocess.Popen(cmd, env=env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while len(list(shards.glob("*.done"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGSTOP)  # held still (its lock with it) while a second build is tried
        second = runner.invoke(app, ["index", str(src), str(out), "--shard-segments", "400"])
        proc.kill()
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert second.exit_code == 2 and f"another build of {out} is running (PID {proc.pid})" in second.stderr
    done = len(list(shards.glob("*.done")))
    assert 2 <= done < 5 and snapshot(out) == old

    full = subprocess.run(
        cmd, env=env(tmp_path), capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size(96 << 10)
    )
    assert full.returncode == 2, full.stderr[-3000:]
    said = full.stderr.strip().splitlines()[-1]
    assert said.startswith("error: the disk filled while indexing shard") and "it resumes" in said, full.stderr
    assert "Exception" not in full.stderr and snapshot(out) == old

    resumed = subprocess.run(cmd, env=env(tmp_path), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {done} of 5 shards done" in resumed.stderr
    assert "indexing: 2000/2000 segments" in resumed.stderr and "left" in resumed.stderr  # progress with an ETA
    assert not (tmp_path / "idx.partial").exists()
    r = runner.invoke(app, ["index", str(src), str(one), "--threads", "1"])
    assert r.exit_code == 0, r.output
    queries = [" ".join(records[i]["segment"].split()[:6]) for i in range(0, 2000, 97)] + ["term3 term17", "term900"]
    assert rankings(out, queries) == rankings(one, queries)


def test_a_work_directory_of_another_build_is_started_over(tmp_path):
    src = write_jsonl(tmp_path / "segs.jsonl", segments(20))
    work = tmp_path / "idx.partial"
    (work / "shards").mkdir(parents=True)
    (work / "build.json").write_text('{"format": 1, "input": [], "options": {}}')
    (work / "shards" / "00000.done").write_text("7\n")
    r = runner.invoke(app, ["index", str(src), str(tmp_path / "idx"), "--shard-segments", "7", "--threads", "1"])
    assert r.exit_code == 0 and "indexed 20 segments" in r.stdout, r.output
    assert "starting over" in r.stderr and "resuming" not in r.stderr


def test_free_disk_is_checked_before_starting(tmp_path):
    """An input whose index cannot fit (a sparse file of 2 TB, never read): refused at once, naming the
    estimate and the free space, nothing written."""
    src = tmp_path / "huge.jsonl"
    with open(src, "wb") as f:
        f.write(json.dumps(segments(1)[0]).encode() + b"\n")
        f.truncate(2 << 40)

    def bounded() -> None:  # were the check missing, reading 2 TB of zeros as one line fails here, not the machine
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    r = subprocess.run(
        cli("index", str(src), str(tmp_path / "idx")),
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=bounded,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    said = r.stderr.strip().splitlines()[-1]
    assert said.startswith("error: not enough free disk for this build: it needs about ") and " is free at " in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "huge.jsonl"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["huge.jsonl"]


def test_a_disk_that_fills_while_writing_chunks_is_one_clear_error(tmp_path):
    src = write_jsonl(tmp_path / "segs.jsonl", segments(600))
    out = tmp_path / "idx"
    out.mkdir()
    (out / "marker").write_text("old index")
    r = subprocess.run(
        cli("index", str(src), str(out), "--workers", "1"),
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(64 << 10),
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "error: the disk filled while writing the chunk files; nothing was put in place; free space and run the "
        "same command again: it resumes"
    ), r.stderr
    assert snapshot(out) == {"marker": b"old index"}


def test_a_v21_line_becomes_the_same_anserini_record_without_being_serialised_again():
    """The fast path (the line as read, ``id`` and ``contents`` put in front) gives the JSON object of
    ``anserini_record``; a record that validation changed (a numeric docid, a null title) goes the slow way."""
    from ragnarok.collection.jsonl import to_segment
    from ragnarok.collection.lucene_index import anserini_record
    from ragnarok.collection.parallel_segment import segmented_lines

    lines = [
        json.dumps(segments(1)[0]),
        json.dumps({**segments(1)[0], "title": 'Ünïcödé \u2028 "q"'}, ensure_ascii=False),
        '  {"docid": "a#0_0", "segment": "x\\ny \\ud83d\\ude00", "title": null}  ',
        '{"docid": 7, "segment": "seven", "url": 3}',
    ]
    for line in lines:
        record = json.loads(line)
        segment = to_segment(record, "here")
        out, n = segmented_lines(segment, True, line.encode() if segment == record else None)
        assert n == 1 and out.endswith(b"\n") and json.loads(out) == anserini_record(segment)


def test_every_indexing_thread_gets_a_chunk_file_however_small_the_shard(tmp_path):
    from ragnarok.collection.sharded_build import _ChunkWriter

    writer = _ChunkWriter(tmp_path, shard_segments=1_000_000, parts=2)  # one shard, two threads
    for i in range(5):
        writer.add(f'{{"id": "s{i}"}}\n'.encode())
    writer.finish()
    parts = sorted((tmp_path / "00000").iterdir())
    assert [p.name for p in parts] == ["part-000.jsonl", "part-001.jsonl"] and writer.counts == [5]
    assert [len(p.read_text().splitlines()) for p in parts] == [3, 2]  # dealt in turn: both threads have work
    single = _ChunkWriter(tmp_path / "one", shard_segments=10, parts=4)
    single.add(b'{"id": "only"}\n')
    single.finish()
    assert [p.name for p in (tmp_path / "one" / "00000").iterdir()] == ["part-000.jsonl"]  # no empty files


def test_the_default_shard_size_is_a_tenth_of_the_collection(tmp_path):
    """Estimated from the input's first MB (a V2.1 file of any size, documents too), kept within its bounds: a
    build killed halfway finds about half of its shards done (bench/bench_index_v21.py measures it)."""
    from ragnarok.collection.build_dir import MAX_SHARD, MIN_SHARD, default_shard_segments, estimate_segments

    src = write_jsonl(tmp_path / "segs.jsonl", segments(6000))
    assert 5_400 <= estimate_segments(src, True) <= 6_600
    assert default_shard_segments(src, True) == MIN_SHARD
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as out:
        for _ in range(40):
            out.write(src.read_bytes())  # 240,000 lines
    assert 216_000 <= estimate_segments(big, True) <= 264_000
    assert 21_600 <= default_shard_segments(big, True) <= 27_200 < MAX_SHARD
    docs = write_jsonl(
        tmp_path / "docs.jsonl",
        [
            {"docid": f"d{i}", "body": " ".join(f"Sentence {j} of document {i} is here." for j in range(30))}
            for i in range(200)
        ],
    )
    assert 200 * 5 * 0.9 <= estimate_segments(docs, False) <= 200 * 5 * 1.1  # 30 sentences: 5 windows each
