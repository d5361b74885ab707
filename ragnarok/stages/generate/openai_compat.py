"""Any OpenAI-compatible chat endpoint: OpenAI (GPT-4o), Azure OpenAI, a vLLM server, a llama.cpp server.

Called with httpx directly in the documented JSON shape (``POST {base_url}/chat/completions``; Azure:
``POST {endpoint}/openai/deployments/{model}/chat/completions?api-version=...`` with an ``api-key`` header),
so that every call is bounded in total time (:func:`~ragnarok.stages.generate.http.post_json`) and every answer is
checked against that shape before it is used.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from ragnarok.core.meter import add_usage, calling
from ragnarok.core.types import Candidate, Query, RagAnswer
from ragnarok.runtime.redact import quote, redact
from ragnarok.stages.generate.base import ApiGenerator, BackendError, GenerationError
from ragnarok.stages.generate.finish import whole_sentences
from ragnarok.stages.generate.http import backend_client, error_message, post_json
from ragnarok.stages.generate.llm import Messages, answer_with_llm
from ragnarok.stages.generate.prompts import PromptTemplate
from ragnarok.stages.generate.sse import stream_events
from ragnarok.stages.generate.streaming import Finish, deadlines, stream_llm

OPENAI_URL = "https://api.openai.com/v1"


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _DeltaChoice(BaseModel):
    delta: _Message = _Message()
    finish_reason: str | None = None


class ChatChunk(BaseModel):
    """The part of a streamed chat completion chunk we read."""

    choices: list[_DeltaChoice] = []


class ChatCompletion(BaseModel):
    """The part of a chat completion we read."""

    choices: list[_Choice]


def error_object(data: object) -> str | None:
    """The backend's message (quoted, redacted) when ``data`` is an error object instead of an answer (OpenAI's
    ``{"error": {"message": ...}}``, as vLLM and OpenAI send in a 200 or mid-stream); None when it is not."""
    if isinstance(data, dict) and data.get("error") not in (None, "", {}, []):
        return error_message(json.dumps(data).encode())
    return None


def completion_text(data: object) -> str:
    """The answer's text; :class:`BackendError` for a body that is no chat completion (an error object: the
    backend's message), or an empty answer. The tokens its ``usage`` reports are counted in the request's spend."""
    if isinstance(data, dict):
        add_usage(data.get("usage"))
    if (message := error_object(data)) is not None:
        raise BackendError(f"HTTP 200 but the body is an error: {message}", kind="server_error")
    try:
        choices = ChatCompletion.model_validate(data).choices
    except ValidationError as exc:
        where = ".".join(map(str, exc.errors()[0]["loc"])) or "the body"
        raise BackendError(
            f"HTTP 200 but not a chat completion ({where}: {exc.errors()[0]['msg']}): {quote(json.dumps(data))}"
        ) from None
    if not choices:
        raise BackendError("HTTP 200 but the chat completion has no choices")
    choice = choices[0]
    if choice.message.refusal:
        raise BackendError(f"the model refused: {quote(choice.message.refusal)}")
    if not (choice.message.content or "").strip():
        raise BackendError(f"the model's answer is empty (finish_reason {choice.finish_reason!r})")
    text = redact(choice.message.content or "")  # a key the backend echoes never reaches an answer
    return whole_sentences(text) if choice.finish_reason == "length" else text  # cut mid-sentence: cut there


def chunk_text(data: object, generator: str) -> tuple[str, str | None]:
    """A chat completion chunk's text and finish reason; :class:`GenerationError` for an error object (the
    backend's message) or any other shape."""
    with calling(generator):
        if isinstance(data, dict):
            add_usage(data.get("usage"))
    if (message := error_object(data)) is not None:
        raise GenerationError(generator, f"the backend sent an error mid-stream: {message}", kind="server_error")
    try:
        choices = ChatChunk.model_validate(data).choices
    except ValidationError as exc:
        where = ".".join(map(str, exc.errors()[0]["loc"])) or "the event"
        raise GenerationError(
            generator,
            f"a streamed event is not a chat completion chunk ({where}: "
            f"{exc.errors()[0]['msg']}): {quote(json.dumps(data))}",
        ) from None
    if not choices:  # the usage-only last chunk
        return "", None
    delta = choices[0].delta
    if delta.refusal:
        raise GenerationError(generator, f"the model refused: {quote(delta.refusal)}")
    return delta.content or "", choices[0].finish_reason


class OpenAIChatGenerator(ApiGenerator):
    def availability(self) -> str | None:
        """None when usable now, else why not."""
        if self.config.backend == "azure" and not self.config.base_url:
            return super().availability() or "Azure OpenAI needs base_url (the resource endpoint)"
        return super().availability()

    def _make_client(self) -> httpx.Client:
        return backend_client(self.config.max_concurrency)

    def endpoint(self) -> tuple[str, dict[str, str]]:
        """The URL to post to and the headers that authenticate (local servers take no key: none is sent)."""
        key = self.api_key()
        if self.config.backend == "azure":
            base = (self.config.base_url or "").rstrip("/")
            url = (
                f"{base}/openai/deployments/{self.config.model}/chat/completions"
                f"?api-version={self.config.api_version or '2024-06-01'}"
            )
            return url, {"api-key": key}
        url = f"{(self.config.base_url or OPENAI_URL).rstrip('/')}/chat/completions"
        return url, ({"authorization": f"Bearer {key}"} if key else {})

    def complete(self, messages: Messages) -> str:
        client = self._http()
        url, headers = self.endpoint()
        c = self.config
        body = {"model": c.model, "messages": messages, "max_tokens": c.max_tokens, "temperature": c.temperature}
        for name in ("frequency_penalty", "presence_penalty", "repeat_penalty"):  # repeat_penalty: llama.cpp's
            if getattr(c, name) is not None:
                body[name] = getattr(c, name)
        return self.guard.call(lambda timeout_s: completion_text(post_json(client, url, body, headers, timeout_s)))

    async def stream_text(self, messages: Messages, first_by: float | None = None) -> AsyncIterator[str | Finish]:
        """The answer's text as the server writes it (``stream: true``; OpenAI's chat completion chunks), then
        a :class:`Finish` with its finish reason; the usage of the last chunk (``stream_options``) is counted.
        ``first_by``: when the first token is due (a ``time.monotonic()``; see :func:`stream_events`)."""
        self._http()  # unavailable (no key): GeneratorUnavailable before anything is sent
        url, headers = self.endpoint()
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": messages,
            "max_tokens": c.max_tokens,
            "temperature": c.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for name in ("frequency_penalty", "presence_penalty", "repeat_penalty"):
            if getattr(c, name) is not None:
                body[name] = getattr(c, name)
        reason, ended = None, False
        async with aclosing(stream_events(self.guard, url, body, headers, deadlines(c)[0], first_by)) as events:
            async for event, data in events:
                if event == "whole":  # a server that does not stream: its whole answer at once
                    try:
                        with calling(self.name):
                            text = completion_text(data)
                    except BackendError as exc:
                        raise GenerationError(self.name, exc.cause, kind=exc.kind) from None
                    yield text
                    ended = True
                    break
                if data == "[DONE]":
                    ended = True
                    break
                piece, finish_reason = chunk_text(data, self.name)
                reason = finish_reason or reason
                if piece:
                    yield piece
        if not ended and reason is None:  # the connection closed mid-answer: no partial text as the answer
            raise GenerationError(
                self.name, "the stream ended before the answer did (no finish_reason, no [DONE])", kind="connection"
            )
        yield Finish(reason)

    def astream(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> AsyncIterator[Any]:
        return stream_llm(self.stream_text, topic, candidates, template, self.config.prompt_budget(), self.config)

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        return answer_with_llm(
            self.complete, topic, candidates, template, self.config.prompt_budget(), config=self.config
        )
