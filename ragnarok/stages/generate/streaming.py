"""Answers as they are written: a generator's text streamed as events, cited sentence by sentence.

Every backend streams ``references``, ``delta``, ``sentence`` and ``done`` events; the sentences go through the
very post-processing of the non-streamed answer, so ``done`` is exactly what the same request without
streaming returns. Deadlines bound the first piece, each stall and the whole stream, and closing the stream
closes the backend's.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ragnarok.core.types import Candidate, CitedSentence, Query, RagAnswer
from ragnarok.runtime import metrics
from ragnarok.runtime.redact import redact, secrets
from ragnarok.stages.generate.base import GenerationError, GeneratorConfig
from ragnarok.stages.generate.cite import GROUP_SRC
from ragnarok.stages.generate.finish import whole_sentences
from ragnarok.stages.generate.llm import Messages, finish, postprocessed, sized
from ragnarok.stages.generate.prompts import PromptTemplate, build_messages

#: Characters after which a sentence may have ended: only then is the text so far post-processed again.
_BOUNDARY = frozenset(".!?…\n]】")
log = logging.getLogger(__name__)
#: Citation markers at the end of a text: whole groups (``[1]``, ``[Doc 2]``, ``【3】``), then maybe one still open.
_TRAILING_MARKERS = re.compile(rf"(?:\s*{GROUP_SRC})*\s*(?:[\[【][^\]】\n]{{0,40}})?$", re.I)


@dataclass(frozen=True)
class Finish:
    """The end of a backend's text: why it stopped. ``length`` (``max_tokens``, or the embedded model stopped at
    the word cap or a repeat) cuts the answer at its last whole sentence, as the non-streamed answer is cut."""

    reason: str | None = None


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: ``event`` names it, ``data`` is its JSON payload (``done``: the answer)."""

    event: str
    data: Any


class StreamDeadline(GenerationError):
    """A stream's deadline passed: ``deadline`` is ``first_token``, ``stall`` or ``total``."""

    def __init__(self, generator: str, deadline: str, seconds: float):
        self.deadline = deadline
        what = {
            "first_token": f"no first token within {seconds:g} s (first_token_s)",
            "stall": f"no token for {seconds:g} s (stall_s)",
            "total": f"the answer took over {seconds:g} s (timeout_s)",
        }[deadline]
        super().__init__(generator, what, timeout=True)


def deadlines(config: GeneratorConfig) -> tuple[float, float, float]:
    """``(first_token_s, stall_s, total_s)`` of a generator (unset ones: its ``timeout_s``)."""
    total = config.timeout_s
    return (min(config.first_token_s or total, total), min(config.stall_s or total, total), total)


async def deadlined(
    pieces: AsyncIterator[Any],
    generator: str,
    first_token_s: float,
    stall_s: float,
    total_s: float,
    start: float | None = None,
) -> AsyncIterator[Any]:
    """``pieces`` within the three deadlines (see the module docstring), the total counted from ``start`` (a
    ``time.monotonic()``; default: now), the time the stream was asked for; the source is closed on the way
    out, however the consumer stops (a deadline, an error, a client that went away). A failure is counted and
    logged (:func:`reported`)."""
    start, first, chars = time.monotonic() if start is None else start, True, 0
    try:
        while True:
            left = total_s - (time.monotonic() - start)
            wait = min(first_token_s if first else stall_s, left)
            try:
                if left <= 0:  # pieces that arrive at once never wait: the total is checked between them
                    raise TimeoutError
                with anyio.fail_after(wait):
                    piece = await pieces.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                which = "total" if wait >= left else ("first_token" if first else "stall")
                raise reported(
                    StreamDeadline(
                        generator, which, {"first_token": first_token_s, "stall": stall_s, "total": total_s}[which]
                    ),
                    chars,
                ) from None
            except GenerationError as exc:
                raise reported(exc, chars) from None
            if isinstance(piece, str) and piece:
                first, chars = False, chars + len(piece)
            yield piece
    finally:
        close = getattr(pieces, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


def reported(exc: GenerationError, chars: int = 0, kind: str | None = None) -> GenerationError:
    """``exc``, counted in ``ragnarok_backend_failures`` (``kind``, else its own, else the cause its message
    says) and logged in one line, once: a stream's failure, however far it got (``chars`` of text so far)."""
    if not getattr(exc, "reported", False):
        cause = kind or getattr(exc, "kind", None) or metrics.failure_cause(exc.cause, exc.timeout)
        metrics.backend_failure(exc.generator, cause)
        log.warning(
            "generator %r: the stream failed (%s) after %d characters: %s", exc.generator, cause, chars, exc.cause
        )
        exc.reported = True  # type: ignore[attr-defined]
    return exc


Process = Callable[[str], tuple[list[str], list[CitedSentence]]]


def settled(text: str) -> str:
    """``text`` without the citation markers at its end, whole or still arriving (``… first. [2]``, ``… [1, ``):
    post-processing may give them to the sentence before (:mod:`ragnarok.stages.generate.cite`), so a sentence is known
    to be complete, its citations with it, only once a word follows them."""
    return text[: _TRAILING_MARKERS.search(text).start()]  # type: ignore[union-attr] # it matches at the end


def _secret_start(text: str, secrets: list[str]) -> int:
    """How many characters at the end of ``text`` could be the start of one of ``secrets`` (0: none)."""
    held = 0
    for secret in secrets:
        for k in range(min(len(secret) - 1, len(text)), held, -1):
            if text.endswith(secret[:k]):
                held = k
                break
    return held


class SentenceAssembler:
    """The text so far -> the sentences that are complete, post-processed exactly as the final answer is.

    ``process(text)`` gives ``(references, sentences)`` of a text as the backend's non-streamed answer makes
    them, ``build(text)`` the whole answer. A sentence is final once another one follows it in the processed
    text (the last may still grow). The text is redacted, and an end of it that could be the start of a
    configured secret is held back from ``delta`` events until the next piece says, so a key the backend echoes
    is never streamed, not even split across pieces."""

    def __init__(self, process: Process, build: Callable[[str], RagAnswer]):
        self.process, self.build = process, build
        self.text, self.sent, self.delta_sent, self.dirty = "", 0, 0, False
        self.secrets = secrets()

    @classmethod
    def for_llm(
        cls,
        topic: Query,
        candidates: list[Candidate],
        max_words: int,
        config: GeneratorConfig | None,
        notes: dict[str, Any] | None = None,
    ) -> SentenceAssembler:
        """The post-processing of every prompt-based backend (:func:`~ragnarok.stages.generate.llm.finish`)."""
        return cls(
            lambda text: postprocessed(text, candidates, max_words, config),
            lambda text: finish(text, topic, candidates, max_words, config, notes),
        )

    @staticmethod
    def _sentence(index: int, references: list[str], sentence: CitedSentence) -> StreamEvent:
        return StreamEvent(
            "sentence",
            {
                "index": index,
                "text": sentence.text,
                "citations": sentence.citations,
                "docids": [references[i] for i in sentence.citations],
            },
        )

    def feed(self, piece: str, boundary: bool = False) -> list[StreamEvent]:
        """The events for a new piece of text: its ``delta``, then any sentence it completed (looked for when
        the piece holds a sentence end, or ``boundary`` says something else changed: a citation arrived)."""
        self.text += piece
        events = []
        visible = redact(self.text)
        upto = max(self.delta_sent, len(visible) - _secret_start(visible, self.secrets))
        if upto > self.delta_sent:
            events.append(StreamEvent("delta", {"text": visible[self.delta_sent : upto]}))
            self.delta_sent = upto
        # a sentence can only have ended since the last look if a sentence end (or a citation) arrived
        self.dirty = self.dirty or boundary or any(ch in _BOUNDARY for ch in piece)
        if not self.dirty or not (piece.strip() or boundary):
            return events
        references, answer = self.process(settled(visible))
        for index in range(self.sent, len(answer) - 1):
            events.append(self._sentence(index, references, answer[index]))
            self.dirty = False  # until the next sentence end
        self.sent = max(self.sent, len(answer) - 1)
        return events

    def close(self, reason: str | None = None) -> tuple[list[StreamEvent], RagAnswer]:
        """The last events (the held-back text, the sentences not yet sent) and the whole answer, built from
        the whole text as the non-streamed answer is (``length``: cut at the last whole sentence)."""
        visible = redact(self.text)
        events = [StreamEvent("delta", {"text": visible[self.delta_sent :]})] if len(visible) > self.delta_sent else []
        self.delta_sent = len(visible)
        answer = self.build(whole_sentences(visible) if reason == "length" else visible)
        events += [self._sentence(i, answer.references, s) for i, s in enumerate(answer.answer) if i >= self.sent]
        return events, answer


def references_event(candidates: list[Candidate]) -> StreamEvent:
    return StreamEvent("references", {"docids": [c.docid for c in candidates]})


async def assemble(
    pieces: AsyncIterator[Any],
    assembler: SentenceAssembler,
    config: GeneratorConfig,
    empty_is_error: bool = True,
    start: float | None = None,
) -> AsyncIterator[StreamEvent]:
    """A backend's pieces of text (then a :class:`Finish`), within its deadlines, as ``delta`` and ``sentence``
    events, then the last ones and ``done``. No text at all is a :class:`GenerationError` (as the non-streamed
    answer's is) unless ``empty_is_error`` is off (the embedded model: its empty answer is the extractive one)."""
    reason = None
    source = deadlined(pieces, config.name, *deadlines(config), start=start)
    try:
        async for piece in source:
            if isinstance(piece, Finish):
                reason = piece.reason
            elif piece:
                for event in assembler.feed(piece):
                    yield event
    finally:
        await source.aclose()
    if empty_is_error and not assembler.text.strip():
        raise GenerationError(config.name, f"the model's answer is empty (finish_reason {reason!r})")
    events, answer = assembler.close(reason)
    for event in events:
        yield event
    yield StreamEvent("done", answer)


async def stream_llm(
    stream_text: Callable[[Messages, float], AsyncIterator[Any]],
    topic: Query,
    candidates: list[Candidate],
    template: PromptTemplate,
    max_prompt_tokens: int,
    config: GeneratorConfig,
    count_tokens: Callable[[str], int] | None = None,
) -> AsyncIterator[StreamEvent]:
    """:func:`~ragnarok.stages.generate.llm.answer_with_llm`, streamed: the same prompt, the same answer at the end."""
    start = time.monotonic()  # the prompt's making counts in timeout_s too
    if config.max_contexts is not None:
        candidates = candidates[: config.max_contexts]
    template = sized(template, config)
    messages = build_messages(template, topic.text, candidates, max_prompt_tokens, count_tokens)
    yield references_event(candidates)
    assembler = SentenceAssembler.for_llm(topic, candidates, template.max_words, config, {"contexts": len(candidates)})
    events = assemble(stream_text(messages, start + deadlines(config)[0]), assembler, config, start=start)
    try:
        async for event in events:
            yield event
    finally:
        await events.aclose()


async def answer_events(answer: RagAnswer, candidates: list[Candidate]) -> AsyncIterator[StreamEvent]:
    """A finished answer as a stream (a backend that writes its answer at once: the extractive one)."""
    yield references_event(candidates)
    for index, sentence in enumerate(answer.answer):
        yield StreamEvent("delta", {"text": (" " if index else "") + sentence.text})
        yield StreamEvent(
            "sentence",
            {
                "index": index,
                "text": sentence.text,
                "citations": sentence.citations,
                "docids": [answer.references[i] for i in sentence.citations],
            },
        )
    yield StreamEvent("done", answer)


def sentence_texts(events: list[StreamEvent]) -> list[tuple[str, list[int]]]:
    """The sentences a list of events streamed (for checks: they equal the final answer's)."""
    return [(e.data["text"], e.data["citations"]) for e in events if e.event == "sentence"]
