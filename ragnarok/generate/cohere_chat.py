"""Cohere Command R+ with native ``documents`` grounding (chat API v2).

Cohere answers with span-level citations (``start``/``end`` in the answer text, ``sources`` naming our
documents). As in the Ragnarök paper, each span is mapped to the sentence that contains it: we write the
span's documents as a ``[i]`` marker at the end of that sentence, then run the same post-processing as for
every other backend (one path for renumbering, limits and cleaning).
"""

from __future__ import annotations

from typing import Any

import blingfire
import httpx

from ragnarok.generate.base import ApiGenerator, GenerationError, http_status, is_retryable_status
from ragnarok.generate.cite import postprocess
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.types import Candidate, Query, RagAnswer


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError) or is_retryable_status(http_status(exc))


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
    def _make_client(self) -> Any:
        import cohere  # noqa: PLC0415 - optional dependency, loaded on first use

        kwargs: dict[str, Any] = {"timeout": self.config.timeout_s, "max_retries": 0}
        if self.config.base_url:
            kwargs["base_url"] = self.config.base_url
        return cohere.ClientV2(api_key=self.api_key(), **kwargs)

    def chat(self, topic: str, candidates: list[Candidate], template: PromptTemplate) -> tuple[str, list[Any]]:
        client = self._http()
        documents = [
            {"id": str(i + 1), "data": {"title": c.doc.title or "", "snippet": c.doc.segment or ""}}
            for i, c in enumerate(candidates)
        ]
        messages = [{"role": "system", "content": template.system}, {"role": "user", "content": topic}]

        def call() -> Any:
            return client.chat(model=self.config.model, messages=messages, documents=documents,
                               max_tokens=self.config.max_tokens, temperature=self.config.temperature)

        try:
            response = self.guard.call(call, _retryable)
        except httpx.TimeoutException:
            raise GenerationError(self.name, f"no answer within {self.config.timeout_s:g} s", timeout=True) from None
        except httpx.TransportError as exc:
            raise GenerationError(self.name, f"cannot reach {self.config.base_url or 'api.cohere.com'}: {exc}") from None
        except Exception as exc:  # the SDK's ApiError and parsing errors
            status = http_status(exc)
            raise GenerationError(self.name, f"HTTP {status}: {str(exc)[:300]}" if status else str(exc)) from None
        text = "".join(part.text for part in (response.message.content or []) if getattr(part, "text", None))
        return text, list(response.message.citations or [])

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        text, citations = self.chat(topic.text, candidates, template)
        spans = []
        for c in citations:
            numbers = [int(s.id) for s in (c.sources or []) if getattr(s, "id", None) and str(s.id).isdigit()]
            if c.start is not None and numbers:
                spans.append((c.start, c.end or c.start, numbers))
        references, answer = postprocess(spans_to_markers(text, spans), [c.docid for c in candidates],
                                         max_words=template.max_words)
        return RagAnswer.build(str(topic.qid), topic.text, references, answer)
