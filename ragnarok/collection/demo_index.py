"""The offline demo index: built from the demo collection on first use, atomically."""

from __future__ import annotations

import sys
from pathlib import Path

from ragnarok.collection.lucene_index import index_documents, is_lucene_index
from ragnarok.core.settings import Settings
from ragnarok.stages.retrieve.dense_ensure import (  # noqa: F401 - re-exported (their old home)
    dense_build_reason,
    ensure_dense_index,
    remove_abandoned,
    store_by_default,
)


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
