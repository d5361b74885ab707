"""The one thread that calls into a loaded llama.cpp model.

A llama.cpp context is not safe to use from two threads: a stream closed from one thread while another was
writing its next token raised ``ValueError: generator already executing``, and decoding on a context another
thread had just reset aborted the process (``GGML_ASSERT(i1 >= 0 && i1 < ne1)``). So each loaded model has an
owner thread: the model is loaded there, and every completion runs there, one at a time, from its first token
to the closing of its generator. A caller hands it a job and waits for it (or reads what it emits); to stop a
job it sets the job's cancel flag, which the owner checks between tokens. Tokens are counted on a separate
vocabulary-only model (no context: it holds nothing another thread could change), so building a prompt never
waits for an answer being written.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LlamaOwner:
    """A daemon thread that loads a model with ``load()`` on its first job and runs every job on it."""

    def __init__(self, name: str, load: Callable[[], Any]):
        self.name, self._load = name, load
        self._jobs: queue.SimpleQueue[tuple[Callable[[Any], Any], Future] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()
        self._llm: Any = None

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                if self._llm is None:
                    self._llm = self._load()
                result = fn(self._llm)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, the thread goes on
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, fn: Callable[[Any], T]) -> Future[T]:
        """Run ``fn(model)`` in the owner thread, after the jobs before it."""
        with self._started:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"llama-{self.name}", daemon=True)
                self._thread.start()
        future: Future[T] = Future()
        self._jobs.put((fn, future))
        return future

    def run(self, fn: Callable[[Any], T]) -> T:
        """``submit(fn)`` and wait for its result."""
        return self.submit(fn).result()

    @property
    def loaded(self) -> bool:
        return self._llm is not None


class PrefixCache:
    """The prompt prefix an owner's context keeps evaluated between answers: the tokens of the system message and
    of the user message's fixed start (the instructions before the first topic- or segment-dependent text).

    A prefix is always evaluated the same way, from an empty context in one call, and an answer then evaluates
    the rest of its prompt from the prefix's end. So the same prompt gives the same answer whatever ran before:
    llama-cpp-python's own reuse (up to wherever the last prompt happened to match, or a whole cached prompt
    evaluated again from its last token) splits the evaluation elsewhere, which gives other logits. Used only
    in the owner thread."""

    def __init__(self) -> None:
        self.tokens: tuple[int, ...] = ()
        self.hits = self.misses = 0
        self._formatter: Any = None

    def _render(self, llm: Any, messages: list[dict[str, str]]) -> str | None:
        """The prompt text of ``messages`` by the model's own chat template (None: the GGUF has none)."""
        if self._formatter is None:
            template = llm.metadata.get("tokenizer.chat_template")
            if not template or llm.chat_handler is not None or llm.chat_format != "chat_template.default":
                return None  # create_chat_completion would not render with this template
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: PLC0415

            def text(token: int) -> str:
                return llm.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

            self._formatter = Jinja2ChatFormatter(template, text(llm.token_eos()), text(llm.token_bos()))
        return str(self._formatter(messages=messages).prompt)

    def prefix(self, llm: Any, messages: list[dict[str, str]], fixed: str) -> tuple[int, ...]:
        """The tokens every prompt shares with this one when only what follows ``fixed`` (the start of the last
        message) changes; () when there is no such prefix."""
        last = messages[-1]
        if not last["content"].startswith(fixed):
            fixed = ""
        whole = self._render(llm, messages)
        start = self._render(llm, [*messages[:-1], {**last, "content": fixed}])
        if whole is None or start is None:
            return ()
        chars = len(os.path.commonprefix([whole, start]))
        tokens = llm.tokenize(whole.encode("utf-8"), add_bos=False, special=True)
        head = llm.tokenize(whole[:chars].encode("utf-8"), add_bos=False, special=True)
        shared = len(os.path.commonprefix([tokens, head]))  # a token that spans the cut is left out
        return tuple(tokens[: min(shared, len(tokens) - 1)])

    def prepare(self, llm: Any, messages: list[dict[str, str]], fixed: str) -> None:
        """Leave the context holding this prompt's prefix, evaluated, and nothing after it (nothing at all when
        the prompt has no prefix): the completion then evaluates the rest of its prompt from there."""
        prefix = self.prefix(llm, messages, fixed)
        held = tuple(llm.input_ids[: len(prefix)]) if llm.n_tokens >= len(prefix) else ()
        if prefix and prefix == self.tokens and held == prefix:
            self.hits += 1
            llm.n_tokens = len(prefix)  # the next evaluation drops what came after
            return
        self.misses += 1
        self.tokens = ()
        llm.reset()
        if prefix:
            llm.eval(list(prefix))
            self.tokens = prefix


def completion(
    llm: Any,
    messages: list[dict[str, str]],
    sampling: dict[str, Any],
    cancel: threading.Event,
    emit: Callable[[dict[str, Any]], bool],
    cache: PrefixCache,
    fixed: str = "",
) -> None:
    """One streamed chat completion, in the owner thread, from the prompt prefix ``cache`` holds: the same
    prompt gets the same answer whatever came before. Each chunk goes to ``emit`` (False: stop); ``cancel`` is
    checked between tokens; the generator is closed here, always."""
    if cancel.is_set():  # stopped while it waited for the jobs before it
        return
    cache.prepare(llm, messages, fixed)
    chunks = llm.create_chat_completion(messages=messages, stream=True, **sampling)
    try:
        for chunk in chunks:
            if cancel.is_set() or not emit(chunk):
                break
    finally:
        chunks.close()
