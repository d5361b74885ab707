"""Generated text for query stages (and the LLM compressor): one call to a configured generator, bounded by
the generator's own guard (slots, deadline, retries), cached per (generator, prompt, query).

A stage writes with its own instance of the generator whose ``max_tokens`` is the stage's (a HyDE passage
needs ~160 tokens, not the answer's 1,024); an embedded llama.cpp model is therefore loaded once more for
the writers (SmolLM2-135M: ~0.3 s, ~150 MB).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from ragnarok.core.registry import ComponentArgumentError, Instances, UnknownComponentError
from ragnarok.runtime import metrics
from ragnarok.stages.generate.base import GeneratorConfig, Guard

CACHE_ENTRIES = 4_096
#: Backends that write free text (the extractive generator only picks sentences).
WRITING_BACKENDS = ("openai", "azure", "llama-cpp")
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Written:
    text: str
    cached: bool
    ms: float


class TextWriter:
    """``write(generator, messages, max_tokens)``: the generator's text for a prompt, from the cache when the
    same generator was asked the same prompt before (an LRU of ``CACHE_ENTRIES`` entries)."""

    def __init__(self, configs: dict[str, GeneratorConfig]):
        self.configs = configs
        self._instances: Instances[Any] = Instances()
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def _writer(self, generator: str, max_tokens: int) -> Any:
        from ragnarok.stages.generate.backends import GENERATOR_BACKENDS  # noqa: PLC0415

        if generator not in self.configs:
            raise UnknownComponentError("generator", generator, sorted(self.configs))
        config = self.configs[generator]
        if config.backend not in WRITING_BACKENDS:
            usable = sorted(n for n, c in self.configs.items() if c.backend in WRITING_BACKENDS)
            raise ComponentArgumentError(
                f"generator {generator!r} ({config.backend}) writes no free text; "
                f"a query stage or LLM compressor needs one of: {', '.join(usable)}"
            )
        capped = config.model_copy(update={"max_tokens": min(config.max_tokens, max_tokens)})
        return self._instances.get(
            (generator, capped.max_tokens), lambda: GENERATOR_BACKENDS.create(config.backend, config=capped)
        )

    @staticmethod
    def key(generator: str, messages: Messages, max_tokens: int) -> str:
        prompt = "\x1e".join(f"{m['role']}\x1f{m['content']}" for m in messages)
        return hashlib.sha256(f"{generator}\x1d{max_tokens}\x1d{prompt}".encode()).hexdigest()

    def check(self, generator: str) -> None:
        """Raise (404/422) unless ``generator`` exists and writes free text; builds nothing heavy."""
        self._writer(generator, 1)

    async def write(self, generator: str, messages: Messages, max_tokens: int) -> Written:
        start = time.perf_counter()
        writer = self._writer(generator, max_tokens)
        key = self.key(generator, messages, max_tokens)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                metrics.cache_lookup("query_stage", True)
                return Written(self._cache[key], True, (time.perf_counter() - start) * 1000)
        metrics.cache_lookup("query_stage", False)
        if reason := writer.availability():
            from ragnarok.stages.generate.base import GeneratorUnavailable

            raise GeneratorUnavailable(f"generator {generator!r} is unavailable: {reason}")
        guard = getattr(writer, "guard", None)
        if isinstance(guard, Guard):  # a slot, then one of the backend's own threads
            text = await guard.run(writer.complete, messages)
        else:
            text = await anyio.to_thread.run_sync(writer.complete, messages)
        with self._lock:
            self._cache[key] = text
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return Written(text, False, (time.perf_counter() - start) * 1000)
