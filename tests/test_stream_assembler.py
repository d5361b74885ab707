"""The streamed sentences agree with the final answer: :class:`SentenceAssembler` fed model output
piece by piece (a character, a word, a few words at a time) sends each sentence once, and those sentences, their
citations and the final answer are what the non-streamed post-processing makes of the whole text."""

from __future__ import annotations

import pytest

from ragnarok.core.types import Candidate, Doc, Query
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.llm import finish
from ragnarok.stages.generate.streaming import SentenceAssembler

CANDIDATES = [
    Candidate(docid=f"d{i}", score=1.0, doc=Doc(segment=text))
    for i, text in enumerate(
        [
            "The argparse module parses command line arguments and generates help messages.",
            "The getopt module is a C-style parser for command line options.",
            "gzip.open opens a gzip-compressed file in binary or text mode.",
        ],
        1,
    )
]
TEXTS = [
    "Use argparse to parse arguments [1]. It writes help messages [1][2]. getopt is the C-style one [2].",
    "First claim. [1] Second claim, e.g. for argparse [2]. Third one [1-3].",
    "## Answer\n\n**Argparse** parses arguments [1].\n\n- getopt is older [2].\n- gzip.open opens files [3].\n\n"
    "References:\n[1] argparse docs\n[2] getopt docs",
    "It parses arguments [1]. It parses arguments [1]. gzip.open opens files [3].",
    "<think>which module?</think>The argparse module parses arguments [Doc 1]. ```python\nimport argparse\n```\n"
    "Then call parse_args() [1].",
    "Argparse parses command line arguments and generates help messages for programs " * 6 + "[1].",
    "import argparse\nx = f(y)\n",  # only code: the extractive answer instead
    # a marker group that opens the next sentence belongs to the one before: held back until a word
    "Argparse parses arguments. [1] It writes help messages. [1][2] getopt is the C-style one. [2]",
    "It parses arguments. [1, 2] then getopt follows [2]. gzip.open opens files.【3】 Done. [Doc 3] Yes.",
]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("size", [1, 4, 17, 1000])
@pytest.mark.parametrize("attribution", ["off", "check"])
def test_streamed_sentences_are_the_final_answer(text, size, attribution):
    config = GeneratorConfig(name="t", backend="openai", attribution=attribution)
    topic = Query(text="how do I parse command line arguments", qid="q")
    assembler = SentenceAssembler.for_llm(topic, CANDIDATES, 40, config)
    events = [e for piece in pieces(text, size) for e in assembler.feed(piece)]
    last, answer = assembler.close()
    events += last
    expected = finish(text, topic, CANDIDATES, 40, config)
    assert answer.model_dump() == expected.model_dump()
    sent = [e.data for e in events if e.event == "sentence"]
    assert [(s["text"], s["citations"]) for s in sent] == [(s.text, s.citations) for s in answer.answer]
    assert [s["index"] for s in sent] == list(range(len(answer.answer)))
    assert all(s["docids"] == [answer.references[i] for i in s["citations"]] for s in sent)
    assert "".join(e.data["text"] for e in events if e.event == "delta") == text


def test_a_sentence_is_sent_once_the_next_one_starts():
    topic = Query(text="q", qid="q")
    assembler = SentenceAssembler.for_llm(topic, CANDIDATES, 100, None)
    assert [e.event for e in assembler.feed("Argparse parses arguments [1].")] == ["delta"]
    assert [e.event for e in assembler.feed(" Getopt is older")] == ["delta", "sentence"]


def test_a_secret_split_across_pieces_is_never_streamed(monkeypatch):
    from ragnarok.runtime.redact import register_value

    secret = "sk-streamed-secret-0123456789"
    register_value(secret)
    topic = Query(text="q", qid="q")
    assembler = SentenceAssembler.for_llm(topic, CANDIDATES, 100, None)
    text = f"The key is {secret} and argparse parses arguments [1]. Done [2]."
    events = [e for piece in pieces(text, 5) for e in assembler.feed(piece)]
    last, answer = assembler.close()
    streamed = "".join(e.data["text"] for e in events + last if e.event == "delta")
    assert secret not in streamed and "sk-streamed" not in streamed
    assert secret not in answer.model_dump_json()
