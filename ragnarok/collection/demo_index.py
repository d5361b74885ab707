"""The offline demo index: built from the demo collection on first use, atomically."""

from __future__ import annotations

from pathlib import Path

from ragnarok.collection.lucene_index import index_documents, is_lucene_index
from ragnarok.settings import Settings


def ensure_demo_index(settings: Settings, threads: int = 2) -> Path:
    """The demo index directory, building it from the Python documentation if it is not there yet."""
    target = settings.demo_index_dir
    if not is_lucene_index(target):
        from ragnarok.collection.demo import iter_demo_documents  # noqa: PLC0415 - imports the stdlib docs

        index_documents(iter_demo_documents(), target, threads=threads)
    return target
