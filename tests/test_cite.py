"""Golden tests of the post-processor on hand-written model outputs: exact references and sentences."""

import pytest

from ragnarok.core.types import CitedSentence, RagAnswer, word_count
from ragnarok.stages.generate.cite import NO_ANSWER_TEXT, postprocess

DOCS = [f"d{i}" for i in range(1, 31)]  # context [i] in the prompt is segment d{i}


def run(text, **kw):
    refs, answer = postprocess(text, DOCS, **kw)
    assert all(isinstance(s, CitedSentence) for s in answer)
    RagAnswer.build("1", "q", refs, answer)  # every citation indexes into references
    return refs, [(s.text, s.citations) for s in answer]


def test_every_marker_form():
    refs, answer = run(
        "Alpha is first [1]. Beta follows [2, 3]. Gamma ranges [4-6]. Delta stacks [7][8]. "
        "Epsilon names [Doc 9]. Zeta is wide 【10】. Eta uses an en dash [11–12]. "
        "Theta has no space [13,14]. Iota spells it out [Document 15]. "
        "Kappa lists [16, 17 and 18]."
    )
    assert refs == [f"d{i}" for i in range(1, 19)]
    assert answer == [
        ("Alpha is first.", [0]),
        ("Beta follows.", [1, 2]),
        ("Gamma ranges.", [3, 4, 5]),
        ("Delta stacks.", [6, 7]),
        ("Epsilon names.", [8]),
        ("Zeta is wide.", [9]),
        ("Eta uses an en dash.", [10, 11]),
        ("Theta has no space.", [12, 13]),
        ("Iota spells it out.", [14]),
        ("Kappa lists.", [15, 16, 17]),
    ]


def test_markers_are_cut_and_punctuation_tidied():
    refs, answer = run(
        "Gzip is fast [1], and small [2]. It is old ([3]). It is everywhere (see [4]). It wraps zlib [1], [2]."
    )
    assert refs == ["d1", "d2", "d3", "d4"]
    assert answer == [
        ("Gzip is fast, and small.", [0, 1]),
        ("It is old.", [2]),
        ("It is everywhere.", [3]),
        ("It wraps zlib.", [0, 1]),
    ]


def test_renumbering_in_order_of_first_citation():
    refs, answer = run("First cites five [5]. Then two [2].")
    assert refs == ["d5", "d2"]
    assert answer == [("First cites five.", [0]), ("Then two.", [1])]


def test_out_of_range_and_duplicate_citations_are_dropped():
    refs, answer = run("Then two and five [2][5][5, 2]. Nonsense [0] and [31] too [2-1].")
    assert refs == ["d2", "d5"]
    assert answer == [("Then two and five.", [0, 1]), ("Nonsense and too.", [])]


def test_the_same_segment_at_two_positions_is_one_reference():
    refs, answer = postprocess("A [1]. B [2].", ["x", "x"])
    assert refs == ["x"] and [(s.text, s.citations) for s in answer] == [("A.", [0]), ("B.", [0])]


def test_marker_opening_a_sentence_belongs_to_the_previous_one():
    refs, answer = run("Argparse parses options. [3] It also prints help. [4][5] Then it exits. [6]")
    assert refs == ["d3", "d4", "d5", "d6"]
    assert answer == [("Argparse parses options.", [0]), ("It also prints help.", [1, 2]), ("Then it exits.", [3])]


def test_marker_on_its_own_line_goes_to_the_sentence_before():
    refs, answer = run("Gzip compresses files.\n[2]\nIt is old [1].")
    assert refs == ["d2", "d1"]
    assert answer == [("Gzip compresses files.", [0]), ("It is old.", [1])]


def test_a_marker_opening_the_answer_stays_with_its_sentence():
    assert run("[2] reports that gzip is fast.") == (["d2"], [("reports that gzip is fast.", [0])])


@pytest.mark.parametrize(
    "thinking",
    [
        "<think>The user wants gzip. Maybe [7].</think>\n",
        "<THINK>\nplan [7]\n</THINK>",
        "The user wants gzip [7]; the opening tag was in the prompt.</think>\n\n",
    ],
)
def test_thinking_is_removed(thinking):
    assert run(thinking + "Gzip compresses files [1].") == (["d1"], [("Gzip compresses files.", [0])])


def test_unclosed_thinking_leaves_no_answer():
    assert run("<think>I should cite [3] and then") == ([], [])


def test_markdown_noise_goes_but_text_stays():
    text = (
        "## Answer\n**Gzip** compresses *files* [1].\n\n### How it works\n- It wraps zlib [2].\n"
        "* It uses DEFLATE [3]\n1. It is old [4].\n2) It is free [5].\n**Answer:** It is fast [1].\n"
        "# Gzip is everywhere [6].\nThe __init__ method stays [7]."
    )
    refs, answer = run(text)
    assert refs == ["d1", "d2", "d3", "d4", "d5", "d6", "d7"]
    assert answer == [
        ("Gzip compresses files.", [0]),
        ("It wraps zlib.", [1]),
        ("It uses DEFLATE", [2]),
        ("It is old.", [3]),
        ("It is free.", [4]),
        ("It is fast.", [0]),
        ("Gzip is everywhere.", [5]),
        ("The __init__ method stays.", [6]),
    ]


@pytest.mark.parametrize(
    "heading",
    [
        "References:",
        "References",
        "**References**",
        "**References:**",
        "## Sources",
        "Sources",
        "### Bibliography",
        "Citations:",
        "Works cited:",
    ],
)
def test_reference_section_headings(heading):
    text = f"One fact [1]. Another [2].\n\n{heading}\n[1] Something, 2020.\n[2] Else.\nTrailing text [3]."
    assert run(text) == (["d1", "d2"], [("One fact.", [0]), ("Another.", [1])])


def test_reference_lines_without_a_heading():
    assert run("One fact [1]. Another [2].\n\nSources: [1] gzip docs, [2] zlib docs") == (
        ["d1", "d2"],
        [("One fact.", [0]), ("Another.", [1])],
    )
    assert run("One fact [1]. Another [2].\n\n[1] gzip docs\n[2] zlib docs") == (
        ["d1", "d2"],
        [("One fact.", [0]), ("Another.", [1])],
    )


def test_long_answers_are_cut_at_a_sentence_boundary():
    sentence = "Word " + " ".join(["word"] * 38) + " end [{}]."  # 40 words
    refs, answer = run(" ".join(sentence.format(i) for i in range(1, 13)))  # 480 words
    assert refs == [f"d{i}" for i in range(1, 11)]  # the cut sentences' citations are gone too
    assert len(answer) == 10 and sum(word_count(t) for t, _ in answer) == 400
    assert answer[-1] == ("Word " + " ".join(["word"] * 38) + " end.", [9])
    refs, answer = run(" ".join(sentence.format(1) for _ in range(3)), max_words=119)
    assert len(answer) == 2  # 80 words; a third sentence would make 120


def test_a_first_sentence_longer_than_the_budget_is_cut_at_a_word_boundary():
    refs, answer = run(" ".join(["long"] * 450) + " [1].", max_words=400)
    assert refs == ["d1"] and answer == [(" ".join(["long"] * 400), [0])]


def test_answer_citing_nothing():
    assert run("I do not know the answer to that.") == ([], [("I do not know the answer to that.", [])])
    assert run(NO_ANSWER_TEXT) == ([], [(NO_ANSWER_TEXT, [])])
    assert run("") == ([], [])


def test_at_most_twenty_references():
    refs, answer = run(" ".join(f"Fact {i} [{i}, 1]." for i in range(1, 26)))
    assert refs == DOCS[:20]
    assert answer[19] == ("Fact 20.", [19, 0]) and answer[20] == ("Fact 21.", [0])
    assert run("A [3]. B [1]. C [2].", max_references=2) == (["d3", "d1"], [("A.", [0]), ("B.", [1]), ("C.", [])])


def test_brackets_that_are_not_citations_are_kept():
    assert run("Lists look like [a, b] in Python [1]. In [2020] it changed [2].") == (
        ["d1", "d2"],
        [("Lists look like [a, b] in Python.", [0]), ("In [2020] it changed.", [1])],
    )


SMOLLM2_MARKDOWN = """To parse command-line arguments in Python, use the argparse module [1].

```python [2]
import argparse
parser = argparse.ArgumentParser()
```

1. Create a parser with ArgumentParser [2].
2.
- Add arguments with add_argument() [3].
import argparse [2]
args = parser.parse_args()
Then call parse_args() to read them [3].
class attributes are shared by every instance [1]."""


def test_smollm2_markdown_code_and_orphan_markers_leave_no_sentence():
    """Code fences, code-only lines and orphan list markers are not sentences; their citations go to
    the sentence before, and every citation stays valid."""
    from ragnarok.stages.generate.cite import postprocess

    references, answer = postprocess(SMOLLM2_MARKDOWN, ["d1", "d2", "d3"])
    assert [(s.text, s.citations) for s in answer] == [
        ("To parse command-line arguments in Python, use the argparse module.", [0, 1]),
        ("Create a parser with ArgumentParser.", [1]),
        ("Add arguments with add_argument().", [2, 1]),
        ("Then call parse_args() to read them.", [2]),
        ("class attributes are shared by every instance.", [0]),  # prose that starts like code: kept
    ]
    assert references == ["d1", "d2", "d3"]
    assert not any("```" in s.text or s.text.strip() in {"2.", "-"} for s in answer)


def test_list_numbers_inside_a_line_are_no_sentences():
    from ragnarok.stages.generate.cite import postprocess

    raw = (
        "When to use a tuple:\n1. To store values, such as records in Python [1]. 2. When the data is "
        "immutable (e.g., integers) [2]. 3. When memory matters."
    )
    _, answer = postprocess(raw, ["d1", "d2"])
    assert [s.text for s in answer] == [
        "When to use a tuple:",
        "To store values, such as records in Python.",
        "When the data is immutable (e.g., integers).",
        "When memory matters.",
    ]
    assert [s.citations for s in answer] == [[], [0], [1], []]


def test_a_model_answer_of_code_alone_falls_back_to_the_extractive_answer():
    """Never an empty answer while there are candidates; the notes say why."""
    from ragnarok.core.types import Candidate, Doc, Query
    from ragnarok.stages.generate.llm import finish

    candidates = [
        Candidate(
            docid="d1",
            score=1.0,
            doc=Doc(segment="A tuple is an immutable sequence. Use a tuple for a fixed record of values."),
        )
    ]
    answer = finish("```python\nrecord = (1, 2)\n```\n2.", Query(text="when to use a tuple", qid="q"), candidates, 80)
    assert [s.text for s in answer.answer] == [
        "A tuple is an immutable sequence.",
        "Use a tuple for a fixed record of values.",
    ]
    assert answer.references == ["d1"] and answer.notes["fallback"].startswith("the model wrote no sentence")
