"""Any OpenAI-compatible chat endpoint: OpenAI (GPT-4o), Azure OpenAI, a vLLM server, a llama.cpp server.

Called with httpx directly in the documented JSON shape (``POST {base_url}/chat/completions``; Azure:
``POST {endpoint}/openai/deployments/{model}/chat/completions?api-version=...`` with an ``api-key`` header),
so that every call is bounded in total time (:func:`~ragnarok.generate.http.post_json`) and every answer is
checked against that shape before it is used.
"""

from __future__ import annotations

import json

import httpx
from pydantic import BaseModel, ValidationError

from ragnarok.auth.meter import add_usage
from ragnarok.generate.base import ApiGenerator, BackendError
from ragnarok.generate.finish import whole_sentences
from ragnarok.generate.http import post_json
from ragnarok.generate.llm import Messages, answer_with_llm
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.redact import quote, redact
from ragnarok.types import Candidate, Query, RagAnswer

OPENAI_URL = "https://api.openai.com/v1"


class _Message(BaseModel):
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class ChatCompletion(BaseModel):
    """The part of a chat completion we read."""

    choices: list[_Choice]


def completion_text(data: object) -> str:
    """The answer's text; :class:`BackendError` for a body that is no chat completion, or an empty answer.
    The tokens its ``usage`` reports are counted in the request's spend."""
    if isinstance(data, dict):
        add_usage(data.get("usage"))
    try:
        choices = ChatCompletion.model_validate(data).choices
    except ValidationError as exc:
        where = ".".join(map(str, exc.errors()[0]["loc"])) or "the body"
        raise BackendError(f"HTTP 200 but not a chat completion ({where}: {exc.errors()[0]['msg']}): "
                           f"{quote(json.dumps(data))}") from None
    if not choices:
        raise BackendError("HTTP 200 but the chat completion has no choices")
    choice = choices[0]
    if choice.message.refusal:
        raise BackendError(f"the model refused: {quote(choice.message.refusal)}")
    if not (choice.message.content or "").strip():
        raise BackendError(f"the model's answer is empty (finish_reason {choice.finish_reason!r})")
    text = redact(choice.message.content or "")  # a key the backend echoes never reaches an answer
    return whole_sentences(text) if choice.finish_reason == "length" else text  # cut mid-sentence: cut there


class OpenAIChatGenerator(ApiGenerator):
    def availability(self) -> str | None:
        """None when usable now, else why not."""
        if self.config.backend == "azure" and not self.config.base_url:
            return super().availability() or "Azure OpenAI needs base_url (the resource endpoint)"
        return super().availability()

    def _make_client(self) -> httpx.Client:
        return httpx.Client(limits=httpx.Limits(max_connections=self.config.max_concurrency + 2))

    def endpoint(self) -> tuple[str, dict[str, str]]:
        """The URL to post to and the headers that authenticate (local servers take no key: none is sent)."""
        key = self.api_key()
        if self.config.backend == "azure":
            base = (self.config.base_url or "").rstrip("/")
            url = (f"{base}/openai/deployments/{self.config.model}/chat/completions"
                   f"?api-version={self.config.api_version or '2024-06-01'}")
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
        return self.guard.call(lambda timeout_s: completion_text(post_json(client, url, body, headers,
                                                                           timeout_s)))

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        return answer_with_llm(self.complete, topic, candidates, template, self.config.prompt_budget(),
                               config=self.config)
