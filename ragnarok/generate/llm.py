"""The path every prompt-based backend shares: topic + candidates -> messages -> LLM text -> cited answer."""

from __future__ import annotations

from collections.abc import Callable

from ragnarok.generate.cite import postprocess
from ragnarok.generate.prompts import PromptTemplate, build_messages
from ragnarok.types import Candidate, Query, RagAnswer

Messages = list[dict[str, str]]


def answer_with_llm(
    complete: Callable[[Messages], str],
    topic: Query,
    candidates: list[Candidate],
    template: PromptTemplate,
    max_prompt_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
) -> RagAnswer:
    messages = build_messages(template, topic.text, candidates, max_prompt_tokens, count_tokens)
    text = complete(messages)
    references, answer = postprocess(text, [c.docid for c in candidates], max_words=template.max_words)
    return RagAnswer.build(str(topic.qid), topic.text, references, answer)
