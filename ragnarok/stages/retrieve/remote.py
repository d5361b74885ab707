"""A remote Anserini REST server (or another instance of our R service) as a retrieval backend.

Both speak ``GET {base}/search?query=&hits=&qid=`` and answer with rank_llm's Request shape
(``{"query": {...}, "candidates": [{"docid", "score", "doc"}]}``); ``base`` is e.g.
``http://host:8081/v1/msmarco-v2.1-doc-segmented`` (Ragnarök's form) or
``http://host:8081/api/v1.0/indexes/cacm`` (Anserini's webapp form).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.runtime.quoting import lone_surrogate
from ragnarok.stages.retrieve.lucene import doc_from_raw


class RemoteRetrievalError(RuntimeError):
    pass


def _doc(value: Any) -> Doc:
    if isinstance(value, dict):
        return Doc.model_validate(value)
    return doc_from_raw(value if isinstance(value, str) else None)


@dataclass
class RemoteRetriever:
    name: str
    base_url: str
    timeout_s: float = 30.0
    _client: httpx.Client | None = field(default=None, init=False, repr=False)

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout_s)
        return self._client

    def retrieve(self, query: Query, k: int) -> Request:
        url = self.base_url.rstrip("/") + "/search"
        try:
            response = self._http().get(url, params={"query": query.text, "hits": k, "qid": str(query.qid)})
            response.raise_for_status()
            data = response.json()
            if where := lone_surrogate(data, response.content):  # no answer could carry it as UTF-8
                raise RemoteRetrievalError(f"remote index {self.base_url} answered text that is not valid "
                                           f"Unicode: a lone surrogate in {where}")
            candidates = [
                Candidate(docid=str(c["docid"]), score=float(c["score"]), doc=_doc(c.get("doc")))
                for c in data["candidates"]
            ]
        except httpx.HTTPError as exc:
            raise RemoteRetrievalError(f"remote index {self.base_url} failed: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteRetrievalError(f"remote index {self.base_url} answered in an unknown shape: {exc}") from exc
        return Request(query=query, candidates=candidates[:k])
