"""Compressors: each segment keeps only its sentences that matter to the query, so more evidence fits in the
generator's top 20. The text that remains is the segment's own sentences, in order, joined by `` … `` (a
compressed candidate keeps its id; ``doc.start_char``/``end_char`` still name the whole segment).

``compress:R@k`` is extractive: sentences (blingfire, as the segmenter splits them) scored by the
query terms they contain, each weighted by its inverse frequency among all the candidates' sentences; a
segment keeps its sentences with a positive score, at most a fraction R (default 0.5) of them and at least
its best one. The LLM compressor (``llmcompress:GEN[:MODE]@k``: sentence selection, refine,
tree-summarize) is in ``llmcompress.py``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from ragnarok.core.sentences import sentence_spans
from ragnarok.core.types import Candidate, Request
from ragnarok.stages.passage.base import Detail, StageContext, change, number

JOIN = " … "
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def terms(text: str) -> list[str]:
    return [w.rstrip("s") if len(w) > 3 else w for w in re.findall(r"\w+", text.lower()) if w not in _STOP]


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)] or ([text] if text.strip() else [])


def _with_text(c: Candidate, kept: list[str]) -> Candidate:
    return c.model_copy(update={"doc": c.doc.model_copy(update={"segment": JOIN.join(kept)})})


@dataclass
class Compress:
    name: str = "compress"
    ratio: float = 0.5

    @classmethod
    def create(cls, arg: str | None = None) -> Compress:
        return cls(ratio=number(arg, "compress:R", 0.05, 1.0, 0.5))

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        top = request.candidates[:k]
        split = [sentences(c.doc.segment or "") for c in top]
        df = Counter(t for sents in split for s in sents for t in set(terms(s)))
        total = sum(len(s) for s in split) or 1
        query = set(terms(ctx.topic.text))
        out_cands, dropped = [], 0
        for c, sents in zip(top, split):
            if not sents:
                out_cands.append(c)
                continue
            scores = [sum(math.log(1 + total / df[t]) for t in query & set(terms(s))) for s in sents]
            limit = max(1, math.ceil(self.ratio * len(sents)))
            best = sorted(range(len(sents)), key=lambda i: -scores[i])
            chosen = sorted([i for i in best[:limit] if scores[i] > 0] or best[:1])
            dropped += len(sents) - len(chosen)
            out_cands.append(_with_text(c, [sents[i] for i in chosen]))
        out = request.model_copy(update={"candidates": out_cands})
        return out, {**change(request.model_copy(update={"candidates": top}), out), "sentences_dropped": dropped}
