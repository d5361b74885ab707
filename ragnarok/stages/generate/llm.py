"""The path every prompt-based backend shares: topic + candidates -> messages -> LLM text -> cited answer.

Per generator (:class:`~ragnarok.core.generator_config.GeneratorConfig`): the top ``max_contexts`` candidates within the
prompt budget (``prompt_budget``), the answer capped at ``max_answer_words`` (the prompt asks for it, and the
answer keeps its leading sentences that fit), repeated sentences dropped (``drop_repeats``) and citations
attributed after the fact (``attribution``); an answer that then cites nothing is, with ``uncited="no_answer"``,
replaced by :data:`~ragnarok.stages.generate.cite.NO_ANSWER_TEXT` citing nothing (a streamed answer's sentences wait
for a citing one: until then the replacement stands); what was done goes into the answer's notes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragnarok.core.types import Candidate, CitedSentence, Query, RagAnswer
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.cite import NO_ANSWER_TEXT, sentences, to_references, truncate
from ragnarok.stages.generate.finish import GeneratedAnswer, attribute, citation_origin, drop_repeats
from ragnarok.stages.generate.prompts import PromptTemplate, build_messages

Messages = list[dict[str, str]]
#: ``notes["fallback"]`` of an answer that ``uncited="no_answer"`` replaced.
UNCITED_FALLBACK = (
    "no sentence of the model's answer cites a context or is supported by one: the answer says "
    "the contexts do not hold the answer"
)


def sized(template: PromptTemplate, config: GeneratorConfig | None) -> PromptTemplate:
    """The template with the generator's answer cap when that is lower than the template's."""
    if config is None or config.max_answer_words is None or config.max_answer_words >= template.max_words:
        return template
    return template.model_copy(update={"max_words": config.max_answer_words})


def _pairs(
    text: str, candidates: list[Candidate], max_words: int, config: GeneratorConfig | None, notes: dict[str, Any]
) -> list[tuple[str, list[int]]]:
    """Sentences with 1-based citations: repeats dropped, the word cap, attribution (``notes`` say what)."""
    pairs = sentences(text)
    if config is None or config.drop_repeats:
        pairs, notes["repeats_dropped"] = drop_repeats(pairs)
    pairs = truncate(pairs, max_words)
    mode = config.attribution if config is not None else "off"
    pairs, counts = attribute(pairs, [c.doc.segment or "" for c in candidates], mode)
    if mode != "off":
        notes.update(counts)
    citing = sum(1 for _, numbers in pairs if numbers)  # sentences that cite, after attribution
    notes["citations"] = citation_origin(citing - counts["citations_attributed"], counts["citations_attributed"])
    if pairs and not citing and config is not None and config.uncited == "no_answer":
        notes["fallback"] = UNCITED_FALLBACK  # an invention the contexts do not support: say they lack it
        return [(NO_ANSWER_TEXT, [])]
    return pairs


def postprocessed(
    text: str, candidates: list[Candidate], max_words: int, config: GeneratorConfig | None = None
) -> tuple[list[str], list[CitedSentence]]:
    """``(references, sentences)`` of model output as :func:`finish` makes them (a streamed answer's text so
    far: :mod:`ragnarok.stages.generate.streaming`)."""
    return to_references(_pairs(text, candidates, max_words, config, {}), [c.docid for c in candidates])


def finish(
    text: str,
    topic: Query,
    candidates: list[Candidate],
    max_words: int,
    config: GeneratorConfig | None = None,
    notes: dict[str, Any] | None = None,
) -> RagAnswer:
    """Model output -> a cited answer: sentences, repeats dropped, the word cap, attribution, references."""
    notes = dict(notes or {})
    pairs = _pairs(text, candidates, max_words, config, notes)
    if not pairs and candidates:  # only code or markup: never an empty answer while there are candidates
        return _extractive_instead(topic, candidates, max_words, notes)
    references, answer = to_references(pairs, [c.docid for c in candidates])
    built = GeneratedAnswer.build(str(topic.qid), topic.text, references, answer)
    built.notes = notes
    return built


def _extractive_instead(topic: Query, candidates: list[Candidate], max_words: int, notes: dict[str, Any]) -> RagAnswer:
    """The extractive baseline's answer (BM25 similarity: no model to load) when the model wrote no sentence;
    the notes (the /rag trace) say so."""
    from ragnarok.stages.generate.extractive import ExtractiveGenerator  # noqa: PLC0415
    from ragnarok.stages.generate.prompts import get_template  # noqa: PLC0415

    template = get_template("ragnarok").model_copy(update={"max_words": max_words})
    answer = ExtractiveGenerator(similarity="bm25").generate(topic, candidates, template)
    answer.notes = {
        **notes,
        **getattr(answer, "notes", {}),  # type: ignore[attr-defined]
        "fallback": "the model wrote no sentence (only code or markup): the extractive answer",
    }
    return answer


def answer_with_llm(
    complete: Callable[[Messages], str],
    topic: Query,
    candidates: list[Candidate],
    template: PromptTemplate,
    max_prompt_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    config: GeneratorConfig | None = None,
) -> RagAnswer:
    if config is not None and config.max_contexts is not None:
        candidates = candidates[: config.max_contexts]
    template = sized(template, config)
    messages = build_messages(template, topic.text, candidates, max_prompt_tokens, count_tokens)
    text = complete(messages)
    notes = {"contexts": len(candidates)}
    return finish(text, topic, candidates, template.max_words, config, notes)
