"""ragnarok: retrieval-augmented generation for TREC RAG.

The Python API is :mod:`ragnarok.api`, re-exported here and imported on first use (PEP 562), so that
``import ragnarok`` stays cheap and does no I/O::

    import ragnarok
    answer = ragnarok.rag("how do I compress a file with gzip", pipeline="bm25@20 | extractive")

The packages are layered (entry points, tools, service, stores, stages, core, runtime) and pyproject.toml's
import contract keeps them in that order.

Design notes: docs/internals/python-api.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragnarok.api import Experiment, Pipeline, evaluate, load_qrels, load_topics, rag, retrieve, run, search

__all__ = ["Experiment", "Pipeline", "evaluate", "load_qrels", "load_topics", "rag", "retrieve", "run", "search"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module("ragnarok.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
