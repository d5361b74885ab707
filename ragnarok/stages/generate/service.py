"""The AG service's model: configured generators, created once by name through the registry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import anyio.to_thread
import httpx

from ragnarok.core.protocols import Generator
from ragnarok.core.registry import Instances, UnknownComponentError
from ragnarok.core.settings import Settings
from ragnarok.core.types import CitedSentence, Query, RagAnswer, Request
from ragnarok.runtime.redact import register_env
from ragnarok.stages.generate.backends import GENERATOR_BACKENDS
from ragnarok.stages.generate.base import GeneratorConfig, Guard
from ragnarok.stages.generate.cite import NO_ANSWER_TEXT
from ragnarok.stages.generate.prompts import PromptTemplate, get_template
from ragnarok.stages.generate.streaming import StreamEvent, answer_events


@dataclass(frozen=True)
class GeneratorInfo:
    name: str
    backend: str
    model: str
    available: bool
    reason: str = ""
    description: str = ""
    paid: bool = False  # whether a call costs money (GeneratorConfig.costs_money): the arena leaves it out


def no_context_answer(topic: Query) -> RagAnswer:
    """The answer when there is nothing to ground on: it says so and cites nothing."""
    return RagAnswer.build(str(topic.qid), topic.text, [], [CitedSentence(text=NO_ANSWER_TEXT)])


class GenerationService:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.configs = settings.generator_configs()
        self._instances: Instances[Generator] = Instances()
        self._probed: dict[str, tuple[float, str | None]] = {}  # name -> (when, why not reachable)
        for config in self.configs.values():
            register_env(config.api_key_env)  # their values are masked in every message and log line

    def get(self, name: str) -> Generator:
        if name not in self.configs:
            raise UnknownComponentError("generator", name, sorted(self.configs))
        config = self.configs[name]
        return self._instances.get(name, lambda: self._create(config))

    def _create(self, config: GeneratorConfig) -> Generator:
        if config.backend == "extractive" and config.model != "bm25":  # reads MiniLM vectors of sentences
            from ragnarok.stages.embed.vectors import text_vectors  # noqa: PLC0415

            text_vectors("minilm").add_stores_under(self.settings.data_dir)  # this service's sentence stores
        return GENERATOR_BACKENDS.create(config.backend, config=config)

    def template(self, generator: str, template: str | None) -> PromptTemplate:
        """The named template; none named: the generator's own (its ``template``), else ``default_template``."""
        config = self.configs.get(generator)
        return get_template(template or (config.template if config else None) or self.settings.default_template)

    def generate(self, topic: Query, request: Request, generator: str, template: str | None, k: int) -> RagAnswer:
        chosen, prompt = self.get(generator), self.template(generator, template)
        candidates = request.candidates[:k]
        if not candidates:
            return no_context_answer(topic)
        return chosen.generate(topic, candidates, prompt)

    async def agenerate(
        self, topic: Query, request: Request, generator: str, template: str | None, k: int
    ) -> RagAnswer:
        """:meth:`generate` for the event loop: the request's deadline starts, and it waits for a slot of the
        backend, here, without a thread; only a request that holds a slot gets a worker thread, one of the
        backend's own (:meth:`Guard.run`). So a backend that hangs holds at most its own threads (as many as
        its slots), never one of anyio's default limiter, and the requests queued behind it get a 504 "busy"
        after ``slot_wait_s`` while every other backend and route keeps its threads."""
        chosen, prompt = self.get(generator), self.template(generator, template)
        candidates = request.candidates[:k]
        if not candidates:
            return no_context_answer(topic)
        guard = getattr(chosen, "guard", None)
        if not isinstance(guard, Guard):
            return await anyio.to_thread.run_sync(chosen.generate, topic, candidates, prompt)
        return await guard.run(chosen.generate, topic, candidates, prompt)

    async def astream(
        self, topic: Query, request: Request, generator: str, template: str | None, k: int
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`agenerate`, streamed (:mod:`ragnarok.stages.generate.streaming`): a backend that streams gives its
        text as it is written, any other (extractive) its answer's sentences at once; ``done`` carries the
        answer :meth:`agenerate` returns."""
        chosen, prompt = self.get(generator), self.template(generator, template)
        candidates = request.candidates[:k]
        stream = getattr(chosen, "astream", None)  # its events as it writes (ragnarok.stages.generate.streaming)
        if not candidates or stream is None:
            answer = await self.agenerate(topic, request, generator, template, k)
            async for event in answer_events(answer, candidates):
                yield event
            return
        events = stream(topic, candidates, prompt)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    async def describe(self) -> list[GeneratorInfo]:
        """Every generator and whether it can run here now. Self-hosted servers are probed all at once, each
        within ``generator_probe_timeout_s``, and what a probe found is kept ``generator_probe_cache_s``."""
        reasons = await anyio.to_thread.run_sync(  # may import llama_cpp the first time
            lambda: {name: self.get(name).availability() for name in self.configs}
        )
        async with httpx.AsyncClient() as client, anyio.create_task_group() as group:
            for name, config in self.configs.items():
                if reasons[name] is None and config.base_url and config.backend == "openai":
                    group.start_soon(self._probe_into, reasons, client, config)
        return [
            GeneratorInfo(
                name, c.backend, c.model, reasons[name] is None, reasons[name] or "", c.description, c.costs_money
            )
            for name, c in sorted(self.configs.items())
        ]

    async def _probe_into(
        self, reasons: dict[str, str | None], client: httpx.AsyncClient, config: GeneratorConfig
    ) -> None:
        reasons[config.name] = await self._probe(client, config)

    async def _probe(self, client: httpx.AsyncClient, config: GeneratorConfig) -> str | None:
        """Whether a self-hosted OpenAI-compatible server (vLLM, llama.cpp) answers ``GET /models``."""
        when, reason = self._probed.get(config.name, (float("-inf"), None))
        if time.monotonic() - when < self.settings.generator_probe_cache_s:
            return reason
        base, timeout_s = (config.base_url or "").rstrip("/"), self.settings.generator_probe_timeout_s
        reason = f"server {base} did not answer GET /models within {timeout_s:g} s"
        with anyio.move_on_after(timeout_s):
            try:
                (await client.get(base + "/models", timeout=timeout_s)).raise_for_status()
                reason = None
            except httpx.HTTPError as exc:
                reason = f"server {base} is not reachable: {exc}"
        self._probed[config.name] = (time.monotonic(), reason)
        return reason
