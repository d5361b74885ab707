"""The generator backends by name (``openai``, ``azure``, ``cohere``, ``llama-cpp``, ``extractive``): the registry
the AG service, the query writers and the LLM compressor create generators from. In the generate stage, so its
users need not import the components above it; :mod:`ragnarok.stages.components` re-exports it."""

from __future__ import annotations

from ragnarok.core.protocols import Generator
from ragnarok.core.registry import Registry
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.cohere_chat import CohereGenerator
from ragnarok.stages.generate.extractive import ExtractiveGenerator
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator
from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator

GENERATOR_BACKENDS: Registry[Generator] = Registry("generator backend")


def _extractive(config: GeneratorConfig) -> Generator:
    """``model``: the similarity (minilm, bm25); ``max_answer_words`` and ``max_contexts`` as configured."""
    return ExtractiveGenerator(
        name=config.name,
        max_words=config.max_answer_words or 150,
        max_contexts=config.max_contexts or 10,
        similarity="bm25" if config.model == "bm25" else "minilm",
    )


GENERATOR_BACKENDS.register("openai", OpenAIChatGenerator, "OpenAI or any OpenAI-compatible server (vLLM, llama.cpp)")
GENERATOR_BACKENDS.register("azure", OpenAIChatGenerator, "Azure OpenAI")
GENERATOR_BACKENDS.register("cohere", CohereGenerator, "Cohere chat with native document grounding")
GENERATOR_BACKENDS.register("llama-cpp", LlamaCppGenerator, "an embedded GGUF model via llama-cpp-python")
GENERATOR_BACKENDS.register("extractive", _extractive, "no model: the candidates' best sentences, cited")
