"""The request a generator would send for a topic, captured where it is sent, nothing sent (``ragnarok
prompt``): the generator's own ``generate`` runs, with the one call that would reach the model replaced on this
instance by one that stops with what it was given. So the messages shown are the messages sent, by the same
code: template, contexts cut to the prompt budget (with the model's tokenizer where the generator counts with
it), the answer cap."""

from __future__ import annotations

from typing import Any

from ragnarok.core.types import Candidate, Query
from ragnarok.stages.generate.llm import Messages
from ragnarok.stages.generate.prompts import PromptTemplate


class _Captured(Exception):
    def __init__(self, sent: dict[str, Any]):
        super().__init__("captured")
        self.sent = sent


def _stop_with_messages(messages: Messages, *_: Any, **__: Any) -> Any:
    raise _Captured({"messages": messages})


def sent_request(generator: Any, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> dict[str, Any]:
    """``{"messages": [...]}`` as ``generator`` would send them (plus ``documents`` for a backend that sends
    the contexts apart, Cohere's). ``ValueError`` for a generator that prompts no model. ``generator`` must be
    an instance of its own (its calls are replaced)."""
    if callable(getattr(generator, "request", None)):  # Cohere: the body of its chat call
        made = generator.request

        def body_only(*args: Any, **kwargs: Any) -> Any:
            body = made(*args, **kwargs)[2]
            raise _Captured({k: body[k] for k in ("messages", "documents") if k in body})

        generator.request = body_only
    for name in ("complete", "stream"):  # an OpenAI-compatible server's call, llama.cpp's stream
        if callable(getattr(generator, name, None)):
            setattr(generator, name, _stop_with_messages)
    if callable(getattr(generator, "_http", None)):
        generator._http = lambda: None  # no client, no key needed: nothing is sent
    try:
        generator.generate(topic, candidates, template)
    except _Captured as captured:
        return captured.sent
    raise ValueError(
        f"the generator {getattr(generator, 'name', generator)!r} prompts no model: it has no messages to show"
    )
