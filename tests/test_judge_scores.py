"""Deterministic parts of the judges, against hand-computed values and the libraries' own output."""

from __future__ import annotations

import json
import math

import pytest

from ragnarok.judge.nuggets import Nugget, TopicNuggets, nugget_scores, read_nuggets, write_nuggets
from ragnarok.judge.parse import parse_grade, parse_labels, parse_list, parse_verdict
from ragnarok.judge.stats import bootstrap, paired_test
from ragnarok.judge.support import support_scores


def n(importance: str, assignment: str) -> dict[str, str]:
    return {"text": "x", "importance": importance, "assignment": assignment}


def test_four_nugget_scores_as_nuggetizer_defines_them():
    # 3 vital (support, partial, not) and 2 okay (support, partial)
    nuggets = [
        n("vital", "support"),
        n("vital", "partial_support"),
        n("vital", "not_support"),
        n("okay", "support"),
        n("okay", "partial_support"),
    ]
    assert nugget_scores(nuggets) == {"strict_vital": 1 / 3, "vital": 1.5 / 3, "strict_all": 2 / 5, "all": 3 / 5}
    # no vital nugget: the vital scores are 0 (nuggetizer: "if vital_nuggets else 0.0")
    assert nugget_scores([n("okay", "support")]) == {"strict_vital": 0.0, "vital": 0.0, "strict_all": 1.0, "all": 1.0}
    assert nugget_scores([]) == dict.fromkeys(("strict_vital", "vital", "strict_all", "all"), 0.0)
    models = [Nugget(text="a", importance="vital", assignment="partial_support")]
    assert nugget_scores(models) == {"strict_vital": 0.0, "vital": 0.5, "strict_all": 0.0, "all": 0.5}


def test_nugget_files_flow_both_ways_with_nuggetizer(tmp_path):
    path = tmp_path / "n.jsonl"
    lines = [  # nuggetizer create output, create input's query shape, and assign output
        {
            "query": "What is Python?",
            "qid": "q1",
            "nuggets": [{"text": "a language", "importance": "vital"}, {"text": "by Guido", "importance": "okay"}],
        },
        {"query": {"qid": "q2", "text": "gzip"}, "nuggets": [{"text": "compresses", "importance": "Vital"}]},
        {
            "query": "q",
            "qid": 3,
            "answer_text": "t",
            "run_id": "r",
            "nuggets": [{"text": "x", "importance": "okay", "assignment": "partial_support"}],
        },
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    topics = read_nuggets(path)
    assert topics["q2"].query == "gzip" and topics["q2"].nuggets[0].importance == "vital"
    assert topics["3"].nuggets[0].assignment == "partial_support"
    out = tmp_path / "out.jsonl"
    write_nuggets(out, [topics["q1"]])
    assert json.loads(out.read_text()) == lines[0] | {"qid": "q1"}  # exactly nuggetizer's create output


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"qid": "q", "nuggets": [{"text": "a", "importance": "huge"}]}', "importance"),
        ('{"nuggets": []}', "no qid"),
        ("not json", "not JSON"),
    ],
)
def test_bad_nugget_files_name_the_line(tmp_path, line, message):
    path = tmp_path / "n.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=message) as info:
        read_nuggets(path)
    assert ":1:" in str(info.value)


def test_support_precision_and_recall_by_hand():
    labels = [
        ["full_support", "no_support"],  # sentence 1: best 1
        ["partial_support"],  # sentence 2: best 0.5
        [],
    ]  # sentence 3 cites nothing: 0
    scores = support_scores(labels)
    assert scores["support_precision"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert scores["support_recall"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert support_scores([[None, "full_support"]]) == {"support_precision": 0.5, "support_recall": 1.0}
    assert support_scores([[]]) == {"support_precision": 0.0, "support_recall": 0.0}
    assert support_scores([]) == {"support_precision": 0.0, "support_recall": 0.0}


def test_bootstrap_interval():
    one = bootstrap([0.25])
    assert (one.mean, one.low, one.high, one.n) == (0.25, 0.25, 0.25, 1)
    values = [0.0, 1.0] * 50
    interval = bootstrap(values, resamples=2000, seed=1)
    assert interval.mean == 0.5
    se = 0.5 / math.sqrt(100)  # a proportion's standard error; the 95 % interval is about +-1.96 se
    assert interval.low == pytest.approx(0.5 - 1.96 * se, abs=0.02)
    assert interval.high == pytest.approx(0.5 + 1.96 * se, abs=0.02)
    assert bootstrap(values, resamples=2000, seed=1) == interval  # seeded: the same interval again
    with pytest.raises(ValueError):
        bootstrap([])


def test_paired_t_test_by_hand():
    a = {"1": 0.5, "2": 0.7, "3": 0.9, "x": 1.0}
    b = {"1": 0.4, "2": 0.4, "3": 0.6, "y": 0.0}
    test = paired_test("a", a, "b", b)
    # differences 0.1, 0.3, 0.3: mean 0.7/3, sd sqrt(((-2/15)^2 + 2 (1/15)^2) / 2) = sqrt(3)/15
    mean = 0.7 / 3
    t = mean / ((math.sqrt(3) / 15) / math.sqrt(3))
    assert test.n == 3 and test.mean_difference == pytest.approx(mean)
    assert test.t == pytest.approx(t)  # = 3.5
    assert test.p_value == pytest.approx(0.07282, abs=1e-4)  # two-sided, t = 3.5 with 2 degrees of freedom
    same = paired_test("a", a, "a", a)
    assert (same.t, same.p_value) == (0.0, 1.0)
    with pytest.raises(ValueError, match="at least 2 topics"):
        paired_test("a", {"1": 1.0}, "b", {"1": 0.0})


@pytest.mark.parametrize(
    "text, labels",
    [
        ('["support", "not_support"]', ["support", "not_support"]),
        ("Labels: ['Support', 'partial support']\nThese are my labels.", ["support", "partial_support"]),
        ('```python\n["support","not_support"]\n```', ["support", "not_support"]),
        ('["support", "not_support", "support"]', None),  # wrong count
        ('["support", "maybe"]', None),  # unknown label
        ("1. support\n2. Not support", ["support", "not_support"]),  # no list: exactly 2 labels written out
        ("support", None),  # no list and too few labels
        ("support or not_support or partial_support", None),  # 3 labels written out for 2 nuggets: refused
        ("The first nugget is supported and the second is not", None),
        ("", None),
    ],
)
def test_labels_are_read_or_refused_never_guessed(text, labels):
    assert parse_labels(text, ("support", "partial_support", "not_support"), 2) == labels


def test_other_parsers():
    assert parse_list('Updated Nugget List: ["a b", "c"]') == ["a b", "c"]
    assert parse_list('["a", "b"') is None  # an unclosed list is not a list
    assert parse_list("['it is', \"stray ' quote\"]") is not None
    assert parse_grade("##final score: 2", 0, 3) == 2
    assert parse_grade("M: 2, T: 1, ##final score: 3", 0, 3) == 3
    assert parse_grade("##final score: 7", 0, 3) is None
    assert parse_grade("I think 1 or 2", 0, 3) is None
    assert parse_grade("2", 0, 3) == 2
    assert parse_verdict("[[A]]") == "A" and parse_verdict("[[B]] is better") == "B"
    assert parse_verdict("[[tie]]") == "tie" and parse_verdict("b.") == "B"
    assert parse_verdict("[[A]] or [[B]]") is None and parse_verdict("a better answer") is None


def test_reference_metrics_equal_the_libraries():
    import sacrebleu
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    from ragnarok.judge.reference import _NoSynonyms, reference_scores, token_f1

    pred, ref = "The cat sat on the mat.", "A cat was sitting on the mat."
    got = reference_scores(pred, [ref], semscore=False)
    assert got["rouge_l"] == rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, pred)["rougeL"].fmeasure
    assert got["bleu"] == sacrebleu.sentence_bleu(pred, [ref]).score / 100
    assert got["chrf"] == sacrebleu.sentence_chrf(pred, [ref]).score / 100

    def words(s: str) -> list[str]:
        return s.lower().replace(".", " .").split()

    assert got["meteor"] == pytest.approx(meteor_score([words(ref)], words(pred), wordnet=_NoSynonyms()))
    # SQuAD token F1 by hand: pred {cat sat on mat} vs ref {cat was sitting on mat}: 3 common -> 2PR/(P+R)
    p, r = 3 / 4, 3 / 5
    assert got["token_f1"] == pytest.approx(2 * p * r / (p + r)) == token_f1(pred, ref)
    assert reference_scores(ref, [ref], semscore=False)["rouge_l"] == 1.0
    with pytest.raises(ValueError):
        reference_scores(pred, [" "])


def test_topic_nuggets_model_roundtrip():
    topic = TopicNuggets(qid="1", query="q", nuggets=[Nugget(text="a", importance="vital")])
    assert topic.model_dump()["nuggets"][0]["assignment"] is None
