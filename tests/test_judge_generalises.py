"""The proxy judge's nugget labels as general behaviour: a label depends only on the sentences that could
state the nugget (an unrelated true sentence changes nothing), a sentence that names a nugget's things without
its value does not state it, and a negated adjective ("not valid") is that adjective's opposite ("invalid"),
not a denial. The sentences are not judge-dev's."""

from __future__ import annotations

import pytest

from ragnarok.judge import textrules
from ragnarok.judge.proxy import ProxyJudge


@pytest.fixture(scope="module")
def judge() -> ProxyJudge:
    return ProxyJudge()


@pytest.mark.parametrize(
    ("query", "nuggets", "answer", "extra"),
    [
        (
            "How do I write a lambda expression in Python?",
            ["a lambda expression creates an anonymous function", "the syntax is lambda parameters: expression"],
            "A lambda expression creates an anonymous function. The syntax is lambda parameters: expression.",
            "Functions created with lambda expressions cannot contain statements or annotations.",
        ),
        (
            "How do I sort a list in Python?",
            ["sorted returns a new sorted list"],
            "sorted returns a new sorted list and leaves the original alone.",
            "A list sorted in place with list.sort cannot be restored to its old order.",
        ),
    ],
    ids=["lambda", "sorted"],
)
def test_an_unrelated_true_sentence_flips_no_label(judge, query, nuggets, answer, extra):
    alone = judge.assign(query, answer, nuggets)
    assert alone == ["support"] * len(nuggets)
    assert judge.assign(query, answer + " " + extra, nuggets) == alone
    assert judge.assign(query, extra + " " + answer, nuggets) == alone


def test_a_real_denial_still_takes_the_nugget_back(judge):
    query, nuggets = (
        "How do I write a lambda expression in Python?",
        ["a lambda expression creates an anonymous function"],
    )
    both = (
        "A lambda expression creates an anonymous function. A lambda expression does not create an anonymous function."
    )
    assert judge.assign(query, both, nuggets) == ["not_support"]


@pytest.mark.parametrize(
    ("query", "nugget", "names_only", "stated"),
    [
        (
            "How do I read an environment variable in Python?",
            "os.getenv returns None if the variable does not exist",
            "os.getenv(key, default) reads the variable key and takes a default as its second argument.",
            "os.getenv returns None if the variable does not exist.",
        ),
        (
            "How do I look up a key in a dictionary safely?",
            "dict.get returns None for a missing key",
            "dict.get takes the key and an optional second argument for a missing key.",
            "dict.get returns None for a missing key unless a default is given.",
        ),
    ],
    ids=["getenv", "dict-get"],
)
def test_naming_the_things_without_the_value_is_no_support(judge, query, nugget, names_only, stated):
    assert judge.assign(query, names_only, [nugget]) == ["not_support"]
    assert judge.assign(query, stated, [nugget]) == ["support"]


def test_a_negated_adjective_is_no_denial(judge):
    query = "How do I parse TOML in Python?"
    nugget = ["invalid TOML raises tomllib.TOMLDecodeError"]
    assert judge.assign(query, "A document that is not valid TOML raises tomllib.TOMLDecodeError.", nugget) == [
        "support"
    ]
    assert judge.assign(query, "Invalid TOML does not raise tomllib.TOMLDecodeError.", nugget) == ["not_support"]
    assert textrules.fold_negated("a file that is not valid", "an invalid file") == "a file that is invalid"
    assert textrules.fold_negated("it is not valid", "it is wrong") == "it is not valid"  # no prefixed form there


def test_another_topics_answer_lowers_no_label(judge):
    # the demo's reference answers (topics/eval/, not judge-dev): another topic's whole answer added before or
    # after an answer may state a nugget too (so raise a label), never take one away
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "topics" / "eval"
    lines = (root / "demo.references.jsonl").read_text().splitlines()
    answers = {r["qid"]: r for r in (json.loads(line) for line in lines if line.strip())}
    topics = [json.loads(line) for line in (root / "demo.nuggets.jsonl").read_text().splitlines() if line.strip()]
    order = {"not_support": 0, "partial_support": 1, "support": 2}
    for k, topic in enumerate(topics[:8]):
        nuggets = [n["text"] for n in topic["nuggets"]]
        answer = answers[topic["qid"]]["answer"]
        alone = judge.assign(topic["query"], answer, nuggets)
        for other in topics[k + 9 : k + 12]:
            extra = answers[other["qid"]]["answer"]
            for text in (answer + " " + extra, extra + " " + answer):
                got = judge.assign(topic["query"], text, nuggets)
                assert all(order[b] >= order[a] for a, b in zip(alone, got)), (topic["qid"], other["qid"])
