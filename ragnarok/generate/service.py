"""The AG service's model: configured generators, created once by name through the registry."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ragnarok.components import GENERATOR_BACKENDS
from ragnarok.generate.cite import NO_ANSWER_TEXT
from ragnarok.generate.prompts import get_template
from ragnarok.protocols import Generator
from ragnarok.registry import Instances, UnknownComponentError
from ragnarok.settings import Settings
from ragnarok.types import CitedSentence, Query, RagAnswer, Request


@dataclass(frozen=True)
class GeneratorInfo:
    name: str
    backend: str
    model: str
    available: bool
    reason: str = ""
    description: str = ""


def no_context_answer(topic: Query) -> RagAnswer:
    """The answer when there is nothing to ground on: it says so and cites nothing."""
    return RagAnswer.build(str(topic.qid), topic.text, [], [CitedSentence(text=NO_ANSWER_TEXT)])


class GenerationService:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.configs = settings.generator_configs()
        self._instances: Instances[Generator] = Instances()

    def get(self, name: str) -> Generator:
        if name not in self.configs:
            raise UnknownComponentError("generator", name, sorted(self.configs))
        config = self.configs[name]
        return self._instances.get(name, lambda: GENERATOR_BACKENDS.create(config.backend, config=config))

    def generate(self, topic: Query, request: Request, generator: str, template: str, k: int) -> RagAnswer:
        chosen, prompt = self.get(generator), get_template(template)
        candidates = request.candidates[:k]
        if not candidates:
            return no_context_answer(topic)
        return chosen.generate(topic, candidates, prompt)

    def describe(self) -> list[GeneratorInfo]:
        out = []
        for name, config in sorted(self.configs.items()):
            reason = self.get(name).availability() or self._probe(config.base_url, config.backend)
            out.append(GeneratorInfo(name, config.backend, config.model, reason is None, reason or "",
                                     config.description))
        return out

    @staticmethod
    def _probe(base_url: str | None, backend: str) -> str | None:
        """Whether a self-hosted OpenAI-compatible server (vLLM, llama.cpp) answers ``GET /models``."""
        if not base_url or backend != "openai":
            return None
        try:
            httpx.get(base_url.rstrip("/") + "/models", timeout=2.0).raise_for_status()
        except httpx.HTTPError as exc:
            return f"server {base_url} is not reachable: {exc}"
        return None
