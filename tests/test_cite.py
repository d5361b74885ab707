"""Golden tests of the post-processor on hand-written model outputs."""

import pytest

from ragnarok.generate.cite import postprocess
from ragnarok.types import CitedSentence as S

DOCS = [f"d{i}" for i in range(1, 31)]  # context [i] is segment d{i}


def run(text, **kw):
    refs, answer = postprocess(text, DOCS, **kw)
    return refs, [(s.text, s.citations) for s in answer]


def test_every_marker_form():
    refs, answer = run("Alpha is first [1]. Beta follows [2, 3]. Gamma ranges [4-6]. Delta stacks [7][8]. "
                       "Epsilon names [Doc 9]. Zeta is wide 【10】. Eta uses an en dash [11–12].")
    assert refs == ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12"]
    assert answer == [
        ("Alpha is first.", [0]), ("Beta follows.", [1, 2]), ("Gamma ranges.", [3, 4, 5]),
        ("Delta stacks.", [6, 7]), ("Epsilon names.", [8]), ("Zeta is wide.", [9]),
        ("Eta uses an en dash.", [10, 11]),
    ]


def test_renumbering_out_of_range_and_duplicates():
    refs, answer = run("First cites five [5]. Then two and five again [2][5][5]. Nonsense [0] and [99].")
    assert refs == ["d5", "d2"]
    assert answer == [("First cites five.", [0]), ("Then two and five again.", [1, 0]),
                      ("Nonsense and.", [])]


def test_marker_opening_a_sentence_belongs_to_the_previous_one():
    refs, answer = run("Argparse parses options. [3] It also prints help. [4]")
    assert answer == [("Argparse parses options.", [0]), ("It also prints help.", [1])]
    assert refs == ["d3", "d4"]


def test_think_blocks_markdown_and_a_references_section():
    text = ("<think>The user wants gzip. Maybe [7].</think>\n## Answer\n**Gzip** compresses files [1].\n"
            "- It wraps zlib [2].\n\n### References\n[1] gzip docs\n[2] zlib docs")
    refs, answer = run(text)
    assert answer == [("Gzip compresses files.", [0]), ("It wraps zlib.", [1])]
    assert refs == ["d1", "d2"]


@pytest.mark.parametrize("heading", ["References:", "**Sources**", "Sources", "## Bibliography", "Citations:"])
def test_reference_section_headings(heading):
    _, answer = run(f"One fact [1].\n{heading}\n[1] Something, 2020.")
    assert answer == [("One fact.", [0])]


def test_long_answers_are_cut_at_a_sentence_boundary():
    sentence = "Word " + " ".join(["word"] * 38) + " end [1]."  # 40 words
    refs, answer = run(" ".join([sentence] * 12))  # 480 words
    assert len(answer) == 10 and sum(len(t.split()) for t, _ in answer) == 400
    _, single = run(" ".join(["long"] * 450) + ".", max_words=400)
    assert len(single) == 1 and len(single[0][0].split()) == 400


def test_answer_citing_nothing():
    refs, answer = run("I do not know the answer to that.")
    assert refs == [] and answer == [("I do not know the answer to that.", [])]
    assert postprocess("", DOCS) == ([], [])


def test_at_most_twenty_references():
    text = " ".join(f"Fact {i} [{i}]." for i in range(1, 26))
    refs, answer = run(text)
    assert refs == DOCS[:20]
    assert answer[19] == ("Fact 20.", [19]) and answer[20] == ("Fact 21.", [])


def test_brackets_that_are_not_citations_are_kept():
    _, answer = run("Lists look like [a, b] in Python [1].")
    assert answer == [("Lists look like [a, b] in Python.", [0])]
    assert S  # the result type is CitedSentence
