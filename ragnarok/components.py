"""The one registry of components, by role. Registration is explicit, cheap and does no I/O:
factories build objects whose heavy parts (indexes, models, clients) load on first use."""

from __future__ import annotations

from ragnarok.generate.base import GeneratorConfig
from ragnarok.generate.cohere_chat import CohereGenerator
from ragnarok.generate.extractive import ExtractiveGenerator
from ragnarok.generate.llama_cpp import LlamaCppGenerator
from ragnarok.generate.openai_compat import OpenAIChatGenerator
from ragnarok.protocols import Generator, Retriever
from ragnarok.registry import Registry, UnknownComponentError
from ragnarok.retrieve.lucene import LuceneRetriever
from ragnarok.retrieve.remote import RemoteRetriever
from ragnarok.settings import Settings

RETRIEVERS: Registry[Retriever] = Registry("retriever")
GENERATOR_BACKENDS: Registry[Generator] = Registry("generator backend")


def _lucene(feedback: str):
    def factory(name: str, source: str, settings: Settings) -> Retriever:
        if source.startswith(("http://", "https://")):
            if feedback != "none":
                raise UnknownComponentError("retriever", name, ["bm25 (the only model of a remote index)"])
            return RemoteRetriever(name, source, settings.remote_timeout_s)
        return LuceneRetriever(name, source, feedback)  # type: ignore[arg-type]

    return factory


RETRIEVERS.register("bm25", _lucene("none"), "BM25 (k1=0.9, b=0.4)")
RETRIEVERS.register("bm25+rocchio", _lucene("rocchio"), "BM25 with Rocchio pseudo-relevance feedback")
RETRIEVERS.register("bm25+rm3", _lucene("rm3"), "BM25 with RM3 pseudo-relevance feedback")


def _extractive(config: GeneratorConfig) -> Generator:
    return ExtractiveGenerator(name=config.name)


GENERATOR_BACKENDS.register("openai", OpenAIChatGenerator, "OpenAI or any OpenAI-compatible server (vLLM, llama.cpp)")
GENERATOR_BACKENDS.register("azure", OpenAIChatGenerator, "Azure OpenAI")
GENERATOR_BACKENDS.register("cohere", CohereGenerator, "Cohere chat with native document grounding")
GENERATOR_BACKENDS.register("llama-cpp", LlamaCppGenerator, "an embedded GGUF model via llama-cpp-python")
GENERATOR_BACKENDS.register("extractive", _extractive, "no model: the candidates' best sentences, cited")
