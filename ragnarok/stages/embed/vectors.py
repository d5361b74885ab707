"""Text vectors computed once: a store built with the dense index, then a bounded in-memory cache, then the model.

Every reader of MiniLM vectors outside retrieval (the extractive generator, the ``embedding``/``mmr``
rerankers, ``simcutoff``, the proxy judge) asks :func:`text_vectors` instead of encoding per request. Keys are
content hashes, so the store never goes stale for its model.

Design notes: docs/internals/stages.md.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from cachetools import LRUCache

STORE_DIR = "sentences"


def text_keys(texts: Iterable[str]) -> np.ndarray:
    """The 64-bit BLAKE2b key of each text (uint64)."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little") for t in texts],
        dtype=np.uint64,
    )


def store_texts(indexed_text: str, segment: str) -> list[str]:
    """What the store keeps of one segment: its indexed text (``title + "\\n" + segment``, what the dense index
    and the rerankers encode) and the prose sentences of its segment (what the extractive generator reads)."""
    from ragnarok.core.sentences import prose_sentences  # noqa: PLC0415 - blingfire

    return [indexed_text, *prose_sentences(segment)]


@dataclass
class StoreWriter:
    """Writes a sentence store into ``directory`` as texts and their vectors arrive (each text once)."""

    directory: Path
    dim: int
    model: str
    _keys: list[np.ndarray] = field(default_factory=list, init=False)
    _seen: set[int] = field(default_factory=set, init=False)
    _count: int = field(default=0, init=False)
    _file: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file = open(self.directory / "vectors.f32", "wb")  # noqa: SIM115 - closed by finish()

    def add(self, texts: list[str], vectors: np.ndarray) -> None:
        self.add_keys(text_keys(texts), vectors)

    def add_keys(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Add texts by their keys (:func:`text_keys`), e.g. from a resumed build's saved chunks."""
        fresh = [i for i, key in enumerate(keys.tolist()) if not (key in self._seen or self._seen.add(key))]
        if fresh:
            self._file.write(np.ascontiguousarray(vectors[fresh], dtype=np.float32).tobytes())
            self._keys.append(keys[fresh])
            self._count += len(fresh)

    def close(self) -> None:
        self._file.close()

    def finish(self) -> int:
        """Sort the keys, write them with their rows and the meta; returns the number of texts stored."""
        self.close()
        keys = np.concatenate(self._keys) if self._keys else np.zeros(0, dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        np.save(self.directory / "keys.npy", keys[order])
        np.save(self.directory / "rows.npy", order.astype(np.uint32 if self._count < 2**32 else np.uint64))
        (self.directory / "meta.json").write_text(
            json.dumps({"model": self.model, "dim": self.dim, "count": self._count, "key": "blake2b-64"})
        )
        return self._count


@dataclass
class SentenceStore:
    """A finished store, memory-mapped."""

    directory: Path
    keys: np.ndarray = field(init=False, repr=False)
    rows: np.ndarray = field(init=False, repr=False)
    vectors: np.ndarray = field(init=False, repr=False)
    model: str = field(init=False)

    def __post_init__(self) -> None:
        meta = json.loads((self.directory / "meta.json").read_text(encoding="utf-8"))
        self.model = meta["model"]
        self.keys = np.load(self.directory / "keys.npy", mmap_mode="r")
        self.rows = np.load(self.directory / "rows.npy", mmap_mode="r")
        count, dim = int(meta["count"]), int(meta["dim"])
        self.vectors = (
            np.memmap(self.directory / "vectors.f32", dtype=np.float32, mode="r", shape=(count, dim))
            if count
            else np.zeros((0, dim), dtype=np.float32)
        )

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found, rows)``: which keys the store holds and, for those, their row in :attr:`vectors`."""
        if not len(self.keys):
            return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[at] == keys
        return found, np.asarray(self.rows[at], dtype=np.int64)


def open_store(directory: Path) -> SentenceStore | None:
    """The store in ``directory``, or None when there is none (or it is unreadable: the cache and the model
    answer instead)."""
    try:
        return SentenceStore(directory) if (directory / "meta.json").is_file() else None
    except (OSError, ValueError, KeyError):
        return None


@dataclass
class TextVectors:
    """Vectors of texts under one model: the stores, then the LRU cache, then ``encode`` for what is left."""

    model: str
    encode_fn: Callable[[list[str], bool], np.ndarray]
    cache_entries: int = 50_000
    query_prefix: str = ""  # what the encoder puts before a query (part of its key)
    stores: list[SentenceStore] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=lambda: {"store": 0, "cache": 0, "encoded": 0})
    _cache: LRUCache = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _paths: set[Path] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self._cache = LRUCache(maxsize=max(1, self.cache_entries))

    def add_store(self, directory: Path) -> bool:
        """Read vectors from the store in ``directory`` too (once; a store of another model is ignored)."""
        directory = Path(directory).resolve()
        with self._lock:
            if directory in self._paths:
                return True
            store = open_store(directory)
            if store is None or store.model != self.model:
                return False
            self._paths.add(directory)
            self.stores.append(store)
            return True

    def add_stores_under(self, data_dir: Path) -> int:
        """Read the stores of this model's dense indexes under ``data_dir/indexes`` too; returns how many."""
        pattern = f"*.dense/{self.model.replace('/', '__')}/{STORE_DIR}"
        return sum(self.add_store(d) for d in sorted((Path(data_dir) / "indexes").glob(pattern)))

    def clear(self) -> None:
        """Forget what was encoded here (the stores stay)."""
        with self._lock:
            self._cache.clear()

    def encode(self, texts: list[str], query: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32 normalised rows. ``query``: texts get the model's query prefix when it
        has one (keyed as the text the model reads, so a query without a prefix shares its vector)."""
        if not texts:
            return np.asarray(self.encode_fn([], query), dtype=np.float32)  # (0, dim), as the encoder gives
        keys = text_keys([self.query_prefix + t for t in texts] if query and self.query_prefix else texts)
        out: list[np.ndarray | None] = [None] * len(texts)
        for store in self.stores:
            missing = [i for i, v in enumerate(out) if v is None]
            if not missing:
                break
            found, rows = store.lookup(keys[missing])
            hits = [(i, row) for i, hit, row in zip(missing, found.tolist(), rows.tolist()) if hit]
            if hits:  # the rows read in one gather (one by one, the memory map's indexing cost most of a lookup)
                block = np.asarray(store.vectors[[row for _, row in hits]])
                for (i, _), vector in zip(hits, block, strict=True):
                    out[i] = vector
                self.stats["store"] += len(hits)
        with self._lock:
            for i, key in enumerate(keys.tolist()):
                if out[i] is None and (hit := self._cache.get(key)) is not None:
                    out[i] = hit
                    self.stats["cache"] += 1
        missing = [i for i, v in enumerate(out) if v is None]
        if missing:
            todo = list(dict.fromkeys(texts[i] for i in missing))
            fresh = dict(zip(todo, np.asarray(self.encode_fn(todo, query), dtype=np.float32)))
            with self._lock:
                for i in missing:
                    out[i] = fresh[texts[i]]
                    self._cache[int(keys[i])] = out[i]
                self.stats["encoded"] += len(todo)
        return np.array(out, dtype=np.float32)


@lru_cache(maxsize=8)
def text_vectors(model: str = "minilm") -> TextVectors:
    """The process's :class:`TextVectors` for ``model`` (the shared encoder's), with the stores found under the
    data directory; a dense retriever adds its own index's store when it loads."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.stages.embed.encoder import shared_encoder  # noqa: PLC0415

    settings = get_settings()
    encoder = shared_encoder(model)
    vectors = TextVectors(
        model,
        lambda texts, query: encoder.encode(texts, query=query),
        cache_entries=settings.vector_cache_entries,
        query_prefix=encoder.prefix,
    )
    vectors.add_stores_under(settings.data_dir)
    return vectors
