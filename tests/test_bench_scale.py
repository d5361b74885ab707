"""bench/bench_scale.py's small pieces: the V2.1-style collection generator, the goal ratios, the disk check,
synthetic vectors, and the JSON of a tiny end-to-end run (real Lucene builds, a real server)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import scale_corpus as sc  # noqa: E402
import scale_measure as sm  # noqa: E402


@pytest.fixture(scope="module")
def vocab(shared_data):
    return sc.Vocabulary.from_text(sc.real_passages(shared_data))


def test_collection_is_deterministic_with_its_seed(tmp_path, vocab):
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("a", "b", "c")}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        assert sc.write_collection(paths[name], 300, seed, vocab)["segments"] == 300
    assert paths["a"].read_bytes() == paths["b"].read_bytes()
    assert paths["a"].read_bytes() != paths["c"].read_bytes()
    assert len(paths["a"].read_text().splitlines()) == 300


def test_records_have_v21_docids_windows_and_lengths(tmp_path, vocab):
    path = tmp_path / "segments.jsonl"
    stats = sc.write_collection(path, 2000, 0, vocab)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    by_doc = defaultdict(list)
    for r in records:
        assert set(r) == {"id", "contents", "docid", "url", "title", "headings", "segment", "start_char", "end_char"}
        match = sc.DOCID.match(r["docid"])
        assert match, r["docid"]
        assert 0 <= int(match[1]) < sc.FILES and int(match[4]) == r["start_char"]
        assert r["id"] == r["docid"] and r["segment"] in r["contents"] and r["title"] in r["contents"]
        assert len(r["segment"]) == r["end_char"] - r["start_char"]
        by_doc[r["docid"].split("#")[0]].append(r)
    assert len({r["docid"] for r in records}) == len(records)
    assert len(by_doc) == stats["documents"] > 20
    assert {d.split("_")[3] for d in by_doc} >= {"00", "01", "02"}  # documents spread over the files
    multi = [segs for segs in by_doc.values() if len(segs) > 2]
    assert multi, "documents of several segments"
    for segs in multi:
        assert [int(sc.DOCID.match(s["docid"])[3]) for s in segs] == list(range(len(segs)))
        for a, b in zip(segs, segs[1:]):  # windows of 10 sentences, stride 5: each overlaps the next
            assert a["start_char"] < b["start_char"] < a["end_char"] < b["end_char"]
            overlap = a["segment"][b["start_char"] - a["start_char"] :]
            assert b["segment"].startswith(overlap) and overlap.count(".") == 5
    assert 1200 <= stats["mean_chars"] <= 1900 < stats["p99_chars"]
    words = re.findall(r"[a-z]+", " ".join(r["segment"].lower() for r in records))
    counts = sorted(np.unique(words, return_counts=True)[1], reverse=True)
    assert counts[0] > 20 * counts[100] and counts[-1] == 1  # Zipfian: a few very common words, a long tail


def test_queries_are_the_trec_rag_2024_topics(shared_data):
    queries = sc.load_queries(shared_data)
    assert len(queries) == 301 and queries[0] == "what is vicarious trauma and how can it be coped with?"


def test_synthetic_vectors_are_unit_mixtures_of_real_ones(tmp_path):
    real = np.random.default_rng(0).normal(size=(50, 384)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    out = sm.synthetic_vectors(real, tmp_path / "v.npy", 1000, seed=1, chunk=300)
    assert out.shape == (1000, 384) and np.allclose(np.linalg.norm(out, axis=1), 1, atol=1e-5)
    assert (out @ real.T).max(axis=1).min() > 0.7  # each near a real vector, none a copy of one
    assert not np.isin(out, real).all(axis=1).any()


def test_goals_compute_ratios_with_pass_and_fail():
    sizes = {
        "10000": {
            "bm25_p50_ms": 10.0,
            "dense_p50_ms": 5.0,
            "rag_offline_p50_ms": 100.0,
            "index_segments_per_s": 950,
            "pyserini_segments_per_s": 1000,
            "build_peak_rss_mb": 800,
            "dense_recall_at_100": 1.0,
        },
        "100000": {
            "bm25_p50_ms": 25.0,
            "dense_p50_ms": 6.0,
            "rag_offline_p50_ms": 150.0,
            "index_segments_per_s": 800,
            "pyserini_segments_per_s": 1000,
            "build_peak_rss_mb": 900,
            "dense_recall_at_100": 0.9,
        },
    }
    ratios, checks = sm.goals(sizes)
    verdict = {goal: passed for goal, _, _, passed in checks}
    assert ratios["bm25_p50_100k_over_10k"] == 2.5 and not verdict["bm25_p50_100k_over_10k"]
    assert ratios["dense_p50_100k_over_10k"] == 1.2 and verdict["dense_p50_100k_over_10k"]
    assert verdict["rag_offline_p50_100k_over_10k"] and "bm25_p50_1m_over_10k" not in ratios
    assert verdict["index_over_pyserini_10000"] and not verdict["index_over_pyserini_100000"]
    assert verdict["dense_recall_at_100 at 10000"] and not verdict["dense_recall_at_100 at 100000"]
    assert verdict["build_peak_rss_100000_over_10000"]


def _bench(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "unused"}
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scale.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_too_little_disk_is_one_clear_error(tmp_path):
    out = _bench(
        "--sizes", "100000000000", "--json", str(tmp_path / "r.json"), "--work", str(tmp_path / "w"), timeout=120
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("error: not enough free disk") and "GB" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.json").exists()
    assert not (tmp_path / "w").exists()  # the work directory goes too


@pytest.mark.slow
def test_tiny_run_writes_the_json_shape(tmp_path, demo_settings, slowdown):
    data = tmp_path / "data"
    shutil.copytree(demo_settings.demo_index_dir, data / "indexes" / "demo")  # the server needs no demo build
    out = _bench(
        "--sizes",
        "300",
        "--json",
        str(tmp_path / "r.json"),
        "--plot",
        str(tmp_path / "r.png"),
        "--work",
        str(tmp_path / "work"),
        "--data-dir",
        str(data),
        "--threads",
        "2",
        "--queries",
        "25",
        "--rag-queries",
        "5",
        timeout=300 * slowdown,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result) >= {"sizes", "shards_identical", "machine", "ratios", "goals"}
    assert result["machine"]["cores"] == os.cpu_count()
    m = result["sizes"]["300"]
    for key in (
        "index_segments_per_s",
        "pyserini_segments_per_s",
        "build_peak_rss_mb",
        "bm25_p50_ms",
        "bm25_p95_ms",
        "rag_offline_p50_ms",
        "service_rss_mb",
    ):
        assert isinstance(m[key], float) and m[key] > 0, key
    assert m["disk_mb"]["lucene"] > 0 and m["disk_mb"]["pyserini"] > 0 and m["vectors"] == "minilm"
    assert m["index_command"].startswith("ragnarok index ")
    assert "index_over_pyserini_300" in result["ratios"]
    assert any(line.startswith(("PASS  ", "FAIL  ")) for line in out.stdout.splitlines())
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert list((tmp_path / "work").iterdir()) == []  # the run's own directory removed without --keep
    from ragnarok.stages.retrieve import dense_build

    if hasattr(dense_build, "write_dense_index"):  # the dense build's interface
        assert m["dense_p50_ms"] > 0 and m["dense_recall_at_100"] >= 0.95 and result["shards_identical"] is True
    else:
        assert "write_dense_index" in m["dense_error"] and result["shards_identical"] is None


def test_same_ranking_allows_reordering_only_within_equal_scores():
    a = [("d1", 0.9), ("d2", 0.5), ("d3", 0.5), ("d4", 0.1)]
    assert sm.same_ranking(a, [("d1", 0.9), ("d3", 0.5), ("d2", 0.5), ("d4", 0.1)])
    assert not sm.same_ranking(a, [("d2", 0.9), ("d1", 0.5), ("d3", 0.5), ("d4", 0.1)])
    assert not sm.same_ranking(a, [("d1", 0.9), ("d2", 0.5), ("d3", 0.5), ("d5", 0.1)])
    assert not sm.same_ranking(a, a[:3])
