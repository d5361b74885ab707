"""Anserini's ``SimpleSearcher`` over a local Lucene index, without importing ``pyserini.search``.

``pyserini.search.lucene`` imports pyserini's query encoders, and with them torch, transformers and sklearn
(about 8 s and over 1 GB of memory) before the first BM25 query. What BM25, Rocchio and RM3 need is the Java
searcher, so this module calls it directly, with the same arguments pyserini's ``LuceneSearcher`` passes (the
CACM regression in tests/test_cacm.py checks the scores). Prebuilt indexes still go through pyserini, which
knows how to download them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.core.java import start_jvm

Hit = tuple[int, float, str]  # (Lucene docid, score, docid)
FIELD = "contents"  # the field Anserini searches (io.anserini.index.Constants.CONTENTS)


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
        self.rocchio: RocchioSearch | None = None

    def _has_docvectors(self) -> bool:
        return bool(self.num_docs) and self.object.reader.getTermVectors(0) is not None

    def set_bm25(self, k1: float = 0.9, b: float = 0.4) -> None:
        self.object.set_bm25(float(k1), float(b))

    def set_rm3(self, fb_terms: int = 10, fb_docs: int = 10, original_query_weight: float = 0.5) -> None:
        if not self._has_docvectors():
            raise TypeError("RM3 needs an index with document vectors (-storeDocvectors)")
        self.object.set_rm3(None, int(fb_terms), int(fb_docs), float(original_query_weight), False, True)

    def set_rocchio(
        self, top_fb_terms: int = 10, top_fb_docs: int = 10, alpha: float = 1.0, beta: float = 0.75
    ) -> None:
        if not self._has_docvectors():
            raise TypeError("Rocchio needs an index with document vectors (-storeDocvectors)")
        # bottom terms/docs 10/10 and gamma 0 (no negative feedback): pyserini's defaults
        args = (None, int(top_fb_terms), int(top_fb_docs), 10, 10, float(alpha), float(beta), 0.0, False, False)
        self.object.set_rocchio(*args)
        # a Lucene 8 index: Anserini breaks score ties arbitrarily there, so its own search path is kept
        self.rocchio = None if self.object.backwardsCompatibilityLucene8 else RocchioSearch(self.object, args)

    def hits(self, q: str, k: int) -> list[Hit]:
        """The top ``k`` of one query, as :func:`search_hits` gives them (through :class:`RocchioSearch` when
        Rocchio is set: the same hits and scores, at less cost)."""
        return self.rocchio.hits(q, k) if self.rocchio is not None else search_hits(self.object, q, k)

    def search(self, q: str, k: int = 10) -> list[Any]:
        """Anserini ``ScoredDoc`` hits: ``.docid``, ``.score``, ``.lucene_document``."""
        return list(self.object.search(q, int(k)))

    def doc(self, docid: str | int) -> Document | None:
        """The stored document of an external docid (``str``) or an internal Lucene id (``int``)."""
        document = self.object.doc(docid)
        return None if document is None else Document(document)

    def close(self) -> None:
        self.object.close()


class RocchioSearch:
    """Anserini's Rocchio search of one query, its own Java parts called in the order ``SimpleSearcher`` calls
    them, with one change: the first-round search asks for the feedback documents only (the top
    ``min(k, fbDocs)``: what the Rocchio reranker reads of it; negative feedback is off), not for all ``k``
    hits, whose stored documents Anserini reads and never uses. Hits and scores are Anserini's own
    (tests/test_rocchio_search.py compares them on the CACM and demo topics); docs/BENCHMARKS.md has the cost.
    """

    def __init__(self, simple: Any, args: tuple[Any, ...]):
        """``simple``: a Java ``SimpleSearcher`` with BM25 set; ``args``: what its ``set_rocchio`` was given."""
        from jnius import autoclass  # noqa: PLC0415 - needs the JVM

        self.analyzer = simple.get_analyzer()
        self.fb_docs = int(args[2])
        self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(simple.reader)
        self.searcher.setSimilarity(simple.get_similarity())
        self.reranker = autoclass("io.anserini.rerank.lib.RocchioReranker")(self.analyzer, None, FIELD, *args[1:])
        self.ties = autoclass("io.anserini.rerank.lib.ScoreTiesAdjusterReranker")()
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.analyze = autoclass("io.anserini.analysis.AnalyzerUtils").analyze
        self.search_args = autoclass("io.anserini.search.SearchCollection$Args")
        self.context = autoclass("io.anserini.rerank.RerankerContext")
        self.scored_docs = autoclass("io.anserini.search.ScoredDocs").fromTopDocs
        self.by_docid = autoclass("io.anserini.search.SearchCollection").BREAK_SCORE_TIES_BY_DOCID

    def hits(self, q: str, k: int) -> list[Hit]:
        query = self.generator.buildQuery(FIELD, self.analyzer, q)
        args = self.search_args()
        args.hits = int(k)
        context = self.context(self.searcher, None, query, None, q, self.analyze(self.analyzer, q), None, args)
        first = self.searcher.search(query, max(1, min(int(k), self.fb_docs)), self.by_docid, True)
        docs = self.ties.rerank(self.reranker.rerank(self.scored_docs(first, self.searcher), context), context)
        return list(zip(docs.lucene_docids, docs.scores, docs.docids, strict=True))


def _rows(hits: Any) -> list[Hit]:
    """Anserini ``ScoredDoc`` objects (one JNI call per field) as tuples."""
    return [(hit.lucene_docid, hit.score, hit.docid) for hit in hits or []]


def search_hits(searcher: Any, q: str, k: int) -> list[Hit]:
    """The top ``k`` of one query on a Java ``SimpleSearcher`` (ours or pyserini's ``.object``)."""
    return _rows(searcher.search(q, int(k)))


_mapper: Any = None
_mapper_lock = threading.Lock()


def _json_mapper() -> Any:
    """Anserini's own Jackson ``ObjectMapper``, told to leave each hit's stored ``Document`` out; ``False``
    when the jar has no Jackson (then hits are read one JNI call at a time)."""
    global _mapper  # noqa: PLW0603 - one per JVM, made on first use
    with _mapper_lock:
        if _mapper is None:
            from jnius import JavaException, autoclass  # noqa: PLC0415

            try:
                mapper = autoclass("com.fasterxml.jackson.databind.ObjectMapper")()
                # Boolean("true"): a Python True would be passed as an Integer
                mapper.configOverride(autoclass("org.apache.lucene.document.Document")).setIsIgnoredType(
                    autoclass("java.lang.Boolean")("true")
                )
                _mapper = mapper
            except JavaException:
                _mapper = False
        return _mapper


def batch_search_hits(searcher: Any, queries: list[str], k: int, threads: int) -> list[list[Hit]]:
    """The top ``k`` of each query, searched by Anserini's ``batch_search`` on ``threads`` Java threads.

    pyjnius turns every returned hit into a Python object while holding the GIL (about a millisecond per 100
    hits: a quarter of a loaded server's GIL time); Jackson writes the whole result as one JSON
    string in Java instead. Its scores are the float32 values' shortest decimals, read back as the same
    float32 values, so the hits equal :func:`search_hits`' (tests/test_batcher.py)."""
    from jnius import autoclass  # noqa: PLC0415

    array_list = autoclass("java.util.ArrayList")
    texts, qids = array_list(), array_list()
    for n, query in enumerate(queries):
        texts.add(query)
        qids.add(str(n))
    results = searcher.batch_search(texts, qids, int(k), int(threads))
    mapper = _json_mapper()
    if not mapper:
        by_qid = {entry.getKey(): entry.getValue() for entry in results.entrySet().toArray()}
        return [_rows(by_qid.get(str(n))) for n in range(len(queries))]
    by_qid = json.loads(mapper.writeValueAsString(results))
    out = []
    for n in range(len(queries)):
        rows = by_qid.get(str(n)) or []
        scores = np.array([row["score"] for row in rows], dtype=np.float32).tolist()
        out.append([(row["lucene_docid"], score, row["docid"]) for row, score in zip(rows, scores)])
    return out
