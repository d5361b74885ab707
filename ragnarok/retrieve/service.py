"""Resolving ``(retriever, index)`` names to retriever instances, created once and reused."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from ragnarok.collection.lucene_index import is_lucene_index
from ragnarok.components import RETRIEVERS
from ragnarok.protocols import Retriever
from ragnarok.registry import UnknownComponentError
from ragnarok.settings import Settings


@dataclass(frozen=True)
class RetrieverInfo:
    name: str
    index: str
    source: str
    kind: str
    available: bool
    reason: str = ""


def source_kind(source: str) -> str:
    if source.startswith(("http://", "https://")):
        return "remote"
    return "prebuilt" if source.startswith("prebuilt:") else "local"


class RetrievalService:
    """The R service's model: which indexes and retrievers exist, and the instances serving them."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._instances: dict[tuple[str, str], Retriever] = {}
        self._lock = threading.Lock()

    def sources(self) -> dict[str, str]:
        return self.settings.index_sources()

    def get(self, retriever: str, index: str | None = None) -> Retriever:
        index = index or self.settings.default_index
        entry = RETRIEVERS.get(retriever)
        sources = self.sources()
        if index not in sources:
            raise UnknownComponentError("index", index, sorted(sources))
        key = (retriever, index)
        with self._lock:
            if key not in self._instances:
                self._instances[key] = entry.factory(name=retriever, source=sources[index], settings=self.settings)
            return self._instances[key]

    def describe(self) -> list[RetrieverInfo]:
        infos = []
        for index, source in sorted(self.sources().items()):
            kind = source_kind(source)
            available, reason = True, ""
            if kind == "local" and not is_lucene_index(Path(source)):
                available, reason = False, f"no Lucene index at {source} yet"
            for name in RETRIEVERS.names():
                if kind == "remote" and name != "bm25":
                    continue
                infos.append(RetrieverInfo(name, index, source, kind, available, reason))
        return infos
