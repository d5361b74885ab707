"""Named pipelines. The paper-style rows are modeled on the Ragnarök paper's baselines (BM25, BM25+Rocchio,
fusion with Arctic-Embed-L and GTE-L, monoT5 and RankZephyr rerankers fused with their input, GPT-4o and
Command R+ answering); they need GPU models or API keys. ``offline`` is the best pipeline measured on this
machine with nothing but CPU models (docs/BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Collection

from ragnarok.spec import parse

FIRST_STAGE = "rrf(bm25+rocchio, dense:arctic-l, dense:gte-l)@3000"

PRESETS: dict[str, str] = {
    # retrieval rows
    "1a": "bm25@100",
    "1b": "bm25+rocchio@100",
    "1c": "rrf(bm25+rocchio, dense:arctic-l, dense:gte-l)@100",
    "1d": f"{FIRST_STAGE} | monot5@100~rrf",
    "1e": f"{FIRST_STAGE} | monot5@100~rrf | rankzephyr@20~rrf",
    "1f": f"{FIRST_STAGE} | monot5@100~rrf | rankzephyr:rho@20~rrf",
    # generation rows, over the paper's BM25 + RankZephyr retrieval
    "2a": "bm25@100 | rankzephyr@20 | gpt-4o:chatqa",
    "2b": "bm25@100 | rankzephyr@20 | command-r-plus:chatqa",
    "2c": "bm25@100 | rankzephyr@20 | llama-3.1-70b:chatqa",
    # runs on any fresh machine, offline
    "offline": "rrf(bm25+rocchio, dense:minilm)@100 | extractive",
    "offline-llm": "rrf(bm25+rocchio, dense:minilm)@100 | smollm2:ragnarok",
    "bm25-extractive": "bm25@100 | extractive",
    "rocchio-extractive": "bm25+rocchio@100 | extractive",
}

#: What ``POST /rag`` runs when no pipeline is given: the first of these whose retrievers the R service has
#: (``offline`` needs the dense MiniLM index, which ``ragnarok serve --no-dense`` does not build; an Anserini
#: REST index offers BM25 only).
DEFAULT_PIPELINES = ("offline", "rocchio-extractive", "bm25-extractive")


def resolve(spec_or_preset: str) -> str:
    """A preset's spec, or the argument itself when it names no preset."""
    return PRESETS.get(spec_or_preset.strip(), spec_or_preset)


def default_pipeline(available: Collection[str] | None) -> str:
    """The preset name of the first default pipeline whose retrievers are all ``available`` (names such as
    ``bm25+rocchio`` or ``dense:minilm``); the first when nothing is known, the last when none can run."""
    if available is None:
        return DEFAULT_PIPELINES[0]
    for name in DEFAULT_PIPELINES:
        if all(s.name + (f":{s.arg}" if s.arg else "") in available for s in parse(PRESETS[name]).sources()):
            return name
    return DEFAULT_PIPELINES[-1]
