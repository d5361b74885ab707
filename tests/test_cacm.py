"""Anserini's CACM regression through our own CLI: index (HtmlCollection), search, eval."""

import re
import subprocess
import sys

import pytest
from test_rocchio_search import DEPTHS, rocchio_searcher, same_as_anserini

from ragnarok.api import measure
from ragnarok.core.evaluation import evaluate, read_qrels
from ragnarok.core.topics import read_topics
from ragnarok.core.trec import read_run


def ragnarok(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def cacm_runs(cacm_dir, shared_data, tmp_path_factory):
    work = tmp_path_factory.mktemp("cacm-runs")
    ragnarok("index", str(cacm_dir), str(work / "index"), "--collection", "HtmlCollection")
    topics = str(shared_data / "cacm" / "topics.cacm.txt")
    for retriever, name in [("bm25", "bm25"), ("bm25+rm3", "rm3")]:
        ragnarok(
            "search",
            "--topics",
            topics,
            "--index",
            str(work / "index"),
            "--retriever",
            retriever,
            "--k",
            "1000",
            "--output",
            str(work / f"{name}.txt"),
            "--run-id",
            name,
        )
    return work


def test_bm25_and_rm3_reproduce_anserini(cacm_runs, shared_data):
    qrels = shared_data / "cacm" / "qrels.cacm.txt"
    table = ragnarok("eval", str(qrels), str(cacm_runs / "bm25.txt"), str(cacm_runs / "rm3.txt"))
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:]}
    assert table.splitlines()[0].split() == ["run", "nDCG@10", "MAP@100", "Recall@100", "MAP"]
    assert rows["bm25.txt"][3] == "0.3123"  # Anserini regression: BM25 MAP
    assert rows["rm3.txt"][3] == "0.3648"  # Anserini regression: BM25+RM3 MAP
    assert rows["bm25.txt"][0] == "0.4543"  # nDCG@10, as shared/data/cacm/README.md reports
    scores = evaluate(read_qrels(qrels), read_run(cacm_runs / "bm25.txt"))
    assert scores["MAP"] == pytest.approx(0.3123, abs=5e-5)


def test_rocchio_search_gives_anserinis_rocchio_hits(cacm_runs, shared_data):
    """The cheaper Rocchio search (ragnarok/stages/retrieve/anserini.py) on all 64 CACM topics: Anserini's own
    hits and float scores at every depth."""
    topics = read_topics(shared_data / "cacm" / "topics.cacm.txt")
    assert len(topics) == 64
    searcher = rocchio_searcher(str(cacm_runs / "index"))
    assert same_as_anserini(searcher, [t.text for t in topics]) == 64 * len(DEPTHS)


def test_run_file_is_valid_trec(cacm_runs):
    lines = (cacm_runs / "bm25.txt").read_text().splitlines()
    assert all(re.fullmatch(r"\S+ Q0 CACM-\d{4} \d+ -?\d+\.\d{6} bm25", line) for line in lines)
    first = [line.split() for line in lines if line.split()[0] == lines[0].split()[0]]
    assert [int(f[3]) for f in first] == list(range(1, len(first) + 1))
    assert len(first) <= 1000


def test_an_experiment_on_cacm_equals_search_and_eval(cacm_runs, shared_data):
    """ragnarok.Experiment of the two pipelines on CACM: Anserini's regression MAPs, the per-topic figures of the
    CLI's run files, and a paired test."""

    from ragnarok.core.evaluation import per_query

    topics, qrels = shared_data / "cacm" / "topics.cacm.txt", shared_data / "cacm" / "qrels.cacm.txt"
    measured = measure(
        ["bm25@1000", "bm25+rm3@1000"],
        str(topics),
        qrels=str(qrels),
        index=str(cacm_runs / "index"),
        baseline=0,
        test="wilcoxon",
    )
    frame = measured.means()
    assert [round(v, 4) for v in frame["MAP"]] == [0.3123, 0.3648]
    assert frame.loc[1, "MAP p-value"] < 0.05 and frame.loc[1, "MAP +"] > frame.loc[1, "MAP -"]
    judged = read_qrels(qrels)
    for scores, name in zip(measured.scores, ("bm25", "rm3")):
        expected = per_query(judged, read_run(cacm_runs / f"{name}.txt"))
        assert scores["MAP"] == pytest.approx({q: expected.get(q, {}).get("MAP", 0.0) for q in scores["MAP"]}, abs=1e-4)
