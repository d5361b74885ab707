"""ragnarok: retrieval-augmented generation for TREC RAG.

The Python API (:mod:`ragnarok.notebook`), loaded on first use so that ``import ragnarok`` stays cheap and
does no I/O::

    import ragnarok
    answer = ragnarok.rag("how do I compress a file with gzip", pipeline="bm25@20 | extractive")
    ranking = ragnarok.retrieve("gzip", k=10)
    run = ragnarok.search("demo", pipeline="bm25@100")
    ragnarok.evaluate(run, qrels="demo")
    pipeline = ragnarok.Pipeline("bm25@20 | extractive")   # loaded once, reused across calls

``ragnarok.retrieve`` and ``ragnarok.evaluate`` are also the names of the retrieval package and the evaluation
module: those two modules are callable, a call running the API's function.
"""

from __future__ import annotations

import importlib as _importlib
import sys as _sys
from types import ModuleType as _ModuleType  # not `import types`: the submodule ragnarok.types would replace it
from typing import Any

#: The API's names, all in :mod:`ragnarok.notebook`.
__all__ = ["Pipeline", "evaluate", "load_topics", "rag", "retrieve", "search"]
#: API names that are also submodules: the submodule, made callable.
_CALLABLE_SUBMODULES = ("retrieve", "evaluate")


class _CallableModule(_ModuleType):
    """A submodule that, called, runs the API function of its name (``ragnarok.retrieve(query)``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        api = _importlib.import_module("ragnarok.notebook")
        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(_ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # the import system sets each submodule on its package as it loads it: those two become callable
        if name in _CALLABLE_SUBMODULES and type(value) is _ModuleType:
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:
    if name in _CALLABLE_SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in __all__:
        return getattr(_importlib.import_module(f"{__name__}.notebook"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


_sys.modules[__name__].__class__ = _Package
