"""Lucene HNSW dense indexes through Anserini's jar: the form of the track's prebuilt Arctic-embed-L shards
(``msmarco-v2.1-doc-segmented-shardNN.arctic-embed-l.hnsw-int8``).

- :func:`write_lucene_hnsw` writes vectors as a ``JsonDenseVectorCollection`` (``{"docid", "vector"}`` lines) and
  indexes them with Anserini's ``IndexHnswDenseVectors`` (M 16, efC 100; ``int8``: ``-quantize.int8``, as the
  prebuilt shards are).
- :class:`LuceneHnsw` searches one index, or several shards as one: a ``MultiReader`` over all their segments
  and one ``IndexSearcher`` whose ``KnnFloatVectorQuery`` searches each segment on a Java thread pool (no Python
  lock held) and merges the segments' best hits by raw score, exactly as Lucene merges the segments of one
  index. Only the final ``k`` hits' docids are read. Every shard's vectors must have one dimension.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.stages.embed.errors import DenseIndexMismatchError, DenseIndexNotFoundError
from ragnarok.stages.retrieve.dense_kinds import params

WRITE_ROWS = 10_000  # vectors per JSON write while preparing the collection
VECTOR_FIELD, ID_FIELD = "vector", "id"  # Anserini's field names (io.anserini.index.Constants)


def write_lucene_hnsw(
    vectors: np.ndarray, docids: list[str], index_dir: Path, threads: int = 2, int8: bool = False
) -> None:
    """Index ``vectors`` (L2-normalised rows) under ``docids`` into a new Lucene HNSW index at ``index_dir``
    (which must not exist; the caller puts the finished index in place)."""
    from ragnarok.core.java import is_verbose, start_jvm  # noqa: PLC0415

    start_jvm()  # before jnius is imported: the JVM starts with Anserini's jar on its classpath
    from jnius import autoclass  # noqa: PLC0415

    collection = index_dir.with_name(index_dir.name + ".jsonl")
    collection.mkdir(parents=True, exist_ok=True)
    try:
        with open(collection / "vectors.jsonl", "w", encoding="utf-8") as out:
            for start in range(0, len(docids), WRITE_ROWS):
                rows = np.asarray(vectors[start : start + WRITE_ROWS], dtype=np.float32)
                out.writelines(
                    json.dumps({"docid": d, "vector": v}) + "\n"
                    for d, v in zip(docids[start : start + WRITE_ROWS], rows.tolist())
                )
        hnsw = params("lucene-hnsw")
        args = [
            "-collection",
            "JsonDenseVectorCollection",
            "-input",
            str(collection),
            "-index",
            str(index_dir),
            "-generator",
            "DenseVectorDocumentGenerator",
            "-threads",
            str(threads),
            "-M",
            str(hnsw["M"]),
            "-efC",
            str(hnsw["efConstruction"]),
            *(("-quantize.int8",) if int8 else ()),
            *(() if is_verbose() else ("-quiet",)),
        ]
        autoclass("io.anserini.index.IndexHnswDenseVectors").main(args)
    finally:
        shutil.rmtree(collection, ignore_errors=True)
    if not list(index_dir.glob("segments_*")):
        raise RuntimeError(f"Anserini wrote no HNSW index to {index_dir}; run with --verbose to see its log")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


class LuceneHnsw:
    """Lucene HNSW indexes (``dirs``: one, or a set's shards) searched as one index by query vector.

    ``labels`` name the shards in errors (default: their directories). ``ef_search`` is the search breadth
    (raised to ``k`` when ``k`` is larger); ``threads`` the Java threads that search the segments (default: one
    per shard, at most the cores)."""

    def __init__(
        self,
        dirs: list[Path],
        ef_search: int | None = None,
        labels: list[str] | None = None,
        threads: int | None = None,
    ):
        from ragnarok.core.java import start_jvm  # noqa: PLC0415

        dirs = [Path(d) for d in dirs]
        labels = labels or [str(d) for d in dirs]
        for d, label in zip(dirs, labels, strict=True):
            if not list(d.glob("segments_*")):
                raise DenseIndexNotFoundError(f"no Lucene HNSW index at {label}")
        start_jvm()
        from jnius import JavaException, autoclass, cast  # noqa: PLC0415

        self._query = autoclass("org.apache.lucene.search.KnnFloatVectorQuery")
        fields = autoclass("java.util.HashSet")()
        fields.add(ID_FIELD)
        self._fields = cast("java.util.Set", fields)  # document(int, Set), not document(int, StoredFieldVisitor)
        readers = []
        try:
            for d in dirs:
                readers.append(
                    autoclass("org.apache.lucene.index.DirectoryReader").open(
                        autoclass("org.apache.lucene.store.FSDirectory").open(
                            autoclass("java.io.File")(str(d)).toPath()
                        )
                    )
                )
        except JavaException as exc:
            for reader in readers:
                reader.close()
            raise DenseIndexMismatchError(f"{labels[len(readers)]} is not a Lucene index: {_first_line(exc)}") from None
        dims = [self._dimension(reader) for reader in readers]
        for label, dim in zip(labels, dims, strict=True):
            if dim is None:
                raise DenseIndexMismatchError(
                    f"{label} is not a Lucene HNSW dense index (no {VECTOR_FIELD!r} vector field)"
                )
        common = max(set(dims), key=dims.count)
        if odd := [f"{label} ({dim})" for label, dim in zip(labels, dims, strict=True) if dim != common]:
            raise DenseIndexMismatchError(
                f"the shards' vectors differ in dimension: {', '.join(odd)} against "
                f"{common} for the others (a shard of another encoder?)"
            )
        self.dim, self.shards, self.labels = int(common), len(dirs), labels
        self.ef_search = int(ef_search or params("lucene-hnsw")["efSearch"])
        multi = autoclass("org.apache.lucene.index.MultiReader")(readers, True)  # closes the shards with it
        # a ForkJoinPool's threads are daemons: they never keep the process alive at exit
        self._pool = autoclass("java.util.concurrent.ForkJoinPool")(threads or min(len(dirs), os.cpu_count() or 1))
        self._reader = multi
        self._searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
            cast("org.apache.lucene.index.IndexReader", multi), cast("java.util.concurrent.Executor", self._pool)
        )

    @staticmethod
    def _dimension(reader: Any) -> int | None:
        leaves = reader.leaves()
        for i in range(leaves.size()):
            info = leaves.get(i).reader().getFieldInfos().fieldInfo(VECTOR_FIELD)
            if info is not None and info.getVectorDimension() > 0:
                return int(info.getVectorDimension())
        return None

    def search(self, vector: np.ndarray, k: int, ef_search: int = 0) -> list[tuple[str, float]]:
        """``(docid, cosine)`` of the ``k`` nearest, best first. Lucene scores a dot product ``d`` as
        ``(1 + d) / 2``; it is turned back into ``d`` (as FAISS's inner product gives it)."""
        if len(vector) != self.dim:
            raise DenseIndexMismatchError(
                f"the Lucene HNSW index holds {self.dim}-dimensional vectors; the query "
                f"vector has {len(vector)} dimensions"
            )
        breadth = max(int(k), int(ef_search or self.ef_search))
        top = self._searcher.search(self._query(VECTOR_FIELD, [float(x) for x in vector.tolist()], breadth), int(k))
        stored = self._searcher.storedFields()  # one per call: a StoredFields is not shared between threads
        return [
            (str(stored.document(hit.doc, self._fields).get(ID_FIELD)), 2.0 * float(hit.score) - 1.0)
            for hit in top.scoreDocs
        ]

    def close(self) -> None:
        self._pool.shutdown()
        self._reader.close()
