"""Building a dense index: segments read from a Lucene index, encoded in resumable chunks
(:mod:`ragnarok.stages.retrieve.dense_chunks`), then assembled into an index of the chosen kind
(:mod:`ragnarok.stages.retrieve.dense_kinds`), in shards (:mod:`ragnarok.stages.retrieve.dense_shards`), with the sentence store
beside it (:mod:`ragnarok.stages.embed.vectors`). The index's layout is described in :mod:`ragnarok.stages.retrieve.dense`.

Memory is bounded by a chunk while encoding; the index is assembled from the memory-mapped chunks, so the
build holds the index itself (one shard at a time) and :data:`ADD_ROWS` vectors, never all vectors twice.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.stages.retrieve.dense import shared_encoder
from ragnarok.stages.retrieve.dense_chunks import CHUNK_BATCHES, Chunks, Rows, build_lock, partial_dir
from ragnarok.stages.retrieve.dense_kinds import (
    SQ8_TRAIN_ROWS,
    check_kind,
    new_index,
    params,
    resolve_kind,
    size_estimate,
)
from ragnarok.stages.retrieve.dense_shards import shard_dir, shard_ranges

ADD_ROWS = 16_384  # vectors read from the chunks and added to the index at a time
STORE_BYTES_PER_SEGMENT = 4_500  # the sentence store's cost, measured on the demo (about 3 sentences a segment)


def segments_from_lucene(lucene_dir: str | Path, with_segment: bool = False) -> Iterator[tuple[str, ...]]:
    """``(segment id, title + "\\n" + segment)`` for every document stored in a Lucene index built by
    :mod:`ragnarok.collection.lucene_index` (read by internal id, in index order); ``with_segment``: the
    segment's own text third (what the sentence store splits into sentences)."""
    from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: PLC0415 - starts the JVM
    from ragnarok.stages.retrieve.lucene import doc_from_raw  # noqa: PLC0415

    searcher = LuceneSearcher(str(lucene_dir))
    try:
        for i in range(searcher.num_docs):
            document = searcher.doc(i)
            if document is None:
                continue
            doc = doc_from_raw(document.raw())
            text = "\n".join(p for p in (doc.title, doc.segment) if p)
            yield (document.docid(), text, doc.segment or "") if with_segment else (document.docid(), text)
    finally:
        searcher.close()


def write_dense_index(
    vectors: np.ndarray | Path | Rows,
    docids: Sequence[str],
    out_dir: Path,
    *,
    model: str = "minilm",
    kind: str = "auto",
    shards: int = 1,
    lucene_dir: Path | None = None,
) -> dict[str, Any]:
    """Write a complete dense index at ``out_dir`` from vectors computed elsewhere; returns the meta written.

    ``vectors``: float32 ``(n, dim)``, L2-normalised, one row per docid (an array, possibly memory-mapped, or
    the path of a ``.npy`` file, which is memory-mapped). ``kind``: ``flat``, ``hnsw``, ``hnsw-sq8``,
    ``lucene-hnsw`` or ``auto`` (:func:`~ragnarok.stages.retrieve.dense_kinds.resolve_kind`); ``shards``: contiguous
    row ranges, each its own FAISS index (``shard-000/`` ...). ``lucene_dir``: the Lucene index holding the
    segments' text, whose identity the meta records (a :class:`~ragnarok.stages.retrieve.dense.DenseRetriever` over
    ``lucene_dir`` with ``index_dir=out_dir`` then serves it; without it the index records no source and a
    retriever refuses it as stale). ``model``: the model the vectors are of (the
    one that encodes queries). Same layout and meta as ``ragnarok index --dense``; written aside and put in
    place whole.
    """
    from ragnarok.runtime.index_files import index_identity, put_in_place  # noqa: PLC0415

    rows = (
        vectors if isinstance(vectors, Rows) else Rows([Path(vectors) if isinstance(vectors, (str, Path)) else vectors])
    )
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        built_from = index_identity(Path(lucene_dir)) if lucene_dir is not None else None
        meta = _write_index(rows, list(docids), tmp, model, kind, shards, built_from)
        put_in_place(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta


def _write_index(
    rows: Rows, docids: list[str], tmp: Path, model: str, kind: str, shards: int, built_from: dict[str, Any] | None
) -> dict[str, Any]:
    """The index of ``kind`` over ``rows`` into ``tmp`` (which exists), meta.json last; returns the meta."""
    import faiss  # noqa: PLC0415

    count, dim = len(rows), rows.dim
    if count == 0:
        raise ValueError("no texts to encode")
    if count != len(docids):
        raise ValueError(f"{count} vectors for {len(docids)} docids")
    if bad := next((d for d in docids if "\n" in d), None):
        raise ValueError(f"docid {bad!r} contains a newline")
    kind = resolve_kind(kind, count)
    layout = []
    if kind == "lucene-hnsw":
        if shards != 1:
            raise ValueError(
                "a lucene-hnsw index is one Lucene index (its segments are searched together): "
                "--shards applies to the FAISS kinds"
            )
        from ragnarok.stages.retrieve.lucene_hnsw import write_lucene_hnsw  # noqa: PLC0415

        write_lucene_hnsw(rows, docids, tmp / "lucene-hnsw")
    for i, (start, stop) in enumerate(shard_ranges(count, shards) if kind != "lucene-hnsw" else []):
        (tmp / shard_dir(i, shards)).mkdir(exist_ok=True)
        layout.append({"dir": shard_dir(i, shards), "start": start, "count": stop - start})
        if kind == "flat":
            _write_flat(rows, start, stop, tmp / shard_dir(i, shards) / "index.faiss")
            continue
        index = new_index(kind, dim)
        if not index.is_trained:  # hnsw-sq8: the quantiser's ranges, from rows spread over the shard
            index.train(rows.take(np.linspace(start, stop - 1, min(stop - start, SQ8_TRAIN_ROWS)).astype(int)))
        for at in range(start, stop, ADD_ROWS):
            index.add(rows[at : min(at + ADD_ROWS, stop)])
        faiss.write_index(index, str(tmp / shard_dir(i, shards) / "index.faiss"))
        del index
    (tmp / "docids.txt").write_text("".join(d + "\n" for d in docids), encoding="utf-8")
    meta: dict[str, Any] = {
        "model": model,
        "dim": dim,
        "kind": kind,
        "count": count,
        "params": params(kind),
        "shards": layout,
    }
    if built_from is not None:
        meta["lucene"] = {**built_from, "count": count}
    (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return meta


def _write_flat(rows: Rows, start: int, stop: int, path: Path) -> None:
    """The ``IndexFlatIP`` of rows ``start:stop`` written to ``path`` :data:`ADD_ROWS` rows at a time, never
    held in memory: FAISS's own serialisation of an empty index (its header and the codes' size, which follows
    it), with the row count and the size (in floats) set, then the rows as they are (a flat index's codes are
    its float32 vectors). The same bytes as ``faiss.write_index`` of the index built in memory (tested)."""
    import struct  # noqa: PLC0415

    import faiss  # noqa: PLC0415

    empty = faiss.serialize_index(faiss.IndexFlatIP(rows.dim)).tobytes()
    ntotal_at = 8  # fourcc (4 bytes), d (int32), then ntotal (int64)
    count = stop - start
    header = empty[:ntotal_at] + struct.pack("<q", count) + empty[ntotal_at + 8 : -8]
    with open(path, "wb") as out:
        out.write(header + struct.pack("<Q", count * rows.dim))  # a vector of count x dim floats
        for at in range(start, stop, ADD_ROWS):
            out.write(rows[at : min(at + ADD_ROWS, stop)].tobytes())


def disk_needed(count: int, dim: int, kind: str, sentence_store: bool) -> int:
    """Bytes a build of ``count`` segments needs: its chunks (the vectors), the index, the sentence store."""
    store = count * STORE_BYTES_PER_SEGMENT if sentence_store else 0
    return count * dim * 4 + size_estimate(resolve_kind(kind, count), count, dim) + store


def check_disk(where: Path, count: int, dim: int, kind: str, sentence_store: bool, done: int = 0) -> None:
    """An :class:`OSError` naming the estimate and what is free when ``where``'s file system cannot hold a
    build of ``count`` segments (``done`` of them already encoded)."""
    need = disk_needed(count, dim, kind, sentence_store) - done * dim * 4
    free = shutil.disk_usage(where).free
    if need > free:
        raise OSError(
            f"not enough disk for the dense index of {count:,} segments at {where}: it needs about "
            f"{_gb(need)} (vectors {_gb(count * dim * 4)}, index, sentence store "
            f"{_gb(count * STORE_BYTES_PER_SEGMENT) if sentence_store else 'off'}) and {_gb(free)} is "
            "free; free some space, or build without --sentence-store"
        )


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def build_dense_index(
    texts: Iterable[tuple[str, ...]],
    out_dir: Path,
    model: str = "minilm",
    kind: str = "auto",
    batch_size: int = 256,
    total: int | None = None,
    lucene_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
    sentence_store: bool = True,
    shards: int = 1,
) -> int:
    """Encode ``(docid, text)`` pairs into a dense index of ``kind`` at ``out_dir``; returns their number.
    ``sentence_store``: also write the sentence store (:mod:`ragnarok.stages.embed.vectors`) in ``sentences/``:
    each text's vector and those of its prose sentences (of the segment given third, ``(docid, text,
    segment)``, else of the text), so answers read them instead of encoding them per request.
    ``lucene_dir``: the Lucene index the texts come from, whose identity the meta records (read before
    encoding starts, so an index rebuilt meanwhile makes this one stale). ``progress(count)`` is called after
    each batch with the number encoded so far (a background build reports it and may pause or stop there).

    Resumable: the vectors are checkpointed every :data:`CHUNK_BATCHES` batches in ``.NAME.partial/``; the
    same build run again after an interruption or a kill skips the texts already encoded (``texts`` must
    come in the same order) and gives the same index. A second build of the same index while one runs is
    refused; a ``total`` that the disk cannot hold is refused before encoding starts. The finished index is
    put in place whole: a reader never sees a half-written one.
    """
    from tqdm import tqdm  # noqa: PLC0415

    from ragnarok.runtime.index_files import index_identity, put_in_place  # noqa: PLC0415
    from ragnarok.stages.embed.vectors import STORE_DIR, StoreWriter, text_keys  # noqa: PLC0415

    check_kind(kind)
    if total is not None:
        shard_ranges(total, shards)  # a number of shards the collection cannot fill: refused before encoding
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    built_from = index_identity(Path(lucene_dir)) if lucene_dir is not None else None
    encoder = shared_encoder(model)
    partial = partial_dir(out_dir)
    with build_lock(partial, out_dir):
        chunks = Chunks(partial)
        done = chunks.resume(
            {"model": model, "batch_size": batch_size, "sentence_store": sentence_store, "lucene": built_from}
        )
        if total is not None:
            check_disk(out_dir.parent, total, encoder.dim, kind, sentence_store, done)
        if done:
            print(
                f"resuming the dense build of {out_dir} after the {done:,} segments encoded before",
                file=sys.stderr,
                flush=True,
            )
        items = iter(texts)
        skipped = sum(1 for _ in itertools.islice(items, done))
        if skipped < done:  # fewer texts than the chunks hold: not the same input
            chunks.resume({})
            raise ValueError(
                f"the texts to encode are fewer ({skipped}) than a previous build of {out_dir} "
                f"encoded ({done}): its work was discarded; run the command again"
            )
        count, pending = done, _Pending()
        shown = resolve_kind(kind, total) if total is not None else kind
        with tqdm(total=total, initial=done, desc=f"encoding ({model}, {shown})", unit="seg") as bar:
            if progress is not None and done:
                progress(count)
            while batch := list(itertools.islice(items, batch_size)):
                vectors = encoder.encode([item[1] for item in batch])
                pending.add([item[0] for item in batch], vectors)
                if sentence_store:
                    sentences = [s for item in batch for s in _store_texts(item[1], item[-1])[1:]]
                    pending.add_store(text_keys([item[1] for item in batch]), vectors)
                    pending.add_store(text_keys(sentences), encoder.encode(sentences))
                count += len(batch)
                bar.update(len(batch))
                if pending.batches == CHUNK_BATCHES:
                    pending.flush(chunks)
                if progress is not None:
                    progress(count)
        pending.flush(chunks)
        if count == 0:
            shutil.rmtree(partial, ignore_errors=True)  # nothing to resume
            raise ValueError("no texts to encode")
        tmp = partial / "index"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        if sentence_store:
            store = StoreWriter(tmp / STORE_DIR, encoder.dim, model)
            try:
                for keys, vectors in chunks.store_parts():
                    store.add_keys(keys, vectors)
                store.finish()
            finally:
                store.close()
        _write_index(chunks.vectors(), chunks.docids(), tmp, model, kind, shards, built_from)
        put_in_place(tmp, out_dir)
    shutil.rmtree(partial, ignore_errors=True)
    return count


def _store_texts(text: str, segment: str) -> list[str]:
    from ragnarok.stages.embed.vectors import store_texts  # noqa: PLC0415

    return store_texts(text, segment)


class _Pending:
    """The batches encoded since the last chunk was saved."""

    def __init__(self) -> None:
        self.docids: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.store_keys: list[np.ndarray] = []
        self.store_vectors: list[np.ndarray] = []
        self.batches = 0

    def add(self, docids: list[str], vectors: np.ndarray) -> None:
        if bad := next((d for d in docids if "\n" in d), None):
            raise ValueError(f"docid {bad!r} contains a newline")
        self.docids += docids
        self.vectors.append(vectors)
        self.batches += 1

    def add_store(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        self.store_keys.append(keys)
        self.store_vectors.append(vectors)

    def flush(self, chunks: Chunks) -> None:
        if self.docids:
            chunks.write(self.docids, self.vectors, self.store_keys, self.store_vectors)
        self.__init__()  # type: ignore[misc]
