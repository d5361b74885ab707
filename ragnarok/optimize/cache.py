"""The stage cache that makes trials cheap: a stage's output for the same input is computed once.

* Retrieval: one ranking per (index, retriever with its arguments, query text), kept compact (docids and
  scores; each document's fields once per process) and served for any depth up to the one computed. In
  memory, a ranking also keeps its candidates once built (the objects the runner hands on), so a warm trial
  builds none; a fused ranking (``cc(bm25, dense:minilm)@1000``) is kept in memory as it was fused.
* Every other service call (rerank, generate, write, segments) by its exact request body: the same
  candidates, the same reranker or generator and template give the stored answer.

Each entry keeps the time the stage took when it ran, which the trial reports as the stage's seconds (a cached
trial still says how slow its pipeline is). In memory per process (LRU, ``memory_mb``), and optionally in a
SQLite file shared by runs and by the workers of one machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import httpx

from ragnarok.core.spec import Fusion, Node, Source
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.service.gateway import PipelineRunner, Services, _fuse
from ragnarok.stages.query.stages import Expansion


class StageCache:
    def __init__(self, memory_mb: int = 1024, disk: str | Path | None = None):
        self.capacity = memory_mb * 1024 * 1024
        self.enabled = memory_mb > 0 or disk is not None
        self._memory: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.docs: dict[tuple[str, str], Doc] = {}
        self.hits = self.misses = 0
        self._db: sqlite3.Connection | None = None
        if disk is not None:
            Path(disk).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(disk), timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # a cache: a lost last write is recomputed
            self._db.execute("CREATE TABLE IF NOT EXISTS stage (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            self._db.commit()

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                self.hits += 1
                return self._memory[key][0]
            if self._db is not None:
                row = self._db.execute("SELECT value FROM stage WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    self.hits += 1
                    value = json.loads(zlib.decompress(row[0]))
                    self._remember(key, value, len(row[0]) * 4)
                    return value
            self.misses += 1
            return None

    def put(self, key: str, value: Any, size: int) -> None:
        with self._lock:
            self._remember(key, value, size)
            if self._db is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO stage VALUES (?, ?)", (key, zlib.compress(json.dumps(value).encode(), 1))
                )
                self._db.commit()

    def peek(self, key: str) -> Any | None:
        """A value kept in memory only (see :meth:`remember`); not counted as a hit or a miss."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key][0]
            return None

    def remember(self, key: str, value: Any, size: int) -> None:
        """Keep ``value`` in memory only (within the same LRU budget): objects derived from stored stages."""
        with self._lock:
            self._remember(key, value, size)

    def _remember(self, key: str, value: Any, size: int) -> None:
        if self.capacity <= 0:
            return
        if key in self._memory:
            self._size -= self._memory.pop(key)[1]
        self._memory[key] = (value, size)
        self._size += size
        while self._size > self.capacity and self._memory:
            _, (_, dropped) = self._memory.popitem(last=False)
            self._size -= dropped

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


CANDIDATE_BYTES = 520  # one built Candidate in memory (its doc is shared), measured with tracemalloc


def _key(*parts: Any) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


class CachingServices(Services):
    """The R and AG clients, with every answer (and its service time) cached by its request body."""

    def __init__(self, retrieval: httpx.AsyncClient, generation: httpx.AsyncClient, cache: StageCache):
        super().__init__(retrieval, generation)
        self.cache = cache

    async def post(self, client: httpx.AsyncClient, stage: str, path: str, body: bytes) -> tuple[bytes, float | None]:
        if not self.cache.enabled or path == "/v1/retrieve":  # rankings: kept compact by CachingRunner
            return await super().post(client, stage, path, body)
        key = "http:" + hashlib.sha256(path.encode() + b"\0" + body).hexdigest()
        hit = self.cache.get(key)
        if hit is not None:
            return hit[0].encode("latin-1"), hit[1]
        data, ms = await super().post(client, stage, path, body)
        self.cache.put(key, [data.decode("latin-1"), ms], len(data) + 200)
        return data, ms


class CachingRunner(PipelineRunner):
    """The gateway's runner, with each retriever's ranking for a query computed once (any depth up to the
    deepest asked so far)."""

    def __init__(self, services: Services, index: str | None, cache: StageCache):
        super().__init__(services, index)
        self.cache = cache

    async def _source(
        self, node: Node, query: Query, depth: int, expansion: Expansion | None = None
    ) -> tuple[Request, float | None]:
        if isinstance(node, Fusion) and self.cache.enabled:
            return await self._fused(node, query, depth, expansion)
        if isinstance(node, Source) and self.cache.enabled:
            name = node.name + (f":{node.arg}" if node.arg else "")
            text = query.text if expansion is None else (expansion.dense if node.name == "dense" else expansion.lexical)
            key = "ranking:" + _key(self.index, name, text)
            hit = self.cache.get(key)
            if hit is not None and (hit["k"] >= depth or len(hit["ids"]) < hit["k"]):
                return self._request(
                    key, hit, query if expansion is not None else Query(text=text, qid=query.qid), depth
                ), hit["ms"]
            request, ms = await super()._source(node, query, depth, expansion)
            for c in request.candidates:
                self._remember_doc(c)
            self.cache.put(
                key,
                {
                    "k": depth,
                    "ids": [c.docid for c in request.candidates],
                    "scores": [c.score for c in request.candidates],
                    "ms": ms,
                },
                40 * len(request.candidates) + 200,
            )
            return request, ms
        return await super()._source(node, query, depth, expansion)

    async def _fused(
        self, node: Fusion, query: Query, depth: int, expansion: Expansion | None
    ) -> tuple[Request, float | None]:
        """A fusion of cached rankings, fused once per process (as the gateway fuses) and kept in memory: its
        candidates, and the slowest source's time as the stage's."""
        texts = query.text if expansion is None else (expansion.lexical, expansion.dense)
        key = "fused:" + _key(self.index, repr(node), texts, depth)
        hit = self.cache.peek(key)
        if hit is None:
            parts = await asyncio.gather(*(self._source(n, query, depth, expansion) for n in node.sources))
            weights = [n.weight if isinstance(n, Source) else None for n in node.sources]
            times = [ms for _, ms in parts]
            slowest = None if None in times else max(times)  # type: ignore[type-var]
            hit = (_fuse(node.method, [r for r, _ in parts], weights, depth, query).candidates, slowest)
            self.cache.remember(key, hit, CANDIDATE_BYTES * len(hit[0]) + 200)
        return Request.model_construct(query=query, candidates=list(hit[0])), hit[1]

    def _remember_doc(self, candidate: Candidate) -> None:
        key = (str(self.index), candidate.docid)
        if key not in self.cache.docs:
            self.cache.docs[key] = candidate.doc
            if self.cache._db is not None:  # noqa: SLF001 - the docs live beside the rankings
                self.cache.put("doc:" + _key(*key), candidate.doc.model_dump(exclude_none=True), 0)

    def _doc(self, docid: str) -> Doc:
        key = (str(self.index), docid)
        doc = self.cache.docs.get(key)
        if doc is None:
            stored = self.cache.get("doc:" + _key(*key))
            doc = Doc.model_validate(stored or {})
            self.cache.docs[key] = doc
        return doc

    def _request(self, key: str, hit: dict[str, Any], query: Query, depth: int) -> Request:
        """The cached ranking's top ``depth`` as a request; its candidates are built once (validated, which
        pydantic does faster than ``model_construct``) and kept in memory beside the ranking, shared by the
        requests made of it (stages copy a candidate to change it, never change it in place)."""
        built = self.cache.peek("built:" + key)
        if built is None or built[0] is not hit:
            built = (hit, [Candidate(docid=d, score=s, doc=self._doc(d)) for d, s in zip(hit["ids"], hit["scores"])])
            self.cache.remember("built:" + key, built, CANDIDATE_BYTES * len(built[1]) + 200)
        return Request.model_construct(query=query, candidates=built[1][:depth])
