"""Moved below the stages to :mod:`ragnarok.stages.embed.vectors` (the generators, rerankers and judges read it too);
the old import path still works."""

from ragnarok.stages.embed.vectors import (  # noqa: F401 - re-exported
    STORE_DIR,
    SentenceStore,
    StoreWriter,
    TextVectors,
    open_store,
    store_texts,
    text_keys,
    text_vectors,
)
