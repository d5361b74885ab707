"""Segments looked up by id prefix in a local Lucene index (for neighbour windows and auto-merging): the
next segment's id is ``{docid}#{n+1}_{start}`` and its start is not known in advance, so the R service asks
Lucene for the first id with the prefix ``{docid}#{n+1}_`` (a ``PrefixQuery`` on Anserini's ``id`` field)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.core.types import Candidate
from ragnarok.runtime.index_files import is_lucene_index
from ragnarok.stages.retrieve.lucene import IndexNotFoundError, doc_from_raw

#: Prefixes one request may look up.
MAX_PREFIXES = 2_000
MAX_PREFIX_CHARS = 512


@dataclass
class SegmentLookup:
    source: str  # a local Lucene index directory
    _searcher: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def _load(self) -> Any:
        with self._lock:
            if self._searcher is None:
                if not is_lucene_index(Path(self.source)):
                    raise IndexNotFoundError(f"no Lucene index at {self.source}")
                from ragnarok.core.java import start_jvm

                start_jvm()  # with Anserini's classpath (not pyserini.search, which imports torch: seconds)
                from jnius import autoclass, cast

                reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
                    autoclass("org.apache.lucene.store.FSDirectory").open(
                        autoclass("java.io.File")(self.source).toPath()
                    )
                )
                self._searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
                    cast("org.apache.lucene.index.IndexReader", reader)
                )
        return self._searcher

    def lookup(self, prefixes: list[str]) -> dict[str, Candidate]:
        """The first segment whose id starts with each prefix (prefixes that match none are left out)."""
        if not prefixes:
            return {}
        searcher = self._load()
        from jnius import autoclass

        prefix_query = autoclass("org.apache.lucene.search.PrefixQuery")
        term = autoclass("org.apache.lucene.index.Term")
        stored = searcher.storedFields()
        found: dict[str, Candidate] = {}
        for p in prefixes:
            hits = searcher.search(prefix_query(term("id", p)), 1).scoreDocs
            if len(hits):
                document = stored.document(hits[0].doc)
                found[p] = Candidate(docid=document.get("id"), score=0.0, doc=doc_from_raw(document.get("raw")))
        return found
