"""bench/judge_cv.py's protocol: the fixed split of judge-dev's topics, the rule families it switches (and that
switching one off and back changes the labels and restores them), and the choice made on training topics."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import judge_cv  # noqa: E402

from ragnarok.judge import entail  # noqa: E402
from ragnarok.judge.proxy import ProxyJudge, cosines  # noqa: E402

QUERY = "How do I write a lambda expression in Python?"
NUGGET = "a lambda expression creates an anonymous function"
NEGATED = "A lambda expression does not create an anonymous function."


def test_the_split_is_four_folds_of_four_fixed_topics():
    assert judge_cv.FOLDS[0] == ("demo-01", "demo-05", "demo-09", "demo-13")
    assert judge_cv.FOLDS[3] == ("demo-04", "demo-08", "demo-12", "demo-16")
    every = [q for fold in judge_cv.FOLDS for q in fold]
    assert sorted(every) == [f"demo-{n:02d}" for n in range(1, 17)] and len(judge_cv.FOLDS) == 4


def test_a_family_switched_off_and_back():
    assert entail.nugget_levels(QUERY, NEGATED, [NUGGET], cosines) == [0]
    entail.configure(frozenset({"negation", "contradiction"}))
    try:
        assert entail.nugget_levels(QUERY, NEGATED, [NUGGET], cosines) == [2]  # no polarity rule: the words match
    finally:
        entail.configure()
    assert entail.nugget_levels(QUERY, NEGATED, [NUGGET], cosines) == [0]
    assert ProxyJudge().assign(QUERY, NEGATED, [NUGGET]) == ["not_support"]
    with pytest.raises(ValueError, match="unknown"):
        entail.configure(frozenset({"no-such-family"}))


def test_a_family_that_pays_on_the_training_topics_is_kept():
    rows = [
        {"qid": "demo-01", "variant": "gold", "query": QUERY, "text": NUGGET.capitalize() + ".",
         "nuggets": [{"text": NUGGET, "importance": "vital", "assignment": "support"}]},
        {"qid": "demo-01", "variant": "negated", "query": QUERY, "text": NEGATED,
         "nuggets": [{"text": NUGGET, "importance": "vital", "assignment": "not_support"}]},
    ]  # fmt: skip
    cv = judge_cv.CrossValidation(rows, [], ("negation", "contradiction", "antonym"))
    chosen = cv.choose({"demo-01"})
    # one pass in order: the polarity veto ties (the denial rule still catches the answer): removed; then the
    # denial rule pays: kept; the antonym rule ties: removed
    assert chosen.off == {"negation", "antonym"}
    assert cv.kappas(chosen, {"demo-01"})[0] == pytest.approx(1.0)
