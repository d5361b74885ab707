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


def completion(
    llm: Any,
    messages: list[dict[str, str]],
    sampling: dict[str, Any],
    cancel: threading.Event,
    emit: Callable[[dict[str, Any]], bool],
) -> None:
    """One streamed chat completion, in the owner thread, from an empty cache (so that the same prompt gets the
    same answer whatever came before: llama-cpp-python would reuse the evaluation of the prompt prefix it still
    holds, and evaluate a prompt it holds whole again from its last token, which gives other logits). Each chunk
    goes to ``emit`` (False: stop); ``cancel`` is checked between tokens; the generator is closed here, always."""
    if cancel.is_set():  # stopped while it waited for the jobs before it
        return
    llm.reset()
    chunks = llm.create_chat_completion(messages=messages, stream=True, **sampling)
    try:
        for chunk in chunks:
            if cancel.is_set() or not emit(chunk):
                break
    finally:
        chunks.close()
