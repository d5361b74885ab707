"""Any OpenAI-compatible chat endpoint: OpenAI (GPT-4o), Azure OpenAI, a vLLM server, a llama.cpp server."""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion

from ragnarok.generate.base import ApiGenerator, GenerationError, is_retryable_status
from ragnarok.generate.llm import Messages, answer_with_llm
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.types import Candidate, Query, RagAnswer


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    return isinstance(exc, openai.APIStatusError) and is_retryable_status(exc.status_code)


class OpenAIChatGenerator(ApiGenerator):
    def availability(self) -> str | None:
        """None when usable now, else why not."""
        if self.config.backend == "azure" and not self.config.base_url:
            return super().availability() or "Azure OpenAI needs base_url (the resource endpoint)"
        return super().availability()

    def _make_client(self) -> Any:
        # local servers (vLLM, llama.cpp) take any key
        common = {"api_key": self.api_key("unused"), "timeout": self.config.timeout_s, "max_retries": 0}
        if self.config.backend == "azure":
            return openai.AzureOpenAI(azure_endpoint=self.config.base_url,
                                      api_version=self.config.api_version or "2024-06-01", **common)
        return openai.OpenAI(base_url=self.config.base_url, **common)

    def complete(self, messages: Messages) -> str:
        client = self._http()

        body = {"model": self.config.model, "messages": messages, "max_tokens": self.config.max_tokens,
                "temperature": self.config.temperature}

        def call() -> str:
            # the SDK's plain-request API (retries, auth, typed answer) without chat.completions.create's
            # recursive TypedDict transform of the prompt, a third of this process's CPU per answer
            response = client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            return response.choices[0].message.content or ""

        try:
            return self.guard.call(call, _retryable)
        except openai.APITimeoutError:
            raise GenerationError(self.name, f"no answer within {self.config.timeout_s:g} s", timeout=True) from None
        except openai.APIConnectionError as exc:
            raise GenerationError(self.name, f"cannot reach {self.config.base_url or 'api.openai.com'}: {exc}") from None
        except openai.APIStatusError as exc:
            raise GenerationError(self.name, f"HTTP {exc.status_code}: {str(exc)[:300]}") from None
        except (openai.OpenAIError, IndexError, AttributeError) as exc:
            raise GenerationError(self.name, f"unexpected answer: {exc}") from None

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        budget = max(512, self.config.context_tokens - self.config.max_tokens - 64)
        return answer_with_llm(self.complete, topic, candidates, template, budget)
