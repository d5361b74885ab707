"""``metadata.prompt`` of a 2025 answer line (``ragnarok run --with-prompt``): the prompt the pipeline's
generator was given for the topic, rendered again here from the same template, candidates and token budget.

The messages are written as ``system: ...`` and ``user: ...`` blocks, a blank line apart. The budget is
counted with :func:`~ragnarok.stages.generate.prompts.approx_tokens` (no model is loaded to count): where a model's
own tokenizer cut the segments shorter, the written prompt holds a little more of them than the model read.
A generator that prompts no model (the extractive baseline) gets one line saying so.
"""

from __future__ import annotations

from ragnarok.core.settings import Settings
from ragnarok.core.spec import Pipeline
from ragnarok.core.types import Candidate
from ragnarok.stages.generate.llm import sized
from ragnarok.stages.generate.prompts import build_messages, get_template


def rendered_prompt(pipeline: Pipeline, settings: Settings, topic: str, candidates: list[Candidate]) -> str:
    """The prompt ``pipeline``'s generator renders for ``topic`` over ``candidates`` (those it was handed)."""
    stage = pipeline.generate
    if stage is None:
        raise ValueError(f"the pipeline {pipeline} has no generator: it writes no prompt")
    config = settings.generator_configs().get(stage.name)
    if config is None:  # a generator of a remote AG service (generation_url): its template as this one renders it
        template = get_template(stage.template or settings.default_template)
        messages = build_messages(template, topic, candidates)
    else:
        if config.max_contexts is not None:
            candidates = candidates[: config.max_contexts]
        if config.backend == "extractive":
            return (
                f"none: the extractive generator prompts no model; it answers with sentences of the top "
                f"{len(candidates)} segments that match the topic: {topic}"
            )
        template = sized(get_template(stage.template or config.template or settings.default_template), config)
        messages = build_messages(template, topic, candidates, config.prompt_budget())
    return as_text(messages)


def as_text(messages: list[dict[str, str]]) -> str:
    """Chat messages as ``role: content`` blocks a blank line apart (``metadata.prompt``'s form)."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)
