"""Evaluation against hand-computed values, MaxP, per-topic scores, tables, and TREC run files."""

import io
import math

import pytest

from ragnarok.core.evaluation import (
    DEFAULT_METRICS,
    QrelsFormatError,
    evaluate,
    format_table,
    maxp,
    needs_maxp,
    per_query,
    read_qrels,
)
from ragnarok.core.trec import RunFormatError, format_run_lines, read_run, write_run

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 1}}


def test_default_metrics_and_display_names():
    assert DEFAULT_METRICS == ("nDCG@10", "AP@100", "R@100", "AP")
    assert list(evaluate(QRELS, {"q1": {"d1": 1.0}})) == ["nDCG@10", "MAP@100", "Recall@100", "MAP"]


def test_hand_computed_ap_and_ndcg():
    run = {"q1": {"d2": 3.0, "d1": 2.0, "d4": 1.0, "d3": 0.5}}
    # relevant at ranks 2 and 4: AP = (1/2 + 2/4) / 2 = 0.5
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    ndcg = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    scores = evaluate(QRELS, run)
    assert scores["MAP"] == pytest.approx(0.5) and scores["MAP@100"] == pytest.approx(0.5)
    assert scores["nDCG@10"] == pytest.approx(ndcg)
    assert scores["Recall@100"] == pytest.approx(1.0)


def test_graded_judgments_linear_gain_and_binary_ap():
    qrels = {"q1": {"a": 3, "b": 1, "c": 0}}
    run = {"q1": {"c": 3.0, "b": 2.0, "a": 1.0}}
    # ranks: c (0), b (1), a (3). Linear gains as trec_eval: DCG = 1/log2(3) + 3/log2(4); IDCG = 3 + 1/log2(3)
    ndcg = (1 / math.log2(3) + 3 / 2) / (3 + 1 / math.log2(3))
    scores = evaluate(qrels, run, metrics=("nDCG@10", "AP"))
    assert scores == {"nDCG@10": pytest.approx(ndcg), "MAP": pytest.approx((1 / 2 + 2 / 3) / 2)}


def test_cutoffs_distinguish_map_at_100_from_map():
    run = {"q1": {f"n{i:03d}": 1000.0 - i for i in range(100)} | {"d1": 1.0}}  # d1 at rank 101
    scores = evaluate(QRELS, run)
    assert scores["MAP"] == pytest.approx((1 / 101) / 2)
    assert scores["MAP@100"] == 0.0 and scores["Recall@100"] == 0.0 and scores["nDCG@10"] == 0.0


def test_mean_over_topics_in_both_run_and_qrels():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    run = {"q1": {"d1": 1.0}, "q3": {"x": 1.0, "d3": 0.5}, "q9": {"d9": 1.0}, "q2": {}}
    # q2 has an empty ranking and q9 no judgments: only q1 (AP 1) and q3 (AP 1/2) count, as in trec_eval
    assert evaluate(qrels, run)["MAP"] == pytest.approx(0.75)
    assert per_query(qrels, run, metrics=("AP", "R@100")) == {
        "q1": {"MAP": pytest.approx(1.0), "Recall@100": pytest.approx(1.0)},
        "q3": {"MAP": pytest.approx(0.5), "Recall@100": pytest.approx(1.0)},
    }
    zeros = dict.fromkeys(("nDCG@10", "MAP@100", "Recall@100", "MAP"), 0.0)
    assert evaluate(qrels, {"zz": {"d1": 1.0}}) == zeros


def test_metric_mapping_names_the_columns():
    assert evaluate(QRELS, {"q1": {"d1": 1.0}}, metrics={"P@1": "P@1"}) == {"P@1": pytest.approx(1.0)}


def test_maxp_scores_documents_by_their_best_segment():
    run = {"q1": {"d1#0_0": 1.0, "d1#1_50": 3.0, "d2#0_0": 2.0}}
    assert maxp(run) == {"q1": {"d1": 3.0, "d2": 2.0}}
    assert needs_maxp(QRELS, run)
    assert not needs_maxp({"q1": {"d1#0_0": 1}}, run) and not needs_maxp(QRELS, maxp(run))
    # document run: d1 (relevant) first, d2 second, d3 never retrieved -> AP = (1/1) / 2
    assert evaluate(QRELS, run)["MAP"] == pytest.approx(0.5)
    assert evaluate(QRELS, run, maxp=True) == evaluate(QRELS, maxp(run))
    assert evaluate(QRELS, run, maxp=False)["MAP"] == 0.0  # segment ids match no judged document
    ndcg = 1 / (1 + 1 / math.log2(3))
    assert evaluate(QRELS, run)["nDCG@10"] == pytest.approx(ndcg)
    # the lower-scored d1 segment alone would put d1 below d2
    assert evaluate(QRELS, {"q1": {"d1#0_0": 1.0, "d2#0_0": 2.0}})["MAP"] == pytest.approx(0.25)


def test_real_qrels_against_themselves(shared_data):
    qrels = read_qrels(shared_data / "trec-rag" / "qrels.rag24.test.txt")
    assert len(qrels) == 89 and sum(map(len, qrels.values())) == 20429
    assert {g for docs in qrels.values() for g in docs.values()} == {0, 1, 2, 3}
    run = {q: {d: float(g) for d, g in docs.items()} for q, docs in qrels.items()}
    assert not needs_maxp(qrels, run)
    # the topics with something relevant
    judged = {q: docs for q, docs in qrels.items() if max(docs.values()) > 0}
    assert len(judged) == 86
    scores = evaluate(judged, run)
    assert scores["nDCG@10"] == pytest.approx(1.0) and scores["MAP"] == pytest.approx(1.0)
    # the 3 topics without relevant segments score 0
    assert evaluate(qrels, run)["nDCG@10"] == pytest.approx(86 / 89)


def test_real_qrels_other_iteration_columns(shared_data):
    rag25 = read_qrels(shared_data / "trec-rag" / "qrels.rag25.test.txt")
    assert len(rag25) == 22 and sum(map(len, rag25.values())) == 10284
    cacm = read_qrels(shared_data / "cacm" / "qrels.cacm.txt")
    assert len(cacm) == 52 and cacm["1"]["CACM-1410"] == 1


def test_malformed_qrels_name_the_line(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n\nq1 0 d2\n")
    with pytest.raises(QrelsFormatError, match=r"q.txt:3: .*4 columns, found 3"):
        read_qrels(tmp_path / "q.txt")
    (tmp_path / "g.txt").write_text("q1 0 d1 high\n")
    with pytest.raises(QrelsFormatError, match=r"g.txt:1: grade 'high'"):
        read_qrels(tmp_path / "g.txt")


def test_format_table():
    table = format_table({"bm25.txt": {"nDCG@10": 0.45432, "MAP": 0.3123}, "a-much-longer-run": {"MAP": 0.5}})
    lines = table.splitlines()
    assert lines[0].split() == ["run", "nDCG@10", "MAP"]
    assert lines[1].split() == ["bm25.txt", "0.4543", "0.3123"]
    assert lines[2].split() == ["a-much-longer-run", "-", "0.5000"]
    assert len({len(line) for line in lines}) == 1 and format_table({}) == ""


def test_run_round_trip(tmp_path):
    ranking = {"q1": [("b", 1.0), ("a", 1.0), ("c", 2.0)], "q2": [("x", -0.5)]}
    write_run(tmp_path / "r.txt", ranking, "myrun")
    assert (tmp_path / "r.txt").read_text().splitlines() == [
        "q1 Q0 c 1 2.000000 myrun",
        "q1 Q0 a 2 1.000000 myrun",
        "q1 Q0 b 3 1.000000 myrun",
        "q2 Q0 x 1 -0.500000 myrun",
    ]
    assert read_run(tmp_path / "r.txt") == {"q1": {"c": 2.0, "a": 1.0, "b": 1.0}, "q2": {"x": -0.5}}
    buffer = io.StringIO()
    write_run(buffer, read_run(tmp_path / "r.txt"), "again", depth=2)  # a {docid: score} mapping works too
    assert buffer.getvalue() == ("q1 Q0 c 1 2.000000 again\nq1 Q0 a 2 1.000000 again\nq2 Q0 x 1 -0.500000 again\n")
    assert list(format_run_lines({"q": [("d", 1 / 3)]}, "r")) == ["q Q0 d 1 0.333333 r"]


def test_write_run_rejects_bad_ids(tmp_path):
    for ranking, run_id, message in [
        ({}, "two words", "run id"),
        ({}, "", "run id"),
        ({"q 1": [("d", 1.0)]}, "r", "topic id"),
        ({"q1": [("d\t2", 1.0)]}, "r", "document id"),
        ({"q1": [("d", float("nan"))]}, "r", "not finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            write_run(tmp_path / "x.txt", ranking, run_id)
    assert not (tmp_path / "x.txt").exists()
    with pytest.raises(ValueError, match="depth"):
        write_run(tmp_path / "x.txt", {"q": [("d", 1.0)]}, "r", depth=0)


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("q1 Q0 a 1 1.0 r\nq1 Q0 b 2\n", 2, "6 columns, found 4"),
        ("q1 Q0 a 1 1.0 r\n\nq1 Q0 b 2 high r\n", 3, "score 'high' is not a number"),
        ("q1 Q0 a one 1.0 r\n", 1, "rank 'one' is not an integer"),
        ("q1 Q0 a 1 1.0 r\nq1 Q0 a 2 0.5 r\n", 2, "appears twice"),
        ("q1 Q0 a 1 nan r\n", 1, "not finite"),
    ],
)
def test_malformed_run_lines_name_the_line(tmp_path, content, line, message):
    (tmp_path / "bad.txt").write_text(content)
    with pytest.raises(RunFormatError, match=rf"bad.txt:{line}: .*{message}"):
        read_run(tmp_path / "bad.txt")


def test_unreadable_run(tmp_path):
    with pytest.raises(RunFormatError, match="cannot read run file"):
        read_run(tmp_path / "missing.txt")
