"""Listwise reranking with an LLM behind any OpenAI-compatible endpoint (RankGPT with GPT-4o, RankZephyr on vLLM).

The RankGPT/RankZephyr prompt asks for a permutation ``[4] > [2] > ...`` of a window of passages. Windows of
``window`` passages slide from the bottom of the ranking to the top with ``stride`` (20 and 10, as RankGPT and
rank_llm), so strong passages bubble up; ``passes`` repeats the whole sweep (3 for RankZephyr-ρ's progressive
reranking; a pass that changes nothing ends the repetition early). Model output is never trusted:
:func:`parse_permutation` keeps in-range ids in order, drops repeated and invented ones and appends the
missing ones in their prior order, so the result is always a permutation of the input and no candidate is
ever lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from ragnarok.core.types import Candidate, Request
from ragnarok.stages.generate.base import GenerationError, GeneratorConfig, GeneratorUnavailable
from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator
from ragnarok.stages.rerank.base import RerankError, RerankerUnavailable, reordered

RANKGPT_SYSTEM = (
    "You are RankGPT, an intelligent assistant that can rank passages based on their relevancy to the query."
)
RANKZEPHYR_SYSTEM = (
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query."
)
_INT = re.compile(r"\d+")


class ChatModel(Protocol):
    """What listwise reranking needs of a generator backend: :class:`OpenAIChatGenerator` (OpenAI, vLLM,
    a llama.cpp server) or the embedded :class:`~ragnarok.stages.generate.llama_cpp.LlamaCppGenerator`."""

    name: str

    def availability(self) -> str | None: ...

    def complete(self, messages: list[dict[str, str]]) -> str: ...


def complete_permutation(order: Iterable[int], n: int) -> list[int]:
    """``order`` (0-based positions) made a permutation of ``range(n)``: out-of-range and repeated positions
    are dropped, the missing ones appended in their original order."""
    seen: dict[int, None] = {}
    for i in order:
        if 0 <= i < n and i not in seen:
            seen[i] = None
    return [*seen, *(i for i in range(n) if i not in seen)]


def parse_permutation(text: str, n: int) -> list[int]:
    """The 0-based order of ``n`` passages from model output such as ``[3] > [1] > [2]``.

    Every integer in the text is read in order as a 1-based identifier; the result is always a permutation
    of ``range(n)`` (see :func:`complete_permutation`), whatever the text.
    """
    return complete_permutation((int(token) - 1 for token in _INT.findall(text or "")), n)


def window_bounds(n: int, window: int, stride: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` windows of one bottom-up sweep over ``n`` items (as rank_llm's sliding windows)."""
    if window <= 0 or stride <= 0:
        raise ValueError(f"window and stride must be positive, got {window} and {stride}")
    if n <= 0:
        return []
    bounds, end = [], n
    start = max(0, end - window)
    while True:
        bounds.append((start, end))
        if start == 0:
            return bounds
        end -= stride
        start = max(0, start - stride)


def sweep(items: list[int], rank_window: Callable[[list[int]], list[int]], window: int, stride: int) -> list[int]:
    """One sliding-window pass over ``items``: ``rank_window`` gets a window's items and returns their new
    order as positions in that window (repaired into a permutation if it is not one). Windows of one item are
    not ranked."""
    items = list(items)
    for start, end in window_bounds(len(items), window, stride):
        chunk = items[start:end]
        if len(chunk) < 2:
            continue
        order = complete_permutation(rank_window(chunk), len(chunk))
        items[start:end] = [chunk[i] for i in order]
    return items


def passage_text(candidate: Candidate, max_words: int) -> str:
    """``title segment`` cut to ``max_words`` words, with brackets made parentheses (ids stay unambiguous)."""
    text = " ".join(p for p in (candidate.doc.title, candidate.doc.segment) if p)
    text = text.replace("[", "(").replace("]", ")")
    return " ".join(text.split()[:max_words])


def ranking_messages(query: str, passages: list[str], system: str = RANKGPT_SYSTEM) -> list[dict[str, str]]:
    """The RankGPT / RankZephyr prompt for one window of passages."""
    n = len(passages)
    listed = "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    user = (
        f"I will provide you with {n} passages, each indicated by a numerical identifier []. Rank the "
        f"passages based on their relevance to the search query: {query}.\n\n{listed}\n\n"
        f"Search Query: {query}.\nRank the {n} passages above based on their relevance to the search "
        f"query. All the passages should be included and listed using identifiers, in descending order "
        f"of relevance. The output format should be [] > [], e.g., [4] > [2]. Only respond with the "
        f"ranking results, do not say any word or explain."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass
class ListwiseReranker:
    """Sliding-window listwise reranking; every model call goes through ``chat`` (its Guard bounds concurrency
    and retries). Scores of the output descend from the number of input candidates."""

    name: str
    chat: ChatModel
    window: int = 20
    stride: int = 10
    passes: int = 1
    max_passage_words: int = 100
    system: str = RANKGPT_SYSTEM

    def __post_init__(self) -> None:
        if self.passes < 1:
            raise ValueError(f"passes must be >= 1, got {self.passes}")
        window_bounds(1, self.window, self.stride)  # validates window and stride

    @classmethod
    def from_endpoint(
        cls,
        name: str,
        base_url: str | None,
        model: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        max_concurrency: int = 4,
        max_tokens: int = 256,
        **options: object,
    ) -> "ListwiseReranker":
        """A reranker over ``base_url`` (None: api.openai.com) serving ``model``; the API key is read from the
        environment variable ``api_key_env`` (None: local servers, which take any key). ``max_tokens`` bounds
        each answer (a window of 20 needs about 100); ``options`` are the reranker's fields (window, passes...)."""
        config = GeneratorConfig(
            name=name,
            backend="openai",
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            max_tokens=max_tokens,
            temperature=0.0,
        )
        return cls(name, OpenAIChatGenerator(config), **options)  # type: ignore[arg-type]

    def availability(self) -> str | None:
        return self.chat.availability()

    def messages(self, query: str, passages: list[Candidate]) -> list[dict[str, str]]:
        return ranking_messages(query, [passage_text(c, self.max_passage_words) for c in passages], self.system)

    def rank_window(self, query: str, passages: list[Candidate]) -> list[int]:
        """One model call: the 0-based order of ``passages`` (always a permutation)."""
        try:
            text = self.chat.complete(self.messages(query, passages))
        except GeneratorUnavailable as exc:
            raise RerankerUnavailable(f"reranker {self.name!r} is unavailable: {exc}") from None
        except GenerationError as exc:
            raise RerankError(self.name, exc.cause, exc.timeout) from None
        return parse_permutation(text, len(passages))

    def rerank(self, request: Request, k: int) -> Request:
        candidates = request.candidates
        order = list(range(len(candidates)))
        for _ in range(self.passes):
            previous = order
            order = sweep(
                order,
                lambda chunk: self.rank_window(request.query.text, [candidates[i] for i in chunk]),
                self.window,
                self.stride,
            )
            if order == previous:  # a pass that changes nothing would be repeated identically
                break
        return reordered(request, order, k)
