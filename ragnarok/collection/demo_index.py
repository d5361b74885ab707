"""The offline demo index: built from the demo collection on first use, atomically."""

from __future__ import annotations

import sys
from pathlib import Path

from ragnarok.collection.lucene_index import index_documents, is_lucene_index
from ragnarok.settings import Settings


def ensure_demo_index(settings: Settings, threads: int = 2, dense_model: str | None = None) -> Path:
    """The demo index directory, building it from the Python documentation if it is not there yet (and the
    dense index of ``dense_model`` beside it, when asked)."""
    target = settings.demo_index_dir
    if not is_lucene_index(target):
        from ragnarok.collection.demo import iter_demo_documents  # noqa: PLC0415 - imports the stdlib docs

        print(f"building the demo index at {target} (first use, under a minute)", file=sys.stderr, flush=True)
        documents = list(iter_demo_documents())  # a few thousand: counted first, so the bar shows a total
        index_documents(documents, target, threads=threads, total=len(documents))
    if dense_model:
        ensure_dense_index(target, dense_model)
    return target


def ensure_dense_index(lucene_dir: Path, model: str, kind: str = "flat", force: bool = False) -> Path:
    """The dense index of ``model`` beside ``lucene_dir``, encoded from its stored segments when it is missing,
    stale (the Lucene index was rebuilt since, or it is of another kind: :func:`~ragnarok.retrieve.dense.
    stale_reason`), or ``force``."""
    from ragnarok.retrieve.anserini import LuceneSearcher  # noqa: PLC0415
    from ragnarok.retrieve.dense import (  # noqa: PLC0415
        build_dense_index,
        dense_dir,
        segments_from_lucene,
        stale_reason,
    )

    out = dense_dir(lucene_dir, model)
    if (out / "index.faiss").exists() and not force:
        reason = stale_reason(out, lucene_dir, model, kind)
        if reason is None:
            return out
        print(f"rebuilding the dense index at {out}: {reason}", file=sys.stderr, flush=True)
    searcher = LuceneSearcher(lucene_dir)
    total = searcher.num_docs
    searcher.close()
    build_dense_index(segments_from_lucene(lucene_dir), out, model, kind,  # type: ignore[arg-type]
                      total=total, lucene_dir=lucene_dir)
    return out
