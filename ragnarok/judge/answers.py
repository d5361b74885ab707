"""RAG answers to judge, read from a run file in our 2024 or 2025 format (which are the track's), or
nuggetizer's answer shape (``{"topic_id", "answer": [{"text"}]}``); and the text of the segments they cite."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragnarok.judge.nuggets import json_lines
from ragnarok.track.formats import record_topic

if TYPE_CHECKING:
    from ragnarok.stages.retrieve.lucene import LuceneRetriever


@dataclass(frozen=True)
class Answer:
    qid: str
    query: str
    sentences: list[tuple[str, list[int]]]  # (text, indices into references)
    references: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(text for text, _ in self.sentences).strip()


def _answer(record: object, where: str) -> Answer:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object")
    qid = record_topic(record)
    if qid is None:
        raise ValueError(f"{where}: no topic_id (2024) or metadata.narrative_id (2025)")
    meta = record.get("metadata")
    query = meta.get("narrative", "") if isinstance(meta, dict) else record.get("topic", "")
    body = record.get("answer")
    if isinstance(body, str):
        body = [{"text": body}]
    if not isinstance(body, list):
        raise ValueError(f"{where}: 'answer' must be a list of {{text, citations}}")
    sentences = []
    for item in body:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise ValueError(f"{where}: every answer sentence needs a 'text'")
        citations = [c for c in item.get("citations", []) if isinstance(c, int) and not isinstance(c, bool)]
        sentences.append((item["text"], citations))
    references = [str(r) for r in record.get("references", [])]
    return Answer(str(qid), str(query or ""), sentences, references)


def read_answers(path: str | Path) -> dict[str, Answer]:
    return answers_from(json_lines(path))


def answers_from(records: Iterable[tuple[str, object]]) -> dict[str, Answer]:
    """``(where, record)`` pairs (a record: one line of a run file, or ``RagAnswer.model_dump()``) as answers by
    topic id; a topic answered twice is a ValueError naming where."""
    out: dict[str, Answer] = {}
    for where, record in records:
        answer = _answer(record, where)
        if answer.qid in out:
            raise ValueError(f"{where}: topic {answer.qid} answered twice")
        out[answer.qid] = answer
    return out


SegmentText = Callable[[str], "str | None"]


STYLES = ("title segment", "segment", "title: segment")


def lucene_segments(index_dir: str | Path, style: str = "title segment") -> SegmentText:
    """docid -> the segment's text from a Lucene index, None when the index lacks it. ``style``: ``title
    segment`` (the title, a space, the segment: ours), ``segment`` (the segment alone: UMBRELA's passages) or
    ``title: segment`` (TREC 2024's support evaluation)."""
    from ragnarok.stages.retrieve.lucene import LuceneRetriever

    return retriever_segments(LuceneRetriever(name="bm25", source=str(index_dir)), style)


def retriever_segments(retriever: LuceneRetriever, style: str = "title segment") -> SegmentText:
    """:func:`lucene_segments` over a retriever already open (the API's)."""
    from ragnarok.stages.retrieve.lucene import doc_from_raw

    if style not in STYLES:
        raise ValueError(f"unknown segment style {style!r} ({', '.join(STYLES)})")

    def text(docid: str) -> str | None:
        document = retriever._load().doc(docid)
        if document is None:
            return None
        doc = doc_from_raw(document.raw())
        if style == "segment":
            return doc.segment or None
        if style == "title: segment" and doc.title and doc.segment:
            return f"{doc.title}: {doc.segment}"
        return " ".join(part for part in (doc.title, doc.segment) if part) or None

    return text
