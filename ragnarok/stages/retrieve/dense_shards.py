"""A FAISS dense index in one or several shards, searched in parallel and merged by score.

A sharded index (``ragnarok index --dense MODEL --shards N``) holds ``shard-000/index.faiss`` ...: contiguous row
ranges of the collection (meta.json's ``shards``: ``[{dir, start, count}, ...]``); an index of one shard keeps
its ``index.faiss`` at the top. Each shard is searched for the ``k`` best in a thread pool (FAISS releases the
GIL) and the hits are merged by score, ties broken by global row. For ``flat`` (exact) search each shard gives
its ``k + RESCORE_MARGIN`` best and their scores are computed again in float64, row by row (FAISS's float32 inner
products can differ in the last bit with how a row falls into its SIMD blocks, which moves with the shard
boundaries and swaps near-ties): exact search over any number of shards ranks exactly as one flat index does.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.stages.embed.errors import DenseIndexMismatchError
from ragnarok.stages.retrieve.dense_kinds import read_index, search_params

RESCORE_MARGIN = 16  # extra hits per shard rescored for exact search: near-ties at the k-th place stay in


def shard_layout(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{dir, start, count}, ...]`` of an index's shards (one, ``dir`` ".", for an unsharded index)."""
    return meta.get("shards") or [{"dir": ".", "start": 0, "count": int(meta.get("count", 0))}]


def shard_ranges(count: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous ``(start, stop)`` row ranges covering ``count`` rows, as even as can be."""
    if shards < 1 or shards > max(1, count):
        raise ValueError(f"--shards must be between 1 and the number of segments ({count}), got {shards}")
    bounds = [count * i // shards for i in range(shards + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def shard_dir(i: int, shards: int) -> str:
    return "." if shards == 1 else f"shard-{i:03d}"


@dataclass
class FaissShards:
    """The FAISS shards of one dense index, loaded (``flat`` memory-mapped) and checked against its meta."""

    path: Path
    kind: str
    dim: int
    indexes: list[Any] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)

    @classmethod
    def load(cls, path: Path, meta: dict[str, Any]) -> FaissShards:
        shards = cls(path, str(meta.get("kind", "flat")), int(meta.get("dim", 0)))
        for shard in shard_layout(meta):
            index = read_index(path / shard["dir"] / "index.faiss", shards.kind, shards.dim)
            if index.ntotal != shard["count"]:
                raise DenseIndexMismatchError(
                    f"corrupt dense index at {path}: {shard['dir']} holds "
                    f"{index.ntotal} vectors, meta.json says {shard['count']}"
                )
            shards.indexes.append(index)
            shards.starts.append(int(shard["start"]))
        if len(shards.indexes) > 1:
            shards._pool = ThreadPoolExecutor(
                min(len(shards.indexes), os.cpu_count() or 1), thread_name_prefix="dense-shard"
            )
        return shards

    @property
    def ntotal(self) -> int:
        return sum(int(index.ntotal) for index in self.indexes)

    def search(self, vector: np.ndarray, k: int, ef_search: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, rows)`` of the ``k`` best rows for one query vector ``(dim,)``, best first (ties: lower
        row first)."""
        query = np.ascontiguousarray(vector.reshape(1, -1), dtype=np.float32)
        exact = self.kind == "flat"
        wanted = k + RESCORE_MARGIN if exact else k

        def one(i: int) -> tuple[np.ndarray, np.ndarray]:
            index = self.indexes[i]
            scores, ids = index.search(
                query, min(wanted, int(index.ntotal)), params=search_params(self.kind, k, ef_search)
            )
            ids = ids[0][ids[0] >= 0]
            if exact:  # float64, row by row: the same score for a row whatever the shard boundaries
                found = index.reconstruct_batch(ids).astype(np.float64)
                return (found * query[0].astype(np.float64)).sum(axis=1), ids + self.starts[i]
            return scores[0][: len(ids)], ids + self.starts[i]

        parts = list(self._pool.map(one, range(len(self.indexes)))) if self._pool else [one(0)]
        scores = np.concatenate([s for s, _ in parts])
        rows = np.concatenate([r for _, r in parts])
        order = np.lexsort((rows, -scores))[:k]
        return scores[order], rows[order]
