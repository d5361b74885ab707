"""Post-processing of LLM answers: repeated sentences dropped, citations attributed after the fact, the streamed
answer stopped and cut at a sentence, and the notes that reach the /rag trace."""

import pytest

from ragnarok.core.types import Candidate, Doc, Query
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.finish import attribute, drop_repeats, repeats, whole_sentences
from ragnarok.stages.generate.llama_cpp import Stopper
from ragnarok.stages.generate.llm import answer_with_llm, finish
from ragnarok.stages.generate.prompts import get_template

CONTEXTS = [
    "The gzip module provides a simple interface to compress and decompress files like the GNU gzip program.",
    "The argparse module parses command-line arguments from sys.argv and writes help messages.",
    "The csv module reads and writes tabular data in comma separated values format.",
]
CANDIDATES = [Candidate(docid=f"d{i}", score=1.0, doc=Doc(segment=text)) for i, text in enumerate(CONTEXTS, 1)]
TOPIC = Query(text="compress a file with gzip", qid="t1")
LOOP = ("The answer is to compress a file with gzip using the gzip_decompress function. " * 19).strip()
CONFIG = GeneratorConfig(name="g", backend="llama-cpp", max_answer_words=80, attribution="check")


def test_repeats_are_exact_or_near_duplicates():
    assert repeats(["Gzip compresses files.", "gzip compresses files!", "Argparse parses arguments."]) == [
        False,
        True,
        False,
    ]
    near = [
        "The gzip module compresses and decompresses files like the gzip program.",
        "The gzip module compresses and decompresses files like the GNU gzip program.",
    ]
    assert repeats(near) == [False, True]


def test_drop_repeats_counts_what_went():
    pairs = [("Gzip compresses files.", [1]), ("Gzip compresses files.", [1]), ("Other words here.", [2])]
    kept, dropped = drop_repeats(pairs)
    assert kept == [("Gzip compresses files.", [1]), ("Other words here.", [2])] and dropped == 1


def test_the_loop_from_the_issue_becomes_one_sentence_with_a_citation():
    answer = finish(LOOP, TOPIC, CANDIDATES, 80, CONFIG, {})
    assert [s.text for s in answer.answer] == [
        "The answer is to compress a file with gzip using the gzip_decompress function."
    ]
    assert answer.references == ["d1"] and answer.answer[0].citations == [0]
    assert answer.notes == {
        "repeats_dropped": 18,
        "citations_attributed": 1,
        "citations_removed": 0,
        "citations": "attributed",
    }


def test_attribution_fills_missing_citations_and_replaces_wrong_ones():
    pairs = [
        ("Argparse parses command-line arguments from sys.argv.", []),  # cites nothing
        ("The csv module reads comma separated values.", [1]),  # cites gzip: wrong
        ("Gzip compresses files like the GNU program.", [1]),  # right: kept
        ("Quantum chromodynamics explains the strong force.", []),
    ]  # nothing supports it: left uncited
    out, counts = attribute(pairs, CONTEXTS, "check")
    assert [numbers for _, numbers in out] == [[2], [3], [1], []]
    assert counts == {"citations_attributed": 2, "citations_removed": 1}
    missing, counts = attribute(pairs, CONTEXTS, "missing")  # wrong citations stay
    assert [numbers for _, numbers in missing] == [[2], [1], [1], []]
    assert counts["citations_attributed"] == 1
    assert attribute(pairs, CONTEXTS, "off")[0] == pairs


def test_model_citations_are_kept_and_said_to_be_produced():
    answer = finish(
        "Gzip compresses files like the GNU gzip program [1]. Argparse parses arguments [2].",
        TOPIC,
        CANDIDATES,
        80,
        CONFIG,
        {},
    )
    assert answer.references == ["d1", "d2"] and answer.notes["citations"] == "produced"
    assert answer.notes["citations_attributed"] == answer.notes["citations_removed"] == 0


def test_the_cap_keeps_whole_sentences_and_the_prompt_asks_for_it():
    seen = {}

    def complete(messages):
        seen["user"] = messages[1]["content"]
        return " ".join(f"Gzip sentence number {i} compresses files [1]." for i in range(40))

    config = CONFIG.model_copy(update={"max_answer_words": 20, "max_contexts": 2})
    answer = answer_with_llm(complete, TOPIC, CANDIDATES, get_template("small"), 1000, config=config)
    assert answer.response_length <= 20 and all(s.text.endswith(".") for s in answer.answer)
    assert "at most 20 words" in seen["user"] and "[3]" not in seen["user"]  # two contexts sent
    assert answer.notes["contexts"] == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One is done [1]. Two is half", "One is done [1]."),
        ("One is done. [1] Two", "One is done. [1]"),
        ("Done! And", "Done!"),
        ("no end at all", "no end at all"),
    ],
)
def test_whole_sentences(text, expected):
    assert whole_sentences(text) == expected


def test_the_stopper_stops_at_the_word_cap_and_on_a_loop():
    stopper = Stopper(max_words=12)
    pieces = [
        "Gzip compresses ",
        "files well [1]. ",
        "Argparse parses ",
        "arguments [2]. ",
        "Csv reads ",
        "tables of values and many more words",
    ]
    reasons = [stopper.feed(p) for p in pieces]
    assert reasons[-1] == "words" and set(reasons[:-1]) == {None}
    looping = Stopper(max_words=None)
    reasons = [looping.feed(p) for p in ["Gzip compresses files.", " Gzip compresses files.", " More"]]
    assert reasons == [None, None, "repeat"]
    assert Stopper(max_words=None, stop_repeats=False).feed("Same. Same. Same. x") is None


def test_prompt_budget_follows_the_measured_prompt_speed():
    config = GeneratorConfig(
        name="g", backend="llama-cpp", context_tokens=4096, max_tokens=160, prompt_tokens_per_s=150, prompt_s=4
    )
    assert config.prompt_budget() == 600
    assert config.model_copy(update={"max_prompt_tokens": 300}).prompt_budget() == 300
    assert GeneratorConfig(name="g", backend="openai", context_tokens=4096, max_tokens=400).prompt_budget() == 3632
