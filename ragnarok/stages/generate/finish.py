"""What an answer goes through after the model wrote it: repeated sentences dropped, and citations attributed
after the fact where the model cited nothing or cited a context that does not support the sentence.

Support is lexical and deterministic (no model): the IDF-weighted share of a sentence's content words found in
a context (IDF over the sentences of all the contexts), the same terms the extractive generator scores with.
The answer's ``notes`` say what was done (``repeats_dropped``, ``citations_attributed``,
``citations_removed``, and ``citations``: ``produced``, ``attributed`` or ``mixed``); the AG service returns
them beside the answer and ``/rag`` shows them in the generator stage's trace.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal

import blingfire
from pydantic import Field

from ragnarok.core.types import RagAnswer

Numbered = list[tuple[str, list[int]]]  # sentences with 1-based context numbers
_WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it its of on or that the this to what when "
    "where which who why with you your my me we will would should could may might has have had was were been "
    "not no so if then than there their these those into about also use used using".split()
)
#: A context supports a sentence when it holds at least this IDF-weighted share of its content words.
SUPPORTED = 0.4
#: A cited context below this share does not support its sentence: the citation is wrong.
WRONG = 0.2
#: Sentences the same as an earlier one, or with this word-set Jaccard to one, are repeats.
REPEAT_JACCARD = 0.8


# a sentence's end: punctuation, closing quotes or brackets, and citation markers after it
_END = re.compile(r"[.!?…][\"'”)]*(?:\s*[\[【][^\]】\n]{0,40}[\]】])*(?=\s)")


def whole_sentences(text: str) -> str:
    """``text`` up to the end of its last whole sentence (all of it when none ends)."""
    ends = [m.end() for m in _END.finditer(text + " ")]
    return text[: ends[-1]] if ends else text


class GeneratedAnswer(RagAnswer):
    """A :class:`RagAnswer` with what post-processing did (never written to a run file)."""

    notes: dict[str, Any] | None = Field(None, exclude=True)


def terms(text: str) -> list[str]:
    """Content words: lower-cased, stop words out, a plural ``s`` cut."""
    return list(_terms(text))


@lru_cache(maxsize=65536)  # sentences are read several times per answer, and again across answers
def _terms(text: str) -> tuple[str, ...]:
    words = _WORD.findall(text.lower())
    return tuple(
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words if w not in STOP
    )


@lru_cache(maxsize=65536)  # the extractive generator's lexicon splits the same candidate sentences again
def _sentences(text: str) -> tuple[str, ...]:
    """``text``'s sentences as blingfire splits them, blank ones left out."""
    return tuple(s for s in blingfire.text_to_sentences(text).split("\n") if s.strip())


def word_set(sentence: str) -> set[str]:
    """The words :func:`repeats` compares: all of them, lower-cased."""
    return set(_WORD.findall(sentence.lower()))


def near(a: set[str], b: set[str]) -> bool:
    """Whether two word sets (:func:`word_set`) repeat each other: Jaccard >= REPEAT_JACCARD."""
    return bool(a | b) and len(a & b) / len(a | b) >= REPEAT_JACCARD


def repeats(sentences: Sequence[str]) -> list[bool]:
    """For each sentence, whether it repeats an earlier one (the same words, or Jaccard >= REPEAT_JACCARD)."""
    seen: list[set[str]] = []
    keys: set[tuple[str, ...]] = set()
    out = []
    for s in sentences:
        words = _WORD.findall(s.lower())
        bag = set(words)
        out.append(bool(words) and (tuple(words) in keys or any(near(bag, b) for b in seen)))
        keys.add(tuple(words))
        seen.append(bag)
    return out


def drop_repeats(sentences: Numbered) -> tuple[Numbered, int]:
    """The sentences without their repeats, and how many were dropped."""
    flags = repeats([s for s, _ in sentences])
    return [p for p, repeat in zip(sentences, flags) if not repeat], sum(flags)


class Lexicon:
    """IDF over the sentences of a set of contexts, and lexical support scores against those contexts."""

    def __init__(self, contexts: Sequence[str]):
        self.contexts = [set(terms(c)) for c in contexts]
        pieces = [s for c in contexts for s in _sentences(c)]
        df = Counter(t for s in pieces for t in set(terms(s)))
        self.n = len(pieces) + 1
        self.df = df

    def idf(self, term: str) -> float:
        return math.log(1 + self.n / (1 + self.df.get(term, 0)))

    def coverage(self, text: str, bag: set[str]) -> float:
        """The IDF-weighted share of ``text``'s content words that are in ``bag``."""
        want = set(terms(text))
        total = sum(self.idf(t) for t in want)
        return sum(self.idf(t) for t in want & bag) / total if total else 0.0

    def support(self, sentence: str) -> list[float]:
        """The sentence's support by each context, in order."""
        return [self.coverage(sentence, bag) for bag in self.contexts]


def attribute(
    sentences: Numbered, contexts: Sequence[str], mode: Literal["off", "missing", "check"] = "check"
) -> tuple[Numbered, dict[str, int]]:
    """Citations attached after the fact (see the module docstring): a sentence that cites nothing gets the
    context that supports it best (when one supports it: ``SUPPORTED``); with ``check``, a citation of a context
    below ``WRONG`` is removed, and a sentence left without one gets the best context instead. Numbers are
    1-based positions in ``contexts``."""
    counts = {"citations_attributed": 0, "citations_removed": 0}
    if mode == "off" or not contexts:
        return sentences, counts
    lexicon = Lexicon(contexts)
    out: Numbered = []
    for sentence, numbers in sentences:
        scores = lexicon.support(sentence)
        valid = [n for n in numbers if 1 <= n <= len(contexts)]
        if mode == "check":
            kept = [n for n in valid if scores[n - 1] >= WRONG]
            counts["citations_removed"] += len(valid) - len(kept)
            valid = kept
        if not valid:
            best = max(range(len(contexts)), key=lambda i: (scores[i], -i))
            if scores[best] >= SUPPORTED:
                valid = [best + 1]
                counts["citations_attributed"] += 1
        out.append((sentence, valid))
    return out, counts


def citation_origin(produced: int, attributed: int) -> str:
    """``produced`` (all the model's), ``attributed`` (all ours), ``mixed``, or ``none``."""
    if produced and attributed:
        return "mixed"
    return "attributed" if attributed else "produced" if produced else "none"
