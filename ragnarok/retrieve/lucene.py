"""BM25, BM25+Rocchio and BM25+RM3 over a Lucene index with pyserini.

Each retriever owns its own ``LuceneSearcher``, configured once when it is first used: no shared searcher is
ever switched between models. Candidate text comes from the stored raw JSON of each hit.
"""

from __future__ import annotations

import html
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic_core import to_json

from ragnarok.collection.lucene_index import is_lucene_index
from ragnarok.java import import_pyserini_search
from ragnarok.retrieve.anserini import LuceneSearcher
from ragnarok.types import Candidate, Doc, Query, Request

Feedback = Literal["none", "rocchio", "rm3"]
DOC_FIELDS = ("segment", "title", "url", "headings", "start_char", "end_char")
DOC_CACHE_BYTES = 256 << 20  # serialised ``doc`` fragments kept per retriever (then no more are added)


class IndexNotFoundError(FileNotFoundError):
    pass


@dataclass(frozen=True)
class BM25Params:
    """Anserini's defaults: k1=0.9, b=0.4; feedback parameters as in Anserini's regressions."""

    k1: float = 0.9
    b: float = 0.4
    fb_terms: int = 10
    fb_docs: int = 10
    rm3_original_query_weight: float = 0.5
    rocchio_alpha: float = 1.0
    rocchio_beta: float = 0.75


_TAG = re.compile(r"<[^>]+>")


def doc_from_raw(raw: str | None) -> Doc:
    """A candidate's ``doc`` from a stored raw document: our segment JSON, any JSON, HTML (tags removed,
    as for CACM), or plain text."""
    if not raw:
        return Doc()
    try:
        data: Any = json.loads(raw)
    except ValueError:
        if raw.lstrip()[:5].lower() == "<html":
            return Doc(segment=html.unescape(_TAG.sub("", raw)).strip())
        return Doc(segment=raw)
    if not isinstance(data, dict):
        return Doc(segment=raw)
    fields = {key: data[key] for key in DOC_FIELDS if key in data}
    if "segment" not in fields:
        fields["segment"] = data.get("contents", data.get("body", data.get("text", "")))
    return Doc(**fields)


@dataclass
class LuceneRetriever:
    """A Lucene index searched with BM25 and optional pseudo-relevance feedback."""

    name: str
    source: str  # an index directory, or "prebuilt:NAME"
    feedback: Feedback = "none"
    params: BM25Params = field(default_factory=BM25Params)
    doc_cache_bytes: int = DOC_CACHE_BYTES
    _searcher: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # docid -> the candidate's ``doc`` as JSON bytes (what ``Doc.model_dump_json(exclude_unset=True)`` writes):
    # a hit seen before costs no stored-field read, no JSON parse and no pydantic model
    _docs: dict[str, bytes] = field(default_factory=dict, init=False, repr=False)
    _docs_bytes: int = field(default=0, init=False, repr=False)

    def _load(self) -> Any:
        with self._lock:
            if self._searcher is None:
                if self.source.startswith("prebuilt:"):
                    lucene = import_pyserini_search()  # pyserini downloads prebuilt indexes (and imports torch)
                    name = self.source.removeprefix("prebuilt:")
                    try:
                        searcher = lucene.LuceneSearcher.from_prebuilt_index(name)
                    except Exception as exc:  # noqa: BLE001 - pyserini raises bare Exceptions here
                        raise IndexNotFoundError(
                            f"prebuilt index {name!r} is not available (downloaded on first use, which needs "
                            f"the network): {str(exc)[:200]}") from None
                    if searcher is None:
                        raise IndexNotFoundError(f"prebuilt index {name!r} is not known to pyserini")
                else:
                    if not is_lucene_index(Path(self.source)):
                        raise IndexNotFoundError(f"no Lucene index at {self.source}")
                    searcher = LuceneSearcher(self.source)  # Anserini's searcher alone: no torch
                p = self.params
                searcher.set_bm25(p.k1, p.b)
                if self.feedback == "rm3":
                    searcher.set_rm3(p.fb_terms, p.fb_docs, p.rm3_original_query_weight)
                elif self.feedback == "rocchio":
                    searcher.set_rocchio(
                        top_fb_terms=p.fb_terms, top_fb_docs=p.fb_docs, alpha=p.rocchio_alpha, beta=p.rocchio_beta
                    )
                self._searcher = searcher
        return self._searcher

    def warm_up(self) -> None:
        self._load()

    def search(self, text: str, k: int) -> list[tuple[str, float, Any]]:
        """Raw hits ``(docid, score, lucene_document)``."""
        hits = self._load().search(text, k)
        return [(h.docid, h.score, h.lucene_document) for h in hits]

    def retrieve(self, query: Query, k: int) -> Request:
        candidates = [
            Candidate(docid=docid, score=score, doc=doc_from_raw(document.get("raw")))
            for docid, score, document in self.search(query.text, k)
        ]
        return Request(query=query, candidates=candidates)

    def _doc_json(self, docid: str, document: Any) -> bytes:
        fragment = self._docs.get(docid)
        if fragment is None:
            fragment = doc_from_raw(document.get("raw")).model_dump_json(exclude_unset=True).encode()
            if self._docs_bytes + len(fragment) <= self.doc_cache_bytes:
                self._docs[docid] = fragment
                self._docs_bytes += len(fragment) + len(docid)
        return fragment

    def retrieve_json(self, query: Query, k: int) -> bytes:
        """``retrieve(query, k)`` serialised, byte for byte what ``Request.model_dump_json(exclude_unset=True)``
        writes (tests/test_lucene.py), built from cached ``doc`` fragments."""
        parts = [b'{"query":', query.model_dump_json(exclude_unset=True).encode(), b',"candidates":[']
        # every hit's fields are read first, as ``search`` does: reading them interleaved with the stored
        # documents crashed the JVM (SIGSEGV in Document.get) with 16 threads searching at once
        for n, (docid, score, document) in enumerate(self.search(query.text, k)):
            parts += (b',{"docid":' if n else b'{"docid":', to_json(docid), b',"score":', to_json(score),
                      b',"doc":', self._doc_json(docid, document), b"}")
        parts.append(b"]}")
        return b"".join(parts)

    def batch_search(self, queries: dict[str, str], k: int, threads: int = 2) -> dict[str, list[tuple[str, float]]]:
        """Many queries at once (for TREC runs), with Anserini's own thread pool."""
        qids = list(queries)
        results = self._load().batch_search([queries[q] for q in qids], qids, k, threads)
        return {qid: [(h.docid, h.score) for h in results.get(qid, [])] for qid in qids}
