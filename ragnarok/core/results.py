"""What the Python API returns, as the plain containers they always were (a ranking is still ``{qid: {docid:
score}}``), each with ``to_pandas()`` for a researcher to join, filter and plot. pandas is imported only there.

- :class:`Ranking`: ``ragnarok.search``'s run; rows ``qid, docid, rank, score``.
- :class:`Answers`: ``ragnarok.run``'s answers by topic id; a row per sentence ``qid, topic, sentence, text,
  citations, cited`` (``citations``: indices into the answer's references; ``cited``: those segment ids).
- :class:`Topics`: ``ragnarok.load_topics``'s list; rows ``qid, text``.
- :class:`Qrels`: ``ragnarok.load_qrels``'s judgments; rows ``qid, docid, grade``.
- :class:`TopicsFailed`: some topics failed after their retries; ``results`` holds the others.
"""

from __future__ import annotations

from typing import Any

from ragnarok.core.topics import Topic
from ragnarok.core.types import RagAnswer


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> Any:
    import pandas as pd  # noqa: PLC0415 - only for a caller who asks for a DataFrame

    return pd.DataFrame(rows, columns=columns)


class Ranking(dict[str, dict[str, float]]):
    """``{qid: {docid: score}}``, each topic's hits best first."""

    def to_pandas(self) -> Any:
        rows = [
            {"qid": qid, "docid": docid, "rank": rank, "score": score}
            for qid, hits in self.items()
            for rank, (docid, score) in enumerate(sorted(hits.items(), key=lambda h: -h[1]), 1)
        ]
        return _frame(rows, ["qid", "docid", "rank", "score"])


class Answers(dict[str, RagAnswer]):
    """``{qid: RagAnswer}`` in the topics' order."""

    def to_pandas(self) -> Any:
        rows = [
            {
                "qid": qid,
                "topic": answer.topic,
                "sentence": n,
                "text": s.text,
                "citations": list(s.citations),
                "cited": [answer.references[c] for c in s.citations if 0 <= c < len(answer.references)],
            }
            for qid, answer in self.items()
            for n, s in enumerate(answer.answer)
        ]
        return _frame(rows, ["qid", "topic", "sentence", "text", "citations", "cited"])


class Topics(list[Topic]):
    """Topics in their file's order."""

    def to_pandas(self) -> Any:
        return _frame([{"qid": t.qid, "text": t.text} for t in self], ["qid", "text"])


class Qrels(dict[str, dict[str, int]]):
    """``{qid: {docid: grade}}``."""

    def to_pandas(self) -> Any:
        rows = [
            {"qid": qid, "docid": docid, "grade": grade} for qid, docs in self.items() for docid, grade in docs.items()
        ]
        return _frame(rows, ["qid", "docid", "grade"])


class TopicsFailed(RuntimeError):
    """Some topics failed after their retries: ``failures`` names each one (``.qid``, and why), ``results``
    holds the others (a :class:`Ranking` or :class:`Answers`)."""

    def __init__(self, failures: list[Any], results: Any):
        self.failures, self.results = failures, results
        names = ", ".join(f.qid for f in failures[:20]) + (
            f" and {len(failures) - 20} more" if len(failures) > 20 else ""
        )
        super().__init__(f"{len(failures)} topics failed ({names}); the first: {failures[0]}")
