"""An extractive baseline: no model, deterministic, fast. It answers with the candidates' own sentences.

Each sentence of the top segments is scored by the IDF-weighted share of the topic's terms it contains
(IDF over the sentences of the candidates), with a small bonus for higher-ranked segments; the best
sentences, each cited to its segment, make an answer of up to ``max_words`` words (default 250), in score
order, with near-identical sentences (overlapping windows repeat sentences) taken once.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import blingfire

from ragnarok.generate.cite import postprocess
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.types import Candidate, Query, RagAnswer, word_count

_WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it of on or that the this to what when where "
    "which who why with you your my me we".split()
)


def terms(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in STOP]


@dataclass
class ExtractiveGenerator:
    name: str = "extractive"
    max_words: int = 250
    max_sentence_words: int = 80

    def availability(self) -> str | None:
        return None

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        pool: list[tuple[str, int]] = []  # (sentence, 1-based candidate number)
        for number, cand in enumerate(candidates, start=1):
            text = (cand.doc.segment or "").strip()
            if text:
                pool.extend((s, number) for s in blingfire.text_to_sentences(text).split("\n")
                            if 3 <= word_count(s) <= self.max_sentence_words)
        query = set(terms(topic.text))
        df = Counter(t for s, _ in pool for t in set(terms(s)))
        idf = {t: math.log(1 + len(pool) / (1 + df[t])) for t in query}
        total = sum(idf.values()) or 1.0

        def score(item: tuple[int, tuple[str, int]]) -> tuple[float, int]:
            position, (sentence, number) = item
            overlap = sum(idf[t] for t in query & set(terms(sentence))) / total
            return (-(overlap + 0.05 / number), position)

        chosen, seen, words = [], set(), 0
        for _, (sentence, number) in sorted(enumerate(pool), key=score):
            key = " ".join(terms(sentence))
            if key in seen or not query & set(terms(sentence)):
                continue
            n = word_count(sentence)
            if words + n > min(self.max_words, template.max_words):
                continue
            seen.add(key)
            # brackets of the segment's own become parentheses: only our marker may read as a citation
            chosen.append(f"{sentence.rstrip().replace('[', '(').replace(']', ')')} [{number}]")
            words += n
        text = "\n".join(chosen)
        references, answer = postprocess(text, [c.docid for c in candidates], max_words=template.max_words)
        return RagAnswer.build(str(topic.qid), topic.text, references, answer)
