"""The proxy judge supports a nugget only where a sentence asserts it: not inside a denial, a
report of what people say or ask, a doubt, a question, a "whether" or "if" clause; not when the answer also
asserts the nugget's negation; a nugget's own negation agrees with a sentence of the same polarity. One test per
class of defect; the sentences are not those of bench/judge_families.py (the rules' dev data)."""

from __future__ import annotations

import pytest

from ragnarok.judge import frames
from ragnarok.judge.proxy import ProxyJudge

QUERY = "extract files from a zip archive"
NUGGETS = [
    "zipfile.ZipFile opens a zip archive",
    "extractall writes every member to a directory",
    "namelist returns the names of the members",
]
TRUE = (
    "zipfile.ZipFile opens a zip archive for reading. Its extractall method writes every member to a "
    "directory you choose. namelist returns the names of the members as a list."
)


@pytest.fixture(scope="module")
def judge() -> ProxyJudge:
    return ProxyJudge()


def labels(judge: ProxyJudge, answer: str, nuggets=NUGGETS, query: str = QUERY) -> list[str | None]:
    return judge.assign(query, answer, nuggets)


def test_the_plain_statements_are_supported(judge):
    assert labels(judge, TRUE) == ["support"] * 3


def test_a_denial_without_not_earns_nothing(judge):
    denied = (
        "It is a myth that zipfile.ZipFile opens a zip archive. The notion that extractall writes every "
        "member to a directory is false. It would be wrong to say that namelist returns the names of the "
        "members."
    )
    assert labels(judge, denied) == ["not_support"] * 3


@pytest.mark.parametrize(
    "answer",
    [
        "Some developers say that zipfile.ZipFile opens a zip archive, and many ask whether extractall writes "
        "every member to a directory.",  # a report of what people say and ask
        "It is unclear if zipfile.ZipFile opens a zip archive; whether extractall writes every member to a "
        "directory is a matter of debate.",  # doubt, a "whether" clause
        "Does zipfile.ZipFile open a zip archive? Does extractall write every member to a directory?",  # questions
        "It has been suggested that zipfile.ZipFile opens a zip archive. extractall may or may not write every member "
        "to a directory.",  # hearsay, a hedge that asserts nothing
        "If zipfile.ZipFile opens a zip archive, the manual would mention it. If extractall writes every member "
        "to a directory, that would be handy.",  # conditionals
    ],
)
def test_a_sentence_that_asserts_nothing_earns_nothing(judge, answer):
    assert labels(judge, answer, NUGGETS[:2]) == ["not_support"] * 2


def test_a_statement_and_its_own_negation_support_neither(judge):
    both = (
        TRUE + " Then again, it is not true that zipfile.ZipFile opens a zip archive. Actually, extractall "
        "does not write every member to a directory."
    )
    assert labels(judge, both) == ["not_support", "not_support", "support"]


def test_a_negated_nugget_is_supported_by_the_same_polarity_only():
    judge = ProxyJudge()
    query, nugget = "read an environment variable", ["os.environ.get returns None if the variable doesn't exist"]
    said = "Use os.environ.get(name), which returns the value, and it returns None if the variable doesn't exist."
    assert judge.assign(query, said, nugget) == ["support"]
    assert judge.assign(query, "It is not true that " + said[0].lower() + said[1:], nugget) == ["not_support"]
    # a nugget with "not" against a sentence whose subject clause is positive
    assert judge.assign(
        "sort a list in place",
        "list.sort() reorders the items in place and does not return the list.",
        ["list.sort does not return the list"],
    ) == ["support"]


def test_a_paraphrase_in_other_words_is_supported(judge):
    paraphrase = (
        "Create a zipfile.ZipFile object for the archive. Its extractall method unpacks all entries into a "
        "folder of your choice. Its namelist method gives back a list with the file name of each entry."
    )
    assert labels(judge, paraphrase) == ["support"] * 3


EXTRACTALL = (
    "zipfile.ZipFile.extractall (zipfile) zipfile.ZipFile.extractall: Extract all members from the "
    "archive to the current working directory or to a directory you choose."
)


@pytest.mark.parametrize(
    ("kind", "sentence"),
    [
        ("question", "Does extractall write every member of the archive to a directory?"),
        ("report", "Allegedly, extractall writes every member of the archive to a directory."),
        ("report", "It is often said that extractall writes every member of the archive to a directory."),
        ("question", "Whether extractall writes every member of the archive to a directory depends on your needs."),
        ("report", "extractall may or may not write every member of the archive to a directory."),
        ("pointer", "How extractall writes every member of the archive to a directory is explained in [1]."),
        ("denial", "It is a myth that extractall writes every member of the archive to a directory."),
        ("denial", "The claim that extractall writes every member of the archive to a directory is false."),
    ],
)
def test_one_set_of_frames_for_nuggets_and_citations(judge, kind, sentence):
    # ragnarok.judge.frames: a frame either path knew (a report, a pointer, a denial's wording) holds for both
    assert frames.kind(sentence) == kind
    assert labels(judge, sentence, NUGGETS[1:2]) == ["not_support"]
    assert judge.support(sentence, EXTRACTALL) == "no_support"
