"""Anserini's ``SimpleSearcher`` over a local Lucene index, without importing ``pyserini.search``.

``pyserini.search.lucene`` imports pyserini's query encoders, and with them torch, transformers and sklearn
(about 8 s and over 1 GB of memory) before the first BM25 query. What BM25, Rocchio and RM3 need is the Java
searcher, so this module calls it directly, with the same arguments pyserini's ``LuceneSearcher`` passes (the
CACM regression in tests/test_cacm.py checks the scores). Prebuilt indexes still go through pyserini, which
knows how to download them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragnarok.java import start_jvm


class Document:
    """A stored Lucene document, with the accessors of pyserini's ``Document`` that we use."""

    def __init__(self, document: Any):
        self.object = document

    def docid(self) -> str:
        return str(self.object.getField("id").stringValue())

    def raw(self) -> str | None:
        return self.object.get("raw")

    def contents(self) -> str | None:
        return self.object.get("contents")


class LuceneSearcher:
    """The subset of pyserini's ``LuceneSearcher`` this project uses, on ``io.anserini.search.SimpleSearcher``."""

    def __init__(self, index_dir: str | Path):
        start_jvm()
        from jnius import autoclass  # noqa: PLC0415 - needs the JVM

        self.index_dir = str(index_dir)
        self.object = autoclass("io.anserini.search.SimpleSearcher")(self.index_dir)
        self.num_docs = int(self.object.get_total_num_docs())

    def _has_docvectors(self) -> bool:
        return bool(self.num_docs) and self.object.reader.getTermVectors(0) is not None

    def set_bm25(self, k1: float = 0.9, b: float = 0.4) -> None:
        self.object.set_bm25(float(k1), float(b))

    def set_rm3(self, fb_terms: int = 10, fb_docs: int = 10, original_query_weight: float = 0.5) -> None:
        if not self._has_docvectors():
            raise TypeError("RM3 needs an index with document vectors (-storeDocvectors)")
        self.object.set_rm3(None, int(fb_terms), int(fb_docs), float(original_query_weight), False, True)

    def set_rocchio(self, top_fb_terms: int = 10, top_fb_docs: int = 10, alpha: float = 1.0,
                    beta: float = 0.75) -> None:
        if not self._has_docvectors():
            raise TypeError("Rocchio needs an index with document vectors (-storeDocvectors)")
        # bottom terms/docs 10/10 and gamma 0 (no negative feedback): pyserini's defaults
        self.object.set_rocchio(None, int(top_fb_terms), int(top_fb_docs), 10, 10, float(alpha), float(beta),
                                0.0, False, False)

    def search(self, q: str, k: int = 10) -> list[Any]:
        """Anserini ``ScoredDoc`` hits: ``.docid``, ``.score``, ``.lucene_document``."""
        return list(self.object.search(q, int(k)))

    def batch_search(self, queries: list[str], qids: list[str], k: int = 10, threads: int = 1) -> dict[str, Any]:
        from jnius import autoclass  # noqa: PLC0415

        array_list = autoclass("java.util.ArrayList")
        query_strings, qid_strings = array_list(), array_list()
        for query in queries:
            query_strings.add(query)
        for qid in qids:
            qid_strings.add(qid)
        results = self.object.batch_search(query_strings, qid_strings, int(k), int(threads))
        return {entry.getKey(): entry.getValue() for entry in results.entrySet().toArray()}

    def doc(self, docid: str | int) -> Document | None:
        """The stored document of an external docid (``str``) or an internal Lucene id (``int``)."""
        document = self.object.doc(docid)
        return None if document is None else Document(document)

    def close(self) -> None:
        self.object.close()
