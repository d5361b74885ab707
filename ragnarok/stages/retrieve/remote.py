"""A remote Anserini REST server (or another instance of our R service) as a retrieval backend.

Both speak ``GET {base}/search?query=&hits=`` and answer ``{"query": {"text"}, "candidates": [{"docid", "score",
"doc"}]}`` (Anserini's RestServer adds ``api``, ``index`` and each candidate's ``rank``, and writes a parsed
document's numbers as strings: ``"start_char": "0"``). ``base`` is Anserini's form,
``http://host:8081/v1/<index>``, the index a prebuilt name (``msmarco-v2.1-doc-segmented``) or a path, URL-encoded
or not (``/v1//data/index`` is sent as ``/v1/%2Fdata%2Findex``), or Anserini's older webapp form
``http://host:8081/api/v1.0/indexes/cacm``.

Every call has one deadline, ``timeout_s``, over the whole answer (a server that drips its bytes is cut off
too) and at most ``MAX_ANSWER_BYTES``: a server that is down, slow, or answers something else than this JSON is a
:class:`RemoteRetrievalError` (502) or :class:`RemoteTimeout` (504), never a hang.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.runtime.quoting import lone_surrogate, shorten
from ragnarok.stages.retrieve.lucene import doc_from_fields, doc_from_raw

MAX_ANSWER_BYTES = 64 << 20


class RemoteRetrievalError(RuntimeError):
    pass


class RemoteTimeout(RemoteRetrievalError):
    """No whole answer within the deadline."""


def search_url(base: str) -> str:
    """``base/search``, with an index path after ``/v1/`` URL-encoded as Anserini's RestServer reads it."""
    parts = urlsplit(base.rstrip("/"))
    path = parts.path
    if path.startswith("/v1/") and "/" in path[4:]:
        path = "/v1/" + quote(path[4:], safe="%")
    return urlunsplit(parts._replace(path=path + "/search"))


def _doc(value: Any) -> Doc:
    if isinstance(value, dict):
        return doc_from_fields(value)
    return doc_from_raw(value if isinstance(value, str) else None)


@dataclass
class RemoteRetriever:
    name: str
    base_url: str
    timeout_s: float = 30.0
    _client: httpx.Client | None = field(default=None, init=False, repr=False)

    def _http(self) -> httpx.Client:
        if self._client is None:  # one keep-alive pool, shared by the service's threads
            self._client = httpx.Client(timeout=self.timeout_s)
        return self._client

    def _get(self, query: Query, k: int) -> tuple[int, bytes]:
        deadline = time.monotonic() + self.timeout_s
        params = {"query": query.text, "hits": k, "qid": str(query.qid)}
        with self._http().stream("GET", search_url(self.base_url), params=params) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise RemoteRetrievalError(
                        f"remote index {self.base_url} answered over {MAX_ANSWER_BYTES >> 20} MB"
                    )
                if time.monotonic() > deadline:
                    raise RemoteTimeout(
                        f"remote index {self.base_url} sent no whole answer within {self.timeout_s:g} s"
                    )
            return response.status_code, bytes(body)

    def retrieve(self, query: Query, k: int) -> Request:
        try:
            status, content = self._get(query, k)
        except httpx.TimeoutException as exc:
            raise RemoteTimeout(
                f"remote index {self.base_url} did not answer within {self.timeout_s:g} s ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise RemoteRetrievalError(
                f"remote index {self.base_url} failed: {type(exc).__name__}: {shorten(str(exc), 200)}"
            ) from None
        try:
            data = json.loads(content)
        except ValueError:
            raise RemoteRetrievalError(
                f"remote index {self.base_url} answered {status} with something that is "
                f"not JSON: {shorten(content[:200].decode('utf-8', 'replace'), 120)}"
            ) from None
        if status != 200:
            error = data.get("error") or data.get("detail") if isinstance(data, dict) else None
            raise RemoteRetrievalError(
                f"remote index {self.base_url} answered {status}: {shorten(str(error or data), 200)}"
            )
        if where := lone_surrogate(data, content):  # no answer could carry it as UTF-8
            raise RemoteRetrievalError(
                f"remote index {self.base_url} answered text that is not valid Unicode: a lone surrogate in {where}"
            )
        try:
            candidates = [
                Candidate(docid=str(c["docid"]), score=float(c["score"]), doc=_doc(c.get("doc")))
                for c in data["candidates"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteRetrievalError(
                f"remote index {self.base_url} answered in an unknown shape: {shorten(str(exc), 200)}"
            ) from None
        return Request(query=query, candidates=candidates[:k])
