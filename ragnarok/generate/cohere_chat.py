"""Cohere Command R+ with native ``documents`` grounding (chat API v2).

Cohere answers with span-level citations (``start``/``end`` in the answer text, ``sources`` naming our
documents). As in the Ragnarök paper, each span is mapped to the sentence that contains it: we write the
span's documents as a ``[i]`` marker at the end of that sentence, then run the same post-processing as for
every other backend (one path for renumbering, limits and cleaning).
"""

from __future__ import annotations

import json
from typing import Any

import blingfire
import httpx
from pydantic import BaseModel, ValidationError

from ragnarok.auth.meter import add_usage
from ragnarok.generate.base import ApiGenerator, BackendError
from ragnarok.generate.cite import postprocess
from ragnarok.generate.http import post_json
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.redact import quote, redact
from ragnarok.types import Candidate, Query, RagAnswer

COHERE_URL = "https://api.cohere.com"


class _Part(BaseModel):
    type: str = "text"
    text: str | None = None


class _Source(BaseModel):
    id: str | None = None


class Citation(BaseModel):
    start: int | None = None
    end: int | None = None
    sources: list[_Source] = []


class _Message(BaseModel):
    content: list[_Part] = []
    citations: list[Citation] | None = None


class ChatAnswer(BaseModel):
    """The part of Cohere's chat v2 answer we read."""

    message: _Message


def chat_answer(data: object) -> tuple[str, list[Citation]]:
    """The answer's text and citations; :class:`BackendError` for any other body, or an empty answer."""
    if isinstance(data, dict):
        add_usage(data.get("usage"))
    try:
        message = ChatAnswer.model_validate(data).message
    except ValidationError as exc:
        where = ".".join(map(str, exc.errors()[0]["loc"])) or "the body"
        raise BackendError(f"HTTP 200 but not a Cohere chat answer ({where}: {exc.errors()[0]['msg']}): "
                           f"{quote(json.dumps(data))}") from None
    text = "".join(part.text for part in message.content if part.text)
    if not text.strip():
        raise BackendError("the model's answer is empty")
    return text, list(message.citations or [])


def spans_to_markers(text: str, spans: list[tuple[int, int, list[int]]]) -> str:
    """Move span citations ``(start, end, [1-based doc numbers])`` to ``[n, m]`` markers ending the sentence
    that contains each span's start."""
    _, offsets = blingfire.text_to_sentences_and_offsets(text) if text.strip() else ("", [])
    cited: dict[int, list[int]] = {}
    for start, _end, numbers in spans:
        for i, (a, b) in enumerate(offsets):
            if a <= start < b or (i == len(offsets) - 1 and start >= a):
                cited.setdefault(i, []).extend(n for n in numbers if n not in cited.get(i, []))
                break
    out, last = [], 0
    for i, (a, b) in enumerate(offsets):
        sentence = text[a:b].rstrip()
        if i in cited:
            marker = " [" + ", ".join(map(str, cited[i])) + "]"
            cut = len(sentence) - 1 if sentence and sentence[-1] in ".!?" else len(sentence)
            sentence = sentence[:cut] + marker + sentence[cut:]
        out.append(text[last:a] + sentence)
        last = b
    return "".join(out) + text[last:]


class CohereGenerator(ApiGenerator):
    """Cohere's chat API v2, called with httpx directly in its documented JSON shape (``POST /v2/chat``), so
    that every call is bounded in total time (:func:`~ragnarok.generate.http.post_json`)."""

    def _make_client(self) -> httpx.Client:
        return httpx.Client(limits=httpx.Limits(max_connections=self.config.max_concurrency + 2))

    def chat(self, topic: str, candidates: list[Candidate],
             template: PromptTemplate) -> tuple[str, list[Citation]]:
        client = self._http()
        url = f"{(self.config.base_url or COHERE_URL).rstrip('/')}/v2/chat"
        headers = {"authorization": f"Bearer {self.api_key()}"}
        documents = [
            {"id": str(i + 1), "data": {"title": c.doc.title or "", "snippet": c.doc.segment or ""}}
            for i, c in enumerate(candidates)
        ]
        body: dict[str, Any] = {
            "model": self.config.model, "documents": documents, "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
            "messages": [{"role": "system", "content": template.system}, {"role": "user", "content": topic}],
        }
        return self.guard.call(lambda timeout_s: chat_answer(post_json(client, url, body, headers,
                                                                       timeout_s)))

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        text, citations = self.chat(topic.text, candidates, template)
        spans = []
        for c in citations:
            numbers = [int(s.id) for s in c.sources if s.id and s.id.isdigit()]
            if c.start is not None and numbers:
                spans.append((c.start, c.end or c.start, numbers))
        # masked after the spans are placed (they count characters): a key the backend echoes never reaches an answer
        references, answer = postprocess(redact(spans_to_markers(text, spans)), [c.docid for c in candidates],
                                         max_words=template.max_words)
        return RagAnswer.build(str(topic.qid), topic.text, references, answer)
