"""Cohere Command R+ with native ``documents`` grounding (chat API v2).

As in the Ragnarök paper, each of Cohere's span-level citations is mapped to the sentence that contains it and
written as a ``[i]`` marker, then the answer goes through the same post-processing as every other backend.
Streamed, a sentence is sent only once no later citation can still belong to it.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

import blingfire
import httpx
from pydantic import BaseModel, ValidationError

from ragnarok.core.meter import add_usage, calling
from ragnarok.core.types import Candidate, CitedSentence, Query, RagAnswer
from ragnarok.runtime.redact import quote, redact
from ragnarok.stages.generate.base import ApiGenerator, BackendError, GenerationError
from ragnarok.stages.generate.cite import postprocess
from ragnarok.stages.generate.http import backend_client, post_json
from ragnarok.stages.generate.prompts import PromptTemplate
from ragnarok.stages.generate.sse import stream_events
from ragnarok.stages.generate.streaming import (
    Finish,
    SentenceAssembler,
    StreamEvent,
    deadlined,
    deadlines,
    references_event,
)

COHERE_URL = "https://api.cohere.com"
M = TypeVar("M", bound=BaseModel)


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


class _DeltaContent(BaseModel):
    text: str


class _ContentDelta(BaseModel):
    content: _DeltaContent


class _CitationDelta(BaseModel):
    citations: Citation | list[Citation]


class _Delta(BaseModel):
    message: Any = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


class ChatStreamEvent(BaseModel):
    """The part of one of Cohere's chat v2 stream events we read: its ``type``, and its ``delta`` (whose
    ``message`` is read as :class:`_ContentDelta` in a ``content-delta``, :class:`_CitationDelta` in a
    ``citation-start``)."""

    type: str
    delta: _Delta = _Delta()


Span = tuple[int, int, list[int]]  # a span citation: start, end, 1-based document numbers


@dataclass(frozen=True)
class _Cited:
    """A span citation that came in the stream."""

    span: Span


def to_spans(citations: list[Citation]) -> list[Span]:
    """Cohere's citations as spans ``(start, end, [1-based document numbers])`` (ours are numbered ``1..n``)."""
    spans = []
    for c in citations:
        numbers = [int(s.id) for s in c.sources if s.id and s.id.isdigit()]
        if c.start is not None and numbers:
            spans.append((c.start, c.end or c.start, numbers))
    return spans


def cited_answer(
    text: str, spans: list[Span], docids: list[str], max_words: int
) -> tuple[list[str], list[CitedSentence]]:
    """``(references, sentences)`` of Cohere's text and span citations: markers placed, then post-processed."""
    # masked after the spans are placed (they count characters): a key the backend echoes never reaches an answer
    return postprocess(redact(spans_to_markers(text, spans)), docids, max_words=max_words)


def chat_answer(data: object) -> tuple[str, list[Citation]]:
    """The answer's text and citations; :class:`BackendError` for any other body, or an empty answer."""
    if isinstance(data, dict):
        add_usage(data.get("usage"))
    try:
        message = ChatAnswer.model_validate(data).message
    except ValidationError as exc:
        where = ".".join(map(str, exc.errors()[0]["loc"])) or "the body"
        raise BackendError(
            f"HTTP 200 but not a Cohere chat answer ({where}: {exc.errors()[0]['msg']}): {quote(json.dumps(data))}"
        ) from None
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
    that every call is bounded in total time (:func:`~ragnarok.stages.generate.http.post_json`)."""

    def _make_client(self) -> httpx.Client:
        return backend_client(self.config.max_concurrency)

    def request(
        self, topic: str, candidates: list[Candidate], template: PromptTemplate
    ) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The URL, headers and body of a chat call (``documents`` numbered ``1..n``)."""
        url = f"{(self.config.base_url or COHERE_URL).rstrip('/')}/v2/chat"
        headers = {"authorization": f"Bearer {self.api_key()}"}
        documents = [
            {"id": str(i + 1), "data": {"title": c.doc.title or "", "snippet": c.doc.segment or ""}}
            for i, c in enumerate(candidates)
        ]
        body: dict[str, Any] = {
            "model": self.config.model,
            "documents": documents,
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
            "messages": [{"role": "system", "content": template.system}, {"role": "user", "content": topic}],
        }
        return url, headers, body

    def chat(self, topic: str, candidates: list[Candidate], template: PromptTemplate) -> tuple[str, list[Citation]]:
        client = self._http()
        url, headers, body = self.request(topic, candidates, template)
        return self.guard.call(lambda timeout_s: chat_answer(post_json(client, url, body, headers, timeout_s)))

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        text, citations = self.chat(topic.text, candidates, template)
        references, answer = cited_answer(text, to_spans(citations), [c.docid for c in candidates], template.max_words)
        return RagAnswer.build(str(topic.qid), topic.text, references, answer)

    def _event_part(self, model: type[M], event: ChatStreamEvent | None, data: Any) -> M:
        """``data`` (``event``: its ``delta.message``) read as ``model``; :class:`GenerationError` naming the
        event when it has another shape."""
        try:
            return model.model_validate(event.delta.message if event is not None else data)
        except ValidationError as exc:
            where = ".".join(map(str, exc.errors()[0]["loc"])) or "the event"
            if event is not None:
                where = f"{event.type}: delta.message.{where}"
            raise GenerationError(
                self.name,
                f"a streamed event is not a Cohere chat stream event ({where}: "
                f"{exc.errors()[0]['msg']}): {quote(json.dumps(data))}",
            ) from None

    async def _stream_items(
        self, url: str, headers: dict[str, str], body: dict[str, Any], first_by: float
    ) -> AsyncIterator[str | _Cited | Finish]:
        """Cohere's stream as text pieces, span citations, then a :class:`Finish` (``message-end``: its usage is
        counted); :class:`GenerationError` for an event of another shape, or a stream that ends before it."""
        events = stream_events(self.guard, url, {**body, "stream": True}, headers, deadlines(self.config)[0], first_by)
        async with aclosing(events):  # closed here, however this ends: its HTTP stream and its slot with it
            async for event, data in events:
                parsed = self._event_part(
                    ChatStreamEvent,
                    None,
                    {"type": event, **data} if isinstance(data, dict) and "type" not in data else data,
                )
                if parsed.type == "content-delta":
                    if text := self._event_part(_ContentDelta, parsed, data).content.text:
                        yield text
                elif parsed.type == "citation-start":
                    found = self._event_part(_CitationDelta, parsed, data).citations
                    for span in to_spans(found if isinstance(found, list) else [found]):
                        yield _Cited(span)
                elif parsed.type == "message-end":
                    with calling(self.name):
                        add_usage(parsed.delta.usage)
                    if parsed.delta.finish_reason == "ERROR":
                        raise GenerationError(self.name, "the stream ended with finish_reason 'ERROR'")
                    yield Finish(parsed.delta.finish_reason)
                    return
        raise GenerationError(self.name, "the stream ended before its message-end event")

    async def astream(
        self, topic: Query, candidates: list[Candidate], template: PromptTemplate
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`generate`, streamed (see the module docstring): the same call with ``"stream": true``, its
        sentences as they are complete, and ``done`` with the answer :meth:`generate` gives."""
        start = time.monotonic()  # timeout_s counts from here
        self._http()  # unavailable (no key): GeneratorUnavailable before anything is sent
        url, headers, body = self.request(topic.text, candidates, template)
        docids = [c.docid for c in candidates]
        spans: list[Span] = []
        settled = 0  # every citation of a span that starts before this (in the raw text) has come

        # the spans count characters of the raw text: both read the assembler's raw text, not the redacted one
        def process(_visible: str) -> tuple[list[str], list[CitedSentence]]:
            text = assembler.text[:settled]  # its last sentence, maybe cut at `settled`, is held back
            return cited_answer(text, [s for s in spans if s[0] < settled], docids, template.max_words)

        def build(_visible: str) -> RagAnswer:
            references, answer = cited_answer(assembler.text, spans, docids, template.max_words)
            return RagAnswer.build(str(topic.qid), topic.text, references, answer)

        assembler = SentenceAssembler(process, build)
        yield references_event(candidates)
        first_by = start + deadlines(self.config)[0]
        items = deadlined(
            self._stream_items(url, headers, body, first_by), self.name, *deadlines(self.config), start=start
        )
        try:
            async for item in items:
                if isinstance(item, Finish):
                    continue
                if isinstance(item, _Cited):
                    spans.append(item.span)
                    settled = max(settled, item.span[0])
                    events = assembler.feed("", boundary=True)
                else:
                    events = assembler.feed(item)
                for event in events:
                    yield event
        finally:
            await items.aclose()
        if not assembler.text.strip():
            raise GenerationError(self.name, "the model's answer is empty")
        events, answer = assembler.close()  # as generate(): the text is not cut at MAX_TOKENS
        for event in events:
            yield event
        yield StreamEvent("done", answer)
