"""Evaluation against hand-computed values, MaxP, and run files."""

import math

import pytest

from ragnarok.evaluate import evaluate, maxp, needs_maxp, read_qrels
from ragnarok.trec import RunFormatError, read_run, write_run

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 1}}


def test_hand_computed_ap_and_ndcg():
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d4": 1.0, "d3": 0.5}}
    # relevant at ranks 2 and 4: AP = (1/2 + 2/4) / 2 = 0.5
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    scores = evaluate(QRELS, run)
    assert scores["MAP"] == pytest.approx(0.5)
    assert scores["nDCG@10"] == pytest.approx(ndcg)
    assert scores["Recall@100"] == pytest.approx(1.0)


def test_maxp_scores_documents_by_their_best_segment():
    run = {"q1": {"d1#0_0": 1.0, "d1#1_50": 3.0, "d2#0_0": 2.0}}
    assert maxp(run) == {"q1": {"d1": 3.0, "d2": 2.0}}
    assert needs_maxp(QRELS, run) and not needs_maxp({"q1": {"d1#0_0": 1}}, run)
    assert evaluate(QRELS, run)["MAP"] == pytest.approx(0.5)  # d1 first (relevant), d3 never retrieved
    assert evaluate(QRELS, run, maxp_=False)["MAP"] == 0.0


def test_real_qrels_against_themselves(shared_data):
    qrels = read_qrels(shared_data / "trec-rag" / "qrels.rag24.test.txt")
    assert len(qrels) > 80
    qrels = {q: docs for q, docs in qrels.items() if max(docs.values()) > 0}  # topics with something relevant
    run = {q: {d: float(g) for d, g in docs.items()} for q, docs in qrels.items()}
    assert evaluate(qrels, run)["nDCG@10"] == pytest.approx(1.0)


def test_run_round_trip_and_errors(tmp_path):
    write_run(tmp_path / "r.txt", {"q1": [("b", 1.0), ("a", 1.0), ("c", 2.0)]}, "myrun")
    assert (tmp_path / "r.txt").read_text().splitlines()[0] == "q1 Q0 c 1 2.000000 myrun"
    assert (tmp_path / "r.txt").read_text().splitlines()[1].split()[2] == "a"  # ties by docid
    assert read_run(tmp_path / "r.txt") == {"q1": {"c": 2.0, "a": 1.0, "b": 1.0}}
    (tmp_path / "bad.txt").write_text("q1 Q0 a 1 1.0 r\nq1 Q0 b 2\n")
    with pytest.raises(RunFormatError, match="bad.txt:2"):
        read_run(tmp_path / "bad.txt")
    with pytest.raises(ValueError, match="run id"):
        write_run(tmp_path / "x.txt", {}, "two words")
