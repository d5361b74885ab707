"""BM25, BM25+Rocchio and BM25+RM3 over a Lucene index with pyserini.

Each retriever owns its own ``LuceneSearcher``, configured once when it is first used: no shared searcher is
ever switched between models. Candidate text comes from the stored raw JSON of each hit.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic_core import to_json

from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.runtime import metrics
from ragnarok.runtime.index_files import is_lucene_index
from ragnarok.stages.retrieve.anserini import Hit, LuceneSearcher, batch_search_hits
from ragnarok.stages.retrieve.batcher import SearchBatcher

Feedback = Literal["none", "rocchio", "rm3"]
DOC_FIELDS = ("segment", "title", "url", "headings", "start_char", "end_char")
DOC_CACHE_BYTES = 256 << 20  # serialised candidate fragments kept per retriever (then no more are added)


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
    return doc_from_fields(data)


def _offset(value: Any) -> int | None:
    """A character offset as Anserini may write it: an integer, or its digits as a string (its REST server's
    parsed documents); anything else is left out."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def doc_from_fields(data: dict[str, Any]) -> Doc:
    """A candidate's ``doc`` from a stored document's fields (our segments', V2.1's, Anserini's ``contents``)."""
    fields = {key: data[key] for key in DOC_FIELDS if key in data}
    for key in ("start_char", "end_char"):
        if key in fields:
            offset = _offset(fields.pop(key))
            if offset is not None:
                fields[key] = offset
    for key in ("segment", "title", "url", "headings"):
        if key in fields and not isinstance(fields[key], str):
            del fields[key]
    if "segment" not in fields:
        text = data.get("contents", data.get("body", data.get("text", "")))
        fields["segment"] = text if isinstance(text, str) else ""
    return Doc(**fields)


@dataclass
class LuceneRetriever:
    """A Lucene index searched with BM25 and optional pseudo-relevance feedback."""

    name: str
    source: (
        str  # an index directory, or "prebuilt:NAME" (a catalogue name, unpacked in prebuilt_dir or pyserini's cache)
    )
    feedback: Feedback = "none"
    params: BM25Params = field(default_factory=BM25Params)
    doc_cache_bytes: int = DOC_CACHE_BYTES
    search_threads: int = 2  # Java threads of one of the batcher's batch_search calls
    max_batch: int = 32  # queries the batcher sends to one batch_search at the most
    prebuilt_dir: str | Path | None = None  # where prebuilt indexes are unpacked (RAGNAROK_PREBUILT_DIR)
    _searcher: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # Lucene docid -> the candidate's JSON around its score (see ``_json``)
    _docs: dict[int, tuple[bytes, bytes]] = field(default_factory=dict, init=False, repr=False)
    _docs_bytes: int = field(default=0, init=False, repr=False)
    _batch: SearchBatcher | None = field(default=None, init=False, repr=False)
    # not ``_lock``: that one is held while the searcher loads (seconds, starting the JVM), and ``submit_json``
    # runs on the event loop
    _batch_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def _load(self) -> Any:
        if self._searcher is not None:
            return self._searcher
        with self._lock:
            if self._searcher is None:
                directory = self.source
                if self.source.startswith("prebuilt:"):  # unpacked here, or a PrebuiltMissing at once
                    from ragnarok.stages.retrieve.prebuilt import resolve  # noqa: PLC0415

                    directory = str(
                        resolve(
                            self.source.removeprefix("prebuilt:"),
                            Path(self.prebuilt_dir) if self.prebuilt_dir else None,
                        )
                    )
                elif not is_lucene_index(Path(self.source)):
                    raise IndexNotFoundError(f"no Lucene index at {self.source}")
                searcher = LuceneSearcher(directory)  # Anserini's searcher alone: no torch
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
        """Stored fields read by Lucene docid through the searcher, after the search, as :meth:`_json` does:
        walking each hit's ``Document`` object from several threads gives wrong documents (pyjnius mixes up
        objects of one class across threads; docs/BENCHMARKS.md)."""
        searcher = self._load()
        candidates = [
            Candidate(docid=docid, score=score, doc=doc_from_raw(searcher.object.doc_raw(number)))
            for number, score, docid in searcher.hits(query.text, k)
        ]
        return Request(query=query, candidates=candidates)

    def _json(self, query_json: bytes, hits: Sequence[Hit], head: bytes = b'{"query":', ranks: bool = False) -> bytes:
        """The answer's JSON from each hit's cached fragments around its score, ``b'{"docid":...,"score":'`` and
        ``b',"doc":{...}}'``, keyed by Lucene docid: a hit seen before costs no stored-field read, no JSON parse
        and no pydantic model. Stored documents are read after the search, by Lucene docid (reading each hit's
        stored document while walking the hits crashed the JVM, SIGSEGV in Document.get, with 16 threads)."""
        docs = self._docs
        entries = [docs.get(number) for number, _, _ in hits]
        misses = 0
        for row, entry in enumerate(entries):
            if entry is None:
                misses += 1
                number, _, docid = hits[row]
                doc = doc_from_raw(self._load().object.doc_raw(number)).model_dump_json(exclude_unset=True).encode()
                entries[row] = entry = (b'{"docid":' + to_json(docid) + b',"score":', b',"doc":' + doc + b"}")
                size = len(entry[0]) + len(entry[1]) + 64
                if self._docs_bytes + size <= self.doc_cache_bytes:
                    docs[number] = entry
                    self._docs_bytes += size
        metrics.cache_lookups("segment_json", len(entries) - misses, misses)
        if ranks:  # Anserini's REST shape: each candidate's rank after its score
            body = b",".join(
                entry[0] + to_json(score) + b',"rank":' + b"%d" % rank + entry[1]  # type: ignore[index]
                for rank, (entry, (_, score, _)) in enumerate(zip(entries, hits, strict=True), 1)
            )
        else:
            body = b",".join(
                entry[0] + to_json(score) + entry[1]  # type: ignore[index]
                for entry, (_, score, _) in zip(entries, hits, strict=True)
            )
        return head + query_json + b',"candidates":[' + body + b"]}"

    def retrieve_json(self, query: Query, k: int) -> bytes:
        """``retrieve(query, k)`` serialised, byte for byte what ``Request.model_dump_json(exclude_unset=True)``
        writes (tests/test_lucene.py), built from cached per-segment fragments."""
        return self._json(query.model_dump_json(exclude_unset=True).encode(), self._load().hits(query.text, k))

    def submit_json(self, query: Query, k: int) -> Future[bytes]:
        """``retrieve_json(query, k)`` as a future, searched together with the queries submitted meanwhile
        (:class:`~ragnarok.stages.retrieve.batcher.SearchBatcher`): what ``POST /v1/retrieve`` awaits."""
        query_json = query.model_dump_json(exclude_unset=True).encode()
        return self._batcher().submit(query.text, k, lambda hits: self._json(query_json, hits))

    def submit_anserini_json(self, query: Query, k: int, index: str) -> Future[bytes]:
        """What Anserini's RestServer answers ``GET /v1/{index}/search``, ``{"api": "v1", "index", "query":
        {"text"}, "candidates": [{"docid", "score", "rank", "doc"}]}``, from the same cached fragments."""
        head = b'{"api":"v1","index":' + to_json(index) + b',"query":'
        query_json = to_json({"text": query.text, **({"qid": query.qid} if query.qid != "" else {})})
        return self._batcher().submit(query.text, k, lambda hits: self._json(query_json, hits, head, ranks=True))

    def raw_doc(self, docid: str) -> str | None:
        """A segment's stored raw document (Anserini's ``doc/{docid}`` with ``parse=false``), or None."""
        return self._load().object.doc_raw(docid)

    def _batcher(self) -> SearchBatcher:
        with self._batch_lock:
            if self._batch is None:
                self._batch = SearchBatcher(
                    lambda text, k: self._load().hits(text, k),
                    lambda texts, k: batch_search_hits(self._load().object, texts, k, self.search_threads),
                    workers=2,
                    max_batch=self.max_batch,
                    name=self.name,
                )
            return self._batch

    def close(self) -> None:
        """Stop the batcher's threads (the searcher stays usable in this thread)."""
        with self._batch_lock:
            if self._batch is not None:
                self._batch.close()

    def batch_search(self, queries: dict[str, str], k: int, threads: int = 2) -> dict[str, list[tuple[str, float]]]:
        """Many queries at once (for TREC runs), with Anserini's own thread pool."""
        qids = list(queries)
        hits = batch_search_hits(self._load().object, [queries[q] for q in qids], k, threads)
        return {qid: [(docid, score) for _, score, docid in rows] for qid, rows in zip(qids, hits, strict=True)}
