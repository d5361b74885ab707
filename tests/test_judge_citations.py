"""Citation support's classes of error found on judge-dev (v5): a docstring segment is read at its
description, not at its name; a name spelled with or without a hyphen is the same name; a sentence that puts
the segment's words on a function the segment never names is not supported. The segments and sentences are
not judge-dev's."""

from __future__ import annotations

import pytest

from ragnarok.judge.proxy import ProxyJudge

UNIFORM = (
    "random.uniform (random) random.uniform: Get a random number in the range [a, b) or [a, b] "
    "depending on rounding, as a float."
)
DIGEST = "hashlib.sha512 (hashlib) hashlib.sha512: Returns a sha512 hash object; optionally initialized with data."
DUMPS = "json.dumps (json) json.dumps: Serialize obj to a JSON formatted str."


@pytest.fixture(scope="module")
def judge() -> ProxyJudge:
    return ProxyJudge()


def test_a_docstring_is_read_at_its_description(judge):
    # "name (module) name: description": the value and antonym checks look where the words of the claim are
    assert (
        judge.support("random.uniform(a, b) returns a random float in the range from a to b.", UNIFORM)
        == "full_support"
    )
    assert (
        judge.support("random.uniform(a, b) returns a random integer in the range from a to b.", UNIFORM)
        == "no_support"
    )


def test_a_hyphenated_name_is_the_joined_one(judge):
    assert (
        judge.support("hashlib.sha512() returns a SHA-512 hash object, optionally initialized with data.", DIGEST)
        == "full_support"
    )


def test_a_function_the_segment_never_names_is_not_supported(judge):
    assert judge.support("json.dumps(obj) serializes obj to a JSON formatted str.", DUMPS) == "full_support"
    assert (
        judge.support("Call encode_text(obj) from json, which serializes obj to a JSON formatted str.", DUMPS)
        == "no_support"
    )
    # its example arguments are no names of its own
    assert (
        judge.support("Call json.dumps(payload), which serializes it to a JSON formatted str.", DUMPS) == "full_support"
    )
