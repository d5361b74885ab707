"""What each query stage asks a generator, and how the text it writes becomes retrieval queries.

A stage's output is a list of :class:`Expansion`: the query as a lexical (BM25) retriever sees it and as a
dense retriever sees it. HyDE (Gao et al., 2022) writes a hypothetical answer passage: the dense query *is*
that passage, and BM25 gets the question with the passage appended. query2doc (Wang et al., 2023) writes the
same pseudo-document (the same prompt, so one cached generation serves both) but keeps the question's weight
for BM25 by repeating it five times before the passage, and gives dense retrieval ``question passage``.
Multi-query writes N paraphrases and decomposition N sub-questions: the original query and each new one are
retrieved separately and their rankings fused (RRF by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Longest query text handed to a retriever (the R service refuses more than ``max_query_chars``, 4,096).
MAX_QUERY_TEXT = 4_000
#: Longest single generated query or passage kept.
MAX_LINE_CHARS = 400
MAX_PASSAGE_CHARS = 2_000

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Expansion:
    """One query to retrieve: ``text`` (what later stages rewrite), ``lexical`` for BM25, ``dense`` for
    dense retrievers."""

    text: str
    lexical: str
    dense: str

    @classmethod
    def of(cls, text: str) -> Expansion:
        return cls(text, text, text)


@dataclass(frozen=True)
class QueryStageDef:
    """A query stage: the prompt it sends (``system``, ``user`` with ``{query}`` and ``{n}``), whether it
    writes a list of queries (``lines``) or one passage, and ``max_tokens`` it may write."""

    name: str
    system: str
    user: str
    lines: bool
    max_tokens: int
    default_n: int = 3

    def messages(self, query: str, n: int) -> Messages:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user.format(query=query, n=n)},
        ]

    def parse(self, raw: str, query: str, n: int) -> list[str]:
        """The generated queries (``lines``) or the passage, cleaned; possibly empty."""
        text = re.sub(r"<think>.*?</think>", " ", raw, flags=re.DOTALL).strip()
        if not self.lines:
            passage = " ".join(text.split())[:MAX_PASSAGE_CHARS]
            return [passage] if passage else []
        seen = {_norm(query)}
        out: list[str] = []
        for line in text.splitlines():
            line = _BULLET.sub("", line).strip().strip("\"“”'").strip()
            line = " ".join(line.split())[:MAX_LINE_CHARS]
            if len(line) < 3 or _norm(line) in seen or line.endswith(":"):
                continue
            seen.add(_norm(line))
            out.append(line)
            if len(out) == n:
                break
        return out

    def expand(self, current: Expansion, generated: list[str]) -> list[Expansion]:
        """The queries to retrieve after this stage, from one incoming query and what was written for it."""
        if self.lines:
            return [current] + [Expansion.of(q) for q in generated]
        if not generated:
            return [current]
        passage = generated[0]
        if self.name == "query2doc":
            repeats = max(1, min(5, (MAX_QUERY_TEXT - len(passage)) // (len(current.lexical) + 1)))
            lexical = " ".join([current.lexical] * repeats + [passage])
            return [Expansion(current.text, lexical[:MAX_QUERY_TEXT], f"{current.dense} {passage}"[:MAX_QUERY_TEXT])]
        return [Expansion(current.text, f"{current.lexical} {passage}"[:MAX_QUERY_TEXT], passage)]


_BULLET = re.compile(r"^\s*(?:[-*•]|\(?\d{1,2}[.):]|q\d{1,2}[.):]?)\s*", re.IGNORECASE)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_PASSAGE_SYSTEM = "You write short, factual encyclopedia passages."
_PASSAGE_USER = "Write a passage of 3 to 5 sentences that answers the question.\nQuestion: {query}\nPassage:"

HYDE = QueryStageDef("hyde", _PASSAGE_SYSTEM, _PASSAGE_USER, lines=False, max_tokens=160)
QUERY2DOC = QueryStageDef("query2doc", _PASSAGE_SYSTEM, _PASSAGE_USER, lines=False, max_tokens=160)
MULTIQUERY = QueryStageDef(
    "multiquery",
    "You rewrite search queries.",
    "Write {n} different search queries that ask for the same information as the query below. "
    "Write one query per line and nothing else.\nQuery: {query}\nQueries:",
    lines=True,
    max_tokens=160,
)
DECOMPOSE = QueryStageDef(
    "decompose",
    "You break complex questions into simple ones.",
    "Break the question below into at most {n} simpler sub-questions that together answer it. "
    "Write one sub-question per line and nothing else.\nQuestion: {query}\nSub-questions:",
    lines=True,
    max_tokens=160,
    default_n=3,
)


#: The LLM compressor's task: which numbered sentences of a segment help answer the query.
SELECT_MAX_TOKENS = 48
MAX_SELECT_SENTENCES = 60


def select_messages(query: str, sentences: list[str]) -> Messages:
    listing = "\n".join(f"[{i + 1}] {' '.join(s.split())[:600]}" for i, s in enumerate(sentences))
    return [
        {"role": "system", "content": "You select evidence. Answer with sentence numbers only."},
        {
            "role": "user",
            "content": f"Question: {query}\n\nSentences:\n{listing}\n\n"
            "Which sentences help answer the question? Answer with their numbers, "
            "separated by commas, and nothing else.",
        },
    ]


def parse_selection(raw: str, count: int) -> list[int]:
    """0-based indices of the sentences the model named (numbers outside 1..count are ignored)."""
    return sorted({int(n) - 1 for n in re.findall(r"\d{1,3}", raw) if 1 <= int(n) <= count})
