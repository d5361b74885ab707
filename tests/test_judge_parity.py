"""Parity with the track's tools: UMBRELA as castorini/umbrela sends and reads it (the default) beside
our stricter variant, and citation support as the TREC 2024 evaluation judged it (first 3 citations, ``title:
segment`` passages) beside judging every citation. Golden values: the UMBRELA grades below are what umbrela's
own ``parse_fewshot_response`` returns for these answers (run once against its source, commit 04a4191)."""

from __future__ import annotations

import hashlib

import pytest

from ragnarok.judge.answers import Answer
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.evalrag import evaluate_run
from ragnarok.judge.llm import LLMJudge
from ragnarok.judge.parse import parse_grade, parse_umbrela
from ragnarok.judge.prompts import judge_prompt

GOLDEN = [  # answer -> (umbrela's grade, readable by umbrela), ours (strict; None: not labelled)
    ("##final score: 2", (2, True), 2),
    ("##final score: 1\n##final score: 3", (3, True), 1),  # umbrela: the last match
    ("M: 2, T: 1, ##final score: 3", (3, True), 3),
    ("O: 1", (1, True), 1),
    ('{"M": 2, "T": 3, "O": 1}', (1, True), 1),
    ("I would give it a score of 2.", (2, True), 2),
    ("The relevance category is 3 because", (3, True), 3),
    ("Final Score: 4", (0, False), None),  # out of range: umbrela grades it 0
    ("no idea", (0, False), None),
    ("", (0, False), None),
    ("Relevance: 1\nTrust: 2\nFinal score - 0", (0, True), 0),
    ("3", (3, True), 3),
    ("The passage is 2 steps away. final score is 1", (1, True), None),
    ("Score of 1; overall, 3", (1, True), None),
]
# sha256 of castorini/umbrela's qrel_zeroshot_bing ``prefix_user`` (its prompt, trailing spaces included)
UMBRELA_PROMPT_SHA256 = "c92537a4f97293dfe1fd5f3dccc3f7dea44e3ace65061a74dbf8afc833441546"


@pytest.mark.parametrize("text, umbrela, strict", GOLDEN)
def test_umbrela_parse_golden(text, umbrela, strict):
    assert parse_umbrela(text) == umbrela
    assert parse_grade(text, 0, 3) == strict


def test_the_umbrela_prompt_is_umbrelas():
    prompt = judge_prompt("umbrela")
    assert prompt.system == ""
    assert hashlib.sha256(prompt.user.encode()).hexdigest() == UMBRELA_PROMPT_SHA256
    assert judge_prompt("umbrela_strict").system  # ours keeps a system prompt


class Scripted:
    """A judge model that answers from a list and records the prompts it was sent."""

    def __init__(self, answers: list[str]):
        self.answers, self.sent = list(answers), []

    def __call__(self, messages):  # type: ignore[no-untyped-def]
        self.sent.append(messages)
        return self.answers.pop(0) if self.answers else "no idea"


def test_umbrela_mode_grades_unreadable_answers_0_and_strict_mode_does_not(tmp_path):
    model = Scripted(["I cannot tell.", "still cannot tell"])
    judge = LLMJudge("m", model, JudgeCache(tmp_path / "a.db"))
    assert judge.relevance("q", "the segment") == 0  # umbrela: no retry needed, 0 like umbrela
    assert judge.stats.defaulted == 1 and judge.stats.failed == 0
    assert model.sent[0][0] == {"role": "system", "content": ""}
    assert "Passage: the segment" in model.sent[0][1]["content"]
    strict = LLMJudge("m", Scripted(["I cannot tell.", "nor now"]), JudgeCache(tmp_path / "b.db"))
    assert strict.relevance("q", "the segment", mode="strict") is None and strict.stats.failed == 1


def test_trec24_support_judges_the_first_three_citations():
    segments = {f"s{i}": f"t{i}: text {i}" for i in range(5)}
    answer = Answer("q", "question", [("A sentence citing five segments.", [0, 1, 2, 3, 4])], list(segments))
    seen: list[str] = []

    class Recorder:
        proxy, name = True, "rec"
        stats = None

        def support(self, sentence: str, passage: str) -> str:
            seen.append(passage)
            return "full_support"

    from ragnarok.judge.llm import JudgeStats

    Recorder.stats = JudgeStats()
    every = evaluate_run("r", {"q": answer}, Recorder(), segments=segments.get, concurrency=1)
    assert len(seen) == 5 and len(every.topics["q"].support[0]) == 5
    seen.clear()
    trec = evaluate_run("r", {"q": answer}, Recorder(), segments=segments.get, concurrency=1, support_mode="trec24")
    assert seen == ["t0: text 0", "t1: text 1", "t2: text 2"] and len(trec.topics["q"].support[0]) == 3
    assert trec.topics["q"].scores == {"support_precision": 1.0, "support_recall": 1.0}


@pytest.mark.parametrize(
    "style, text",
    [
        ("title segment", "argparse Parser for options."),
        ("segment", "Parser for options."),
        ("title: segment", "argparse: Parser for options."),
    ],
)
def test_segment_styles(style, text):
    import json

    from ragnarok.judge.answers import retriever_segments

    class Document:
        def raw(self) -> str:
            return json.dumps({"title": "argparse", "segment": "Parser for options."})

    class Searcher:
        def doc(self, docid: str):  # type: ignore[no-untyped-def]
            return Document() if docid == "d" else None

    class Retriever:
        def _load(self) -> Searcher:
            return Searcher()

    segments = retriever_segments(Retriever(), style)  # type: ignore[arg-type]
    assert segments("d") == text and segments("other") is None
