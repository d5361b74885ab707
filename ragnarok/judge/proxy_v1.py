"""The first proxy judge (until), kept only to be measured beside the new one
(``bench/bench_judge_dev.py --judge proxy-v1``): it rewards word lists and negations. No LLM, only token
overlap and MiniLM embeddings, with fixed thresholds; never cached.

A claim (a nugget, an answer sentence) against a passage: ``recall`` is the share of the claim's content
words (lower-cased, stop words out, a plural ``s`` cut) found in the passage, ``cos`` the best MiniLM cosine
between the claim and one sentence of the passage. Full support when recall >= 0.8 or cos >= 0.8; partial
when recall >= 0.5 or cos >= 0.6; else none. Relevance 0-3 from the query-passage cosine (>= 0.65: 3,
>= 0.5: 2, >= 0.35: 1). Pairwise: the answer closer to the query wins, a tie within 0.02."""

from __future__ import annotations

from collections.abc import Sequence

from ragnarok.judge.proxy import ProxyJudge, cosines, sentences, word_recall

FULL = (0.8, 0.8)  # (recall, cos)
PARTIAL = (0.5, 0.6)


class ProxyJudgeV1(ProxyJudge):
    proxy = True
    name = "proxy-v1"

    def describe(self) -> str:
        return "PROXY judge v1 (token overlap + MiniLM similarity over the whole answer, no LLM)"

    def _levels(self, claims: Sequence[str], passage: str) -> list[int]:
        """2 full, 1 partial, 0 none per claim."""
        if not claims:
            return []
        best = cosines(claims, sentences(passage)).max(axis=1)
        out = []
        for claim, cos in zip(claims, best):
            recall = word_recall(claim, passage)
            out.append(
                2 if recall >= FULL[0] or cos >= FULL[1] else 1 if recall >= PARTIAL[0] or cos >= PARTIAL[1] else 0
            )
        self.stats.add(judged=len(claims))
        return out

    def assign(self, query: str, passage: str, nuggets: Sequence[str]) -> list[str | None]:
        names = ("not_support", "partial_support", "support")
        return [names[level] for level in self._levels(nuggets, passage)]

    def support(self, sentence: str, passage: str) -> str | None:
        return ("no_support", "partial_support", "full_support")[self._levels([sentence], passage)[0]]
