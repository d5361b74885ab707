"""The index a search runs on: a configured index name or directory as it is, or, with ``collection``, one
built on first use in the data directory from a collection (a directory or a ``.tar.gz`` of documents read by
an Anserini collection class, e.g. CACM's HTML files), with the dense indexes the space names."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from ragnarok.core.settings import Settings
from ragnarok.optimize.config import OptimizeConfig
from ragnarok.optimize.space import Space


def prepare_index(config: OptimizeConfig, space: Space, settings: Settings) -> str:
    """The index to search (a name or a directory), built first when the config names a collection."""
    semantic = space.node("semantic")
    models = sorted({str(c.get("model", "minilm")) for c in semantic.candidates} if semantic else set())
    if not config.collection:
        if config.index == "demo" and settings.demo_is_embedded():
            from ragnarok.collection.demo_index import ensure_demo_index, ensure_dense_index  # noqa: PLC0415

            target = ensure_demo_index(settings)
            for model in models:
                ensure_dense_index(target, model)
        return config.index
    from ragnarok.collection.demo_index import ensure_dense_index  # noqa: PLC0415
    from ragnarok.collection.lucene_index import index_collection, is_lucene_index  # noqa: PLC0415

    source = Path(config.collection)
    if not source.exists():
        raise FileNotFoundError(f"collection {source} does not exist")
    target = settings.data_dir / "optimize" / "indexes" / config.index
    if not is_lucene_index(target):
        with tempfile.TemporaryDirectory() as tmp:
            docs = source
            if source.is_file():
                with tarfile.open(source) as tar:
                    tar.extractall(tmp, filter="data")
                docs = Path(tmp)
            index_collection(docs, target, config.collection_class, threads=2)
    for model in models:
        ensure_dense_index(target, model)  # built once, rebuilt when stale
    return str(target)
