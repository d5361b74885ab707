"""An extractive baseline: no generative model, deterministic. It answers with the candidates' own sentences.

Prose sentences of the candidates are scored for relevance to the topic (IDF-weighted term overlap, optionally
MiniLM cosines), selected by maximal marginal relevance within a word budget, kept in their segment's order
and cited to their segment. It never answers nothing while there are candidates.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragnarok.core.sentences import is_code, prose_sentences  # is_code: re-exported (its old home)
from ragnarok.core.types import Candidate, Query, RagAnswer, word_count
from ragnarok.stages.generate.cite import to_references
from ragnarok.stages.generate.finish import GeneratedAnswer, Lexicon, near, terms, word_set
from ragnarok.stages.generate.prompts import PromptTemplate

__all__ = ["ExtractiveGenerator", "is_code", "prose_sentences", "terms"]

#: A sentence must reach this share of the best sentence's relevance to be chosen.
RELATIVE_FLOOR = 0.6
#: When no sentence matches the topic: at most this many of the best segment's first sentences, or words of text.
FALLBACK_SENTENCES, FALLBACK_WORDS = 2, 40
NO_TEXT_SENTENCE = "The retrieved segments hold no readable text."


@dataclass
class ExtractiveGenerator:
    name: str = "extractive"
    max_words: int = 150
    max_contexts: int = 10
    similarity: Literal["minilm", "bm25"] = "minilm"
    mmr_lambda: float = 0.7

    def availability(self) -> str | None:
        return None

    def _vectors(self, texts: list[str]) -> np.ndarray:
        from ragnarok.stages.embed.vectors import text_vectors  # noqa: PLC0415 - loads MiniLM on first use

        return text_vectors("minilm").encode(texts)  # the sentence store's, else the cache's, else encoded

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        candidates = candidates[: self.max_contexts]
        pool = self._pool(candidates, strict=True)
        relaxed = not pool  # no punctuated sentence anywhere (keyword lists, titles): take runs of words
        if relaxed:
            pool = self._pool(candidates, strict=False)
        budget = min(self.max_words, template.max_words)
        query = unicodedata.normalize("NFKC", topic.text)  # matched as the R service searched it
        chosen = self._select(query, pool, budget) if pool else []
        fallback = None
        if not chosen and candidates:  # never an empty answer while there are candidates (see _fallback)
            pool, chosen, fallback = self._fallback(candidates, [] if relaxed else pool, budget)
        best: dict[int, float] = {}
        for i, relevance in chosen:
            best[pool[i][1]] = max(best.get(pool[i][1], float("-inf")), relevance)
        ordered = sorted(chosen, key=lambda item: (-best[pool[item[0]][1]], pool[item[0]][1], pool[item[0]][2]))
        pairs = [(pool[i][0], [pool[i][1]] if pool[i][1] else []) for i, _ in ordered]  # 0: cites nothing
        references, answer = to_references(pairs, [c.docid for c in candidates])
        built = GeneratedAnswer.build(str(topic.qid), topic.text, references, answer)
        built.notes = {
            "contexts": len(candidates),
            "sentences_considered": len(pool),
            "similarity": self.similarity,
            "citations": "produced" if pairs else "none",
            "unpunctuated": relaxed,
        }
        if fallback:
            built.notes["fallback"] = fallback
        return built

    def _fallback(
        self, candidates: list[Candidate], pool: list[tuple[str, int, int]], budget: int
    ) -> tuple[list[tuple[str, int, int]], list[tuple[int, float]], str]:
        """No sentence matched the topic: the best-ranked segment's first prose sentences (up to
        ``FALLBACK_SENTENCES`` within the budget; ``pool``: the punctuated sentences, empty when there are none),
        else its first run of words, else the start of the first text there is, else a sentence saying there is
        none (citing nothing). Returns the pool, the chosen ``(index, relevance)`` and why (the trace shows it)."""
        for strict, why in (
            (True, "no sentence matched the topic: the best segment's first sentences"),
            (False, "no sentence matched the topic and none is punctuated: the best segment's first run of words"),
        ):
            options = pool if strict else self._pool(candidates, strict=False)
            if options:
                top = min(number for _, number, _ in options)
                first = [i for i, (_, number, _) in enumerate(options) if number == top]
                chosen, left = [], budget
                for i in first[:FALLBACK_SENTENCES]:
                    if word_count(options[i][0]) <= left:
                        chosen.append((i, 0.0))
                        left -= word_count(options[i][0])
                if chosen:
                    return options, chosen, why
        for number, cand in enumerate(candidates, start=1):
            text = " ".join((cand.doc.segment or cand.doc.title or "").split())
            if text:
                words = text.split()[: min(budget, FALLBACK_WORDS)]
                sentence = " ".join(words)
                return [(sentence, number, 0)], [(0, 0.0)], "no prose in any segment: the start of the first text"
        return [(NO_TEXT_SENTENCE, 0, 0)], [(0, 0.0)], "no segment holds any text"

    @staticmethod
    def _pool(candidates: list[Candidate], strict: bool) -> list[tuple[str, int, int]]:
        """(sentence, 1-based candidate number, position) of every candidate's prose sentences, each once."""
        pool: list[tuple[str, int, int]] = []
        seen: set[tuple[str, ...]] = set()
        for number, cand in enumerate(candidates, start=1):
            for position, sentence in enumerate(prose_sentences(cand.doc.segment or "", strict)):
                key = tuple(terms(sentence))
                if key and key not in seen:  # overlapping windows repeat sentences: each is taken once
                    seen.add(key)
                    pool.append((sentence, number, position))
        return pool

    def _select(self, query: str, pool: list[tuple[str, int, int]], budget: int) -> list[tuple[int, float]]:
        """MMR over the pool: ``(index, relevance)`` of the chosen sentences, in the order chosen."""
        lexicon = Lexicon([s for s, _, _ in pool])
        bags = [set(terms(s)) for s, _, _ in pool]
        words_of = [word_set(s) for s, _, _ in pool]
        lexical = np.array([lexicon.coverage(query, bag) for bag in bags])
        prior = np.array([0.02 / number for _, number, _ in pool])
        if self.similarity == "minilm":
            vectors = self._vectors([query] + [s for s, _, _ in pool])
            cosine = vectors[1:] @ vectors[0]
            relevance = cosine + 0.5 * lexical + prior
            similar = vectors[1:] @ vectors[1:].T
            eligible = (lexical > 0) | (cosine >= 0.4)
        else:
            relevance = lexical + prior
            similar = np.array([[len(a & b) / len(a | b) if a | b else 0.0 for b in bags] for a in bags])
            eligible = lexical > 0
        # far below the best sentence is off the topic: a shorter answer is better than a padded one
        eligible &= relevance >= RELATIVE_FLOOR * float(np.max(np.where(eligible, relevance, -np.inf), initial=0.0))
        words = np.array([word_count(s) for s, _, _ in pool])
        chosen: list[tuple[int, float]] = []
        left = budget
        redundancy = np.zeros(len(pool))
        available = eligible & (words <= left)
        while available.any():
            score = np.where(available, self.mmr_lambda * relevance - (1 - self.mmr_lambda) * redundancy, -np.inf)
            i = int(np.argmax(score))  # the first of equal scores: deterministic
            chosen.append((i, float(relevance[i])))
            left -= int(words[i])
            redundancy = np.maximum(redundancy, similar[i])
            # what the answer checks count as a repeated sentence (finish.repeats), or one that says a part of
            # the other (all its content words in the other's)
            available &= (words <= left) & (similar[i] < 0.9)
            available[i] = False
            for j in np.flatnonzero(available).tolist():  # only what could still be chosen is compared
                b = bags[j]
                if near(words_of[i], words_of[j]) or (bool(b) and (b <= bags[i] or bags[i] <= b)):
                    available[j] = False
        return chosen
