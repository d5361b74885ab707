"""The offline demo index: built from the demo collection on first use, atomically."""

from __future__ import annotations

from pathlib import Path

from ragnarok.collection.lucene_index import index_documents, is_lucene_index
from ragnarok.settings import Settings


def ensure_demo_index(settings: Settings, threads: int = 2, dense_model: str | None = None) -> Path:
    """The demo index directory, building it from the Python documentation if it is not there yet (and the
    dense index of ``dense_model`` beside it, when asked)."""
    target = settings.demo_index_dir
    if not is_lucene_index(target):
        from ragnarok.collection.demo import iter_demo_documents  # noqa: PLC0415 - imports the stdlib docs

        index_documents(iter_demo_documents(), target, threads=threads)
    if dense_model:
        ensure_dense_index(target, dense_model)
    return target


def ensure_dense_index(lucene_dir: Path, model: str, kind: str = "flat") -> Path:
    """The dense index of ``model`` beside ``lucene_dir``, encoded from its stored segments if missing."""
    from ragnarok.retrieve.dense import build_dense_index, dense_dir, segments_from_lucene  # noqa: PLC0415

    out = dense_dir(lucene_dir, model)
    if not (out / "index.faiss").exists():
        build_dense_index(segments_from_lucene(lucene_dir), out, model, kind)  # type: ignore[arg-type]
    return out
