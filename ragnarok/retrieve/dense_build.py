"""Building a dense index: segments read from a Lucene index, encoded into FAISS (flat or HNSW), with the sentence
store beside it (:mod:`ragnarok.retrieve.vectors`). The index's layout is described in :mod:`ragnarok.retrieve.dense`."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ragnarok.retrieve.dense import HNSW_M, Kind, shared_encoder


def segments_from_lucene(lucene_dir: str | Path, with_segment: bool = False) -> Iterator[tuple[str, ...]]:
    """``(segment id, title + "\\n" + segment)`` for every document stored in a Lucene index built by
    :mod:`ragnarok.collection.lucene_index` (read by internal id, in index order); ``with_segment``: the
    segment's own text third (what the sentence store splits into sentences)."""
    from ragnarok.retrieve.anserini import LuceneSearcher  # noqa: PLC0415 - starts the JVM
    from ragnarok.retrieve.lucene import doc_from_raw  # noqa: PLC0415

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


def _new_index(dim: int, kind: Kind) -> Any:
    import faiss  # noqa: PLC0415

    if kind == "hnsw":
        return faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    raise ValueError(f"dense index kind must be 'flat' or 'hnsw', got {kind!r}")


def build_dense_index(texts: Iterable[tuple[str, ...]], out_dir: Path, model: str = "minilm",
                      kind: Kind = "flat", batch_size: int = 256, total: int | None = None,
                      lucene_dir: Path | None = None, progress: Callable[[int], None] | None = None,
                      sentence_store: bool = True) -> int:
    """Encode ``(docid, text)`` pairs into a FAISS inner-product index at ``out_dir``; returns their number.
    ``sentence_store``: also write the sentence store (:mod:`ragnarok.retrieve.vectors`) in ``sentences/``:
    each text's vector and those of its prose sentences (of the segment given third, ``(docid, text,
    segment)``, else of the text), so answers read them instead of encoding them per request.
    ``lucene_dir``: the Lucene index the texts come from, whose identity the meta records (read before
    encoding starts, so an index rebuilt meanwhile makes this one stale). ``progress(count)`` is called after
    each batch with the number encoded so far (a background build reports it and may pause or stop there).

    Texts are read, encoded and added ``batch_size`` at a time, so memory holds one batch plus the index.
    Everything is written to a temporary sibling directory first and renamed into place at the end, so a
    reader never sees a half-written index.
    """
    import faiss  # noqa: PLC0415
    from tqdm import tqdm  # noqa: PLC0415

    from ragnarok.collection.lucene_index import index_identity  # noqa: PLC0415
    from ragnarok.retrieve.vectors import STORE_DIR, StoreWriter, store_texts  # noqa: PLC0415

    built_from = index_identity(Path(lucene_dir)) if lucene_dir is not None else None
    encoder = shared_encoder(model)
    index = _new_index(encoder.dim, kind)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    count = 0
    store = StoreWriter(tmp / STORE_DIR, encoder.dim, model) if sentence_store else None
    try:
        items = iter(texts)
        with open(tmp / "docids.txt", "w", encoding="utf-8") as ids, \
                tqdm(total=total, desc=f"encoding ({model}, {kind})", unit="seg") as bar:
            while batch := list(itertools.islice(items, batch_size)):
                for docid, *_ in batch:
                    if "\n" in docid:
                        raise ValueError(f"docid {docid!r} contains a newline")
                vectors = encoder.encode([item[1] for item in batch])
                index.add(vectors)
                if store is not None:
                    store.add([item[1] for item in batch], vectors)
                    sentences = [s for item in batch for s in store_texts(item[1], item[-1])[1:]]
                    store.add(sentences, encoder.encode(sentences))
                ids.writelines(item[0] + "\n" for item in batch)
                count += len(batch)
                bar.update(len(batch))
                if progress is not None:
                    progress(count)
        if count == 0:
            raise ValueError("no texts to encode")
        if store is not None:
            store.finish()
        faiss.write_index(index, str(tmp / "index.faiss"))
        meta: dict[str, Any] = {"model": model, "dim": encoder.dim, "kind": kind, "count": count}
        if built_from is not None:
            meta["lucene"] = {**built_from, "count": count}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if store is not None:
            store.close()  # a build stopped midway: its file closed before the directory goes
        shutil.rmtree(tmp, ignore_errors=True)
    return count
