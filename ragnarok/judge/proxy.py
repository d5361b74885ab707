"""The proxy judge: no LLM, only sentence rules and MiniLM embeddings (offline), with fixed thresholds. It is
for CI, demos and machines without a strong model, and it is named as a proxy wherever its labels appear.

Nuggets and citation support: :mod:`ragnarok.judge.entail`. Its judgments are cached like an LLM judge's
(``judgments.db``, under ``proxy`` and the rules' version ``PROXY_VERSION``), so a rerun reads them back.
Relevance 0-3 from the query-passage cosine (>= 0.65: 3, >= 0.5: 2, >= 0.35: 1). Pairwise: the answer closer
to the query wins, a tie within 0.02. ``cosines`` is shared with the reference metrics."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ragnarok.judge import entail
from ragnarok.judge.cache import JudgeCache, judgment_key
from ragnarok.judge.llm import JudgeStats
from ragnarok.judge.nuggets import MAX_NUGGETS, Nugget

if TYPE_CHECKING:
    from ragnarok.judge.nli import NLIModel

PROXY_VERSION = 6  # part of every cached proxy judgment's key: bump when the rules or thresholds change

GRADES = (0.65, 0.5, 0.35)
TIE = 0.02
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE.split(text)) if s] or [text]


def _vectors(texts: Sequence[str]) -> np.ndarray:
    """MiniLM vectors: the sentence store's, else the process's cache of encoded texts, else encoded
    (:mod:`ragnarok.stages.embed.vectors`)."""
    from ragnarok.stages.embed.vectors import text_vectors  # noqa: PLC0415 - loads MiniLM on first use

    return text_vectors("minilm").encode(list(texts))


def cosines(claims: Sequence[str], passages: Sequence[str]) -> np.ndarray:
    """``(len(claims), len(passages))`` MiniLM cosines."""
    vectors = _vectors([*claims, *passages])
    return vectors[: len(claims)] @ vectors[len(claims) :].T


class ProxyJudge:
    proxy = True
    name = "proxy"

    def __init__(self, cache: JudgeCache | None = None, nli: NLIModel | None = None) -> None:
        self.stats = JudgeStats()
        self.cache = cache
        self.nli = nli  # an NLI cross-encoder judges nuggets and citations instead of the rules (ragnarok.judge.nli)

    def describe(self) -> str:
        if self.nli is not None:
            return f"PROXY judge v{PROXY_VERSION} (NLI cross-encoder {self.nli.name}, no LLM)"
        return f"PROXY judge v{PROXY_VERSION} (sentence rules + MiniLM similarity, no LLM)"

    def _prompt(self, task: str) -> str:
        """What a cached judgment's key names besides its inputs: the task, the rules' version, the NLI model."""
        return f"{task}@proxy-v{PROXY_VERSION}" + (f"+nli:{self.nli.name}" if self.nli is not None else "")

    def _lookup(self, task: str, inputs: list[dict[str, str]]) -> tuple[list[str], dict[str, str]]:
        """Each input's cache key, and the judgments the cache holds for them."""
        keys = [judgment_key(self.name, self._prompt(task), item) for item in inputs]
        return keys, self.cache.get_many(keys) if self.cache is not None else {}

    def _cached(self, task: str, inputs: list[dict[str, str]], compute) -> list[str]:  # type: ignore[no-untyped-def]
        """``compute(missing indices) -> labels`` for what the cache lacks; every judgment cached."""
        keys, found = self._lookup(task, inputs)
        todo = [i for i, k in enumerate(keys) if k not in found]
        fresh = dict(zip(todo, compute(todo))) if todo else {}
        if self.cache is not None and fresh:
            self.cache.put_many([(keys[i], self.name, self._prompt(task), label, "") for i, label in fresh.items()])
        self.stats.add(judged=len(keys), cached=len(keys) - len(todo))
        return [fresh[i] if i in fresh else found[k] for i, k in enumerate(keys)]

    def _missing(self, task: str, inputs: list[dict[str, str]]) -> list[int]:
        """Indices of ``inputs`` whose judgments the cache lacks."""
        if self.cache is None:
            return list(range(len(inputs)))
        keys, found = self._lookup(task, inputs)
        return [i for i, k in enumerate(keys) if k not in found]

    def prefetch(
        self, assign: Iterable[tuple[str, str, Sequence[str]]] = (), support: Iterable[tuple[str, str]] = ()
    ) -> int:
        """Get ready for the ``assign(query, answer, nuggets)`` and ``support(sentence, passage)`` calls to
        come: their rules are worked out (and memoised) and every text they will need a MiniLM vector for is
        encoded in one call (the encoder's batches, longest first: larger batches measured no faster on CPU),
        so the calls themselves only read the vector cache. Judgments already cached are
        skipped; at most half the vector cache's size in texts are read (the rest when their calls come). Labels are
        the same with or without it. Returns the number of texts encoded (none with an NLI model)."""
        if self.nli is not None:
            return 0
        texts: dict[str, None] = {}
        for query, answer, nuggets in assign:
            nuggets = list(nuggets)
            todo = self._missing("assign", [{"query": query, "answer": answer, "nugget": n} for n in nuggets])
            if todo:
                plan = entail.plan_nuggets(query, answer, tuple(nuggets[i] for i in todo))
                texts.update(dict.fromkeys(plan.texts))
        for sentence, passage in support:
            if self._missing("support", [{"sentence": sentence, "passage": passage}]):
                texts.update(dict.fromkeys(entail.plan_support(sentence, passage).texts))
        from ragnarok.stages.embed.vectors import text_vectors  # noqa: PLC0415

        vectors = text_vectors("minilm")
        before = vectors.stats["encoded"]
        todo = list(texts)[: vectors.cache_entries // 2]
        if todo:
            _vectors(todo)
        return vectors.stats["encoded"] - before

    def assign(self, query: str, passage: str, nuggets: Sequence[str]) -> list[str | None]:
        """Each nugget against the answer's (``passage``'s) sentences: support / partial_support /
        not_support."""
        names = ("not_support", "partial_support", "support")

        def compute(todo: list[int]) -> list[str]:
            todo_nuggets = [nuggets[i] for i in todo]
            levels = (
                entail.nugget_levels(query, passage, todo_nuggets, cosines)
                if self.nli is None
                else self.nli.nugget_levels(query, passage, todo_nuggets)
            )
            return [names[level] for level in levels]

        return self._cached("assign", [{"query": query, "answer": passage, "nugget": n} for n in nuggets], compute)  # type: ignore[return-value]

    def support(self, sentence: str, passage: str) -> str | None:
        """Does the cited ``passage`` state the answer ``sentence``: full / partial / no support."""

        def compute(todo: list[int]) -> list[str]:
            level = (
                entail.support_level(sentence, passage, cosines)
                if self.nli is None
                else self.nli.support_level(sentence, passage)
            )
            return [("no_support", "partial_support", "full_support")[level]]

        return self._cached("support", [{"sentence": sentence, "passage": passage}], compute)[0]

    def relevance(self, query: str, passage: str, mode: str = "umbrela") -> int | None:
        cos = float(cosines([query], [passage])[0, 0])
        self.stats.add(judged=1)
        return next((3 - i for i, t in enumerate(GRADES) if cos >= t), 0)

    def prefer(self, query: str, answer_a: str, answer_b: str) -> str | None:
        a, b = cosines([query], [answer_a, answer_b])[0]
        self.stats.add(judged=1)
        return "tie" if abs(a - b) < TIE else ("A" if a > b else "B")

    def geval(self, query: str, answer: str) -> dict[str, int | None]:
        raise ValueError("the G-Eval scores need an LLM judge (--judge NAME); the proxy judge has none")

    def create(self, query: str, segments: Sequence[str], max_nuggets: int = MAX_NUGGETS) -> list[Nugget]:
        """The segments' sentences closest to the query (cosine >= 0.3, at most 25 words, no repeats), the
        first third vital."""
        pool = list(dict.fromkeys(s for seg in segments for s in sentences(seg) if 3 <= len(s.split()) <= 25))
        if not pool:
            return []
        sims = cosines([query], pool)[0]
        chosen = [pool[i] for i in np.argsort(-sims, kind="stable") if sims[i] >= 0.3][:max_nuggets]
        self.stats.add(judged=len(chosen))
        vital = max(1, len(chosen) // 3)
        return [Nugget(text=s, importance="vital" if i < vital else "okay") for i, s in enumerate(chosen)]
