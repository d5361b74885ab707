"""Rerankers: permutation parsing, sliding windows, MiniLM embedding/MMR rerankers, listwise reranking against
the real llama.cpp server (SmolLM2), and what the rank_llm adapter says when rank_llm is missing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from servers import free_port

from ragnarok.core.protocols import Reranker
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.stages.rerank.base import RerankError, RerankerUnavailable
from ragnarok.stages.rerank.embedding import EmbeddingReranker, MMRReranker
from ragnarok.stages.rerank.listwise import (
    ListwiseReranker,
    complete_permutation,
    parse_permutation,
    sweep,
    window_bounds,
)
from ragnarok.stages.rerank.rank_llm_adapter import MODELS, RankLLMReranker, from_rank_llm

DOCS = [
    ("bread", "How to bake bread", "Mix flour, water, yeast and salt, knead the dough and bake it in a hot oven."),
    ("jupiter", "Planets", "Jupiter is the largest planet of the solar system, a gas giant with many moons."),
    ("argparse", "argparse", "The argparse module makes it easy to write user-friendly command-line interfaces."),
    ("football", "Football", "A football match has two teams of eleven players who try to score goals."),
    ("violin", "Violin", "The violin is a bowed string instrument with four strings tuned in perfect fifths."),
    ("sleep", "Sleep", "Adults need seven to nine hours of sleep each night to stay healthy and alert."),
]


def make_request(query: str, n: int | None = None) -> Request:
    docs = DOCS if n is None else [DOCS[i % len(DOCS)] for i in range(n)]
    candidates = [
        Candidate(docid=f"{d}#{i}_0", score=float(100 - i), doc=Doc(title=t, segment=b))
        for i, (d, t, b) in enumerate(docs)
    ]
    return Request(query=Query(text=query, qid="q1"), candidates=candidates)


def ids(request: Request) -> list[str]:
    return [c.docid for c in request.candidates]


# --- parsing -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("[3] > [1] > [2]", 3, [2, 0, 1]),  # normal
        ("[2] > [1]", 4, [1, 0, 2, 3]),  # missing ids appended in their original order
        ("[2] > [2] > [1] > [2]", 3, [1, 0, 2]),  # repeats dropped
        ("[99] > [3] > [0] > [1]", 3, [2, 0, 1]),  # invented ids ([99], [0]) dropped
        ("I think passage 3 is best, then [1]", 4, [2, 0, 1, 3]),
        ("no idea, sorry!", 3, [0, 1, 2]),  # garbage: the input order
        ("", 3, [0, 1, 2]),
        ("", 0, []),
        ("[1] > [2]", 0, []),
        ("[10] > [2] > [1]", 10, [9, 1, 0, 2, 3, 4, 5, 6, 7, 8]),  # multi-digit ids
    ],
)
def test_parse_permutation(text, n, expected):
    assert parse_permutation(text, n) == expected


def test_complete_permutation():
    assert complete_permutation([4, 4, -1, 2, 7], 5) == [4, 2, 0, 1, 3]
    assert complete_permutation([], 2) == [0, 1]


# --- sliding windows -----------------------------------------------------------------------------------------


def test_window_bounds_go_bottom_up():
    assert window_bounds(50, 20, 10) == [(30, 50), (20, 40), (10, 30), (0, 20)]
    assert window_bounds(100, 20, 10)[0] == (80, 100) and window_bounds(100, 20, 10)[-1] == (0, 20)
    assert len(window_bounds(100, 20, 10)) == 9
    assert window_bounds(25, 20, 10) == [(5, 25), (0, 15)]
    assert window_bounds(20, 20, 10) == [(0, 20)]
    assert window_bounds(15, 20, 10) == [(0, 15)]
    assert window_bounds(0, 20, 10) == []
    with pytest.raises(ValueError):
        window_bounds(10, 20, 0)


class RecordingRanker:
    """A fake ranking function (a plain callable): larger item ids are more relevant; it records each window."""

    def __init__(self) -> None:
        self.windows: list[list[int]] = []

    def __call__(self, chunk: list[int]) -> list[int]:
        self.windows.append(list(chunk))
        return sorted(range(len(chunk)), key=lambda i: -chunk[i])


def test_sweep_windows_strides_and_bubbling():
    ranker = RecordingRanker()
    order = sweep(list(range(50)), ranker, window=20, stride=10)
    # the windows are those of window_bounds, each seeing the order left by the window below it
    assert [len(w) for w in ranker.windows] == [20, 20, 20, 20]
    assert ranker.windows[0] == list(range(30, 50))
    assert ranker.windows[1] == list(range(20, 30)) + list(range(49, 39, -1))  # overlap carries the best up
    # one bottom-up pass brings the 10 best (the bottom 10) to the top, in order
    assert order[:10] == list(range(49, 39, -1)) and sorted(order) == list(range(50))


def test_sweep_repairs_a_misbehaving_ranker():
    def careless(chunk: list[int]) -> list[int]:
        return [3, 3, 99, -1]  # repeats, invented, negative: repaired, no item lost

    order = sweep(list(range(7)), careless, window=5, stride=2)
    assert sorted(order) == list(range(7))


@dataclass
class FakeChat:
    """An OpenAI-compatible chat stand-in (a plain class): answers each prompt with a scripted ranking."""

    answer: str = "reverse"
    prompts: list[str] = field(default_factory=list)
    name: str = "fake"

    def availability(self) -> str | None:
        return None

    def complete(self, messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        n = int(re.search(r"provide you with (\d+) passages", prompt).group(1))
        if self.answer == "reverse":
            return " > ".join(f"[{i}]" for i in range(n, 0, -1))
        return self.answer


def test_listwise_prompt_passes_and_scores():
    chat = FakeChat()
    request = make_request("which planet is the largest", 30)
    request.candidates[0].doc.segment = "[1] brackets " + "word " * 500
    reranker = ListwiseReranker("listwise:fake", chat, window=20, stride=10, passes=3, max_passage_words=50)
    out = reranker.rerank(request, 12)
    assert len(chat.prompts) == 3 * 2  # 30 candidates: windows (10, 30) and (0, 20), three passes
    first = chat.prompts[0]
    assert first.startswith(
        "I will provide you with 20 passages, each indicated by a numerical identifier []. "
        "Rank the passages based on their relevance to the search query: which planet is "
        "the largest."
    )
    assert (
        "The output format should be [] > [], e.g., [4] > [2]. Only respond with the ranking results, do not "
        "say any word or explain." in first
    )
    long_passage = next(line for line in chat.prompts[-1].splitlines() if "brackets" in line)
    assert "(1) brackets" in long_passage and len(long_passage.split()) == 1 + 50  # "[i]" + a 50-word budget
    assert len(out.candidates) == 12 and len(set(ids(out))) == 12
    assert [c.score for c in out.candidates] == [float(30 - r) for r in range(12)]
    assert out.query == request.query


def test_listwise_stops_when_a_pass_changes_nothing():
    chat = FakeChat(answer="[1] > [2] > [3]")  # keeps every window as it is
    out = ListwiseReranker("l", chat, window=4, stride=2, passes=3).rerank(make_request("q"), 6)
    assert ids(out) == ids(make_request("q")) and len(chat.prompts) == 2  # one pass of 2 windows, then stop


@pytest.mark.parametrize("answer", ["[99] > [0] > [5] > [5]", "I cannot rank these.", ""])
def test_listwise_never_loses_a_candidate(answer):
    request = make_request("q", 13)
    out = ListwiseReranker("l", FakeChat(answer=answer), window=5, stride=3).rerank(request, 13)
    assert sorted(ids(out)) == sorted(ids(request))


# --- embedding rerankers ---------------------------------------------------------------------------------------


def test_embedding_reranker_moves_the_relevant_passage_to_the_top():
    reranker = EmbeddingReranker()
    assert isinstance(reranker, Reranker) and reranker.availability() is None
    out = reranker.rerank(make_request("tuning a string instrument"), 3)
    assert ids(out)[0] == "violin#4_0" and len(out.candidates) == 3 and out.query.qid == "q1"
    assert out.candidates[0].score > out.candidates[1].score >= out.candidates[2].score
    assert out.candidates[0].doc.title == "Violin"


def test_mmr_lambda_one_is_the_embedding_order_and_low_lambda_demotes_a_near_duplicate():
    request = make_request("bread baking recipe")
    assert ids(MMRReranker(lambda_=1.0).rerank(request, 6)) == ids(EmbeddingReranker().rerank(request, 6))
    near_duplicate = Candidate(
        docid="bread#1_40",
        score=99.5,
        doc=Doc(title="How to bake bread", segment=DOCS[0][2].replace("hot", "very hot")),
    )
    request.candidates.insert(1, near_duplicate)
    relevance = ids(MMRReranker(lambda_=1.0).rerank(request, 3))
    diverse = ids(MMRReranker(lambda_=0.3).rerank(request, 3))
    assert set(relevance[:2]) == {"bread#0_0", "bread#1_40"}
    assert diverse[0] in {"bread#0_0", "bread#1_40"} and diverse[1] not in {"bread#0_0", "bread#1_40"}
    assert len(set(diverse)) == 3
    with pytest.raises(ValueError):
        MMRReranker(lambda_=1.5)


# --- listwise against a real OpenAI-compatible server ----------------------------------------------------------


def test_listwise_against_the_real_llama_cpp_server(smollm2_server):
    """Whatever SmolLM2-135M answers, the result is a permutation of the input (here: its top k)."""
    request = make_request("which planet is the largest", 12)
    reranker = ListwiseReranker.from_endpoint(
        "listwise:smollm2",
        smollm2_server,
        "smollm2",
        timeout_s=120,
        max_tokens=48,
        window=8,
        stride=4,
        passes=2,
        max_passage_words=20,
    )
    assert reranker.availability() is None
    out = reranker.rerank(request, 12)  # two windows, up to two passes
    assert sorted(ids(out)) == sorted(ids(request))
    assert {c.docid: c.doc for c in out.candidates} == {c.docid: c.doc for c in request.candidates}
    assert [c.score for c in out.candidates] == [float(12 - r) for r in range(12)]


def test_unreachable_endpoint_raises_an_error_naming_the_reranker():
    reranker = ListwiseReranker.from_endpoint(
        "rankzephyr", f"http://127.0.0.1:{free_port()}/v1", "zephyr", timeout_s=2, max_retries=0
    )
    with pytest.raises(RerankError, match="reranker 'rankzephyr' failed: cannot reach") as info:
        reranker.rerank(make_request("q"), 3)
    assert info.value.reranker == "rankzephyr" and not info.value.timeout


def test_missing_api_key_makes_the_reranker_unavailable(monkeypatch):
    monkeypatch.delenv("RAGNAROK_TEST_NO_SUCH_KEY", raising=False)
    reranker = ListwiseReranker.from_endpoint("rankgpt", None, "gpt-4o", api_key_env="RAGNAROK_TEST_NO_SUCH_KEY")
    assert reranker.availability() == "RAGNAROK_TEST_NO_SUCH_KEY is not set"
    with pytest.raises(RerankerUnavailable, match="'rankgpt' is unavailable"):
        reranker.rerank(make_request("q"), 3)


# --- rank_llm adapter ------------------------------------------------------------------------------------------


def test_rank_llm_adapter_says_why_it_cannot_run():
    for kind, model in MODELS.items():
        reranker = RankLLMReranker(kind, model)
        assert isinstance(reranker, Reranker)
        assert reranker.availability() == (
            "rank_llm is not installed: pip install 'ragnarok-rag[rank-llm]' on Python ≥ 3.12 with a GPU"
        )
        with pytest.raises(RerankerUnavailable, match=f"reranker '{kind}' is unavailable: rank_llm is not installed"):
            reranker.rerank(make_request("q"), 3)


@dataclass
class _RLCandidate:  # the shape of rank_llm.data.Candidate
    docid: str
    score: float
    doc: dict


def test_rank_llm_results_map_back_to_our_candidates():
    request = make_request("q")
    candidates = [_RLCandidate("violin#4_0", 0.9, {}), _RLCandidate("bread#0_0", 0.5, {})]
    result = type("Result", (), {"candidates": candidates})
    out = from_rank_llm(result, request, 1)
    assert ids(out) == ["violin#4_0"] and out.candidates[0].score == 0.9
    assert out.candidates[0].doc == request.candidates[4].doc and out.query == request.query
    result.candidates.append(_RLCandidate("invented", 0.1, {}))
    with pytest.raises(ValueError, match="not in the input"):
        from_rank_llm(result, request, 5)
