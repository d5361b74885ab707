"""An antonym, or a value replaced by another of its class, earns the proxy judge nothing: a value must be
the one of the clause its content is in (:mod:`ragnarok.judge.slots`). One test per class; the right answer is supported in each.
The sentences are not those of bench/judge_families.py (the rules' dev data)."""

from __future__ import annotations

import pytest

from ragnarok.judge.proxy import ProxyJudge


@pytest.fixture(scope="module")
def judge() -> ProxyJudge:
    return ProxyJudge()


def check(
    judge: ProxyJudge, query: str, nuggets: list[str], right: str, wrong: str, expect: list[str] | None = None
) -> None:
    assert judge.assign(query, right, nuggets) == ["support"] * len(nuggets)
    assert judge.assign(query, wrong, nuggets) == (expect or ["not_support"] * len(nuggets))


def test_every_antonym_of_a_word_counts(judge):
    # "smallest" has two antonyms in the table (largest, biggest); "up" / "down"
    check(
        judge,
        "find the extremes of a list",
        ["min returns the smallest item"],
        "min returns the smallest item.",
        "min returns the largest item.",
    )
    nuggets = ["math.floor rounds down to an integer", "math.ceil rounds up to an integer"]
    check(
        judge,
        "round numbers",
        nuggets,
        "math.floor rounds down to an integer. math.ceil rounds up to an integer.",
        "math.ceil rounds down to an integer. math.floor rounds up to an integer.",
    )


@pytest.mark.parametrize(
    ("query", "nugget", "right", "wrong"),
    [
        (
            "look up a setting",
            "config.get returns None for an unknown option",  # None -> an exception
            "config.get returns None for an unknown option, so check the result.",
            "config.get raises LookupError for an unknown option, so check the result.",
        ),
        (
            "set a cache lifetime",
            "the ttl option is given in seconds",  # a unit -> another of its kind
            "The ttl option is given in seconds and defaults to one hour.",
            "The ttl option is given in milliseconds and defaults to one hour.",
        ),
        (
            "create a new file",
            "open the file with mode 'x' to fail if it exists",  # a quoted literal
            "Open the file with mode 'x' to fail if it exists already.",
            "Open the file with mode 'a' to fail if it exists already.",
        ),
        # raises -> returns in the clause of the nugget's content (the other clause raises ValueError)
        (
            "remove an item from a list",
            "list.remove raises ValueError when the item is absent",
            "list.remove raises ValueError when the item is absent, while discard on a set does nothing.",
            "list.remove returns False when the item is absent, while a set's remove raises ValueError.",
        ),
    ],
)
def test_a_value_replaced_by_another_of_its_class_earns_nothing(judge, query, nugget, right, wrong):
    check(judge, query, [nugget], right, wrong)


def test_a_value_in_the_right_clause_still_counts(judge):
    # the other clause's value belongs to another thing: the sentence still says the nugget
    nugget = ["dict.get returns None when the key is missing"]
    said = "dict.get returns None when the key is missing, while d[key] raises KeyError when the key is missing."
    assert judge.assign("look up a key in a dictionary", said, nugget) == ["support"]
