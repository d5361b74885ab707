"""The settings of the services' own work, which :class:`~ragnarok.core.settings.Settings` extends: where data
and indexes live, the JVM, the retrievers, rerankers, generators, judge and encoders, and the bounds of one
request's work.

A base class of its own so that each half of the settings stays readable; :class:`Settings` adds where the
services are, the stores, the arena, the network's bounds and operations, after these fields (the order
``RAGNAROK_*`` variables are listed in). Use :class:`Settings`, never this class alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

from ragnarok.core.generator_config import GeneratorConfig

DEMO_INDEX = "demo"


class StageSettings(BaseSettings):
    data_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "ragnarok",
        description="Where built indexes, the vote log and caches live.",
    )
    indexes: dict[str, str] = Field(
        default_factory=dict,
        description="Index name -> source: a Lucene index directory, 'prebuilt:NAME' (a pyserini prebuilt "
        "index, downloaded when online), or an Anserini REST URL such as http://host:8081/v1/NAME. "
        "The demo index is always available as 'demo'.",
    )
    default_index: str = DEMO_INDEX
    host: str = "127.0.0.1"
    port: int = 8000
    max_query_chars: int = 4096
    max_k: int = 10_000
    jvm_heap: str | None = Field(
        "1g",
        pattern=r"^(\d+[kKmMgG]?)?$",
        description="Maximum JVM heap for Lucene (e.g. 4g): searching needs little "
        "(Lucene reads its index memory-mapped); unset (empty), Java's default, a quarter of "
        "RAM, which a JVM fills lazily (docs/SCALE.md).",
    )
    index_jvm_heap: str = Field(
        "512m",
        pattern=r"^\d+[kKmMgG]?$",
        description="Maximum JVM heap of `ragnarok index`: a build needs Lucene's RAM "
        "buffer (index_buffer_mb) and little else, so its memory stays flat as the "
        "collection grows (docs/SCALE.md).",
    )
    index_buffer_mb: int = Field(
        128,
        ge=16,
        description="Lucene's indexing RAM buffer in MB (Anserini's -memoryBuffer, whose own default is "
        "4096): what bounds the JVM's memory while indexing a large collection. Keep it below the JVM heap.",
    )
    remote_timeout_s: float = 30.0
    search_threads: int = Field(
        default_factory=lambda: max(1, min(8, os.cpu_count() or 1)),
        ge=1,
        le=64,
        description="Lucene retrievers: concurrent `POST /v1/retrieve` (and `GET /v1/{index}/search`) requests "
        "are searched together by Anserini's batch_search on this many Java threads (default: the cores, at "
        "most 8).",
    )
    blas_threads: int = Field(
        default=1,
        ge=0,
        le=64,
        description="BLAS threads of the server's numpy (0: the library's own default, a thread per core). A "
        "request's matrix products are small (an answer's few dozen sentence vectors): a BLAS thread pool only "
        "adds its hand-offs, and on a busy machine they cost up to 100x the product (docs/BENCHMARKS.md).",
    )
    generators: list[GeneratorConfig] = Field(
        default_factory=list,
        description="Generators added to (or replacing, by name) the defaults: extractive, smollm2, gpt-4o, "
        "command-r-plus. E.g. a vLLM server: {name, backend: openai, base_url, model}.",
    )
    generator_probe_timeout_s: float = Field(
        2.0,
        gt=0,
        description="GET /v1/generators: how long each "
        "self-hosted server (probed all at once) has to answer GET /models.",
    )
    generator_probe_cache_s: float = Field(
        5.0, ge=0, description="GET /v1/generators: how long a probe's finding is reused."
    )
    rankzephyr_url: str | None = Field(None, description="OpenAI-compatible (vLLM) URL serving RankZephyr.")
    monot5_model: str = Field(
        "castorini/monot5-base-msmarco-10k",
        description="What the `monot5` reranker "
        "loads: a local model directory or a Hugging Face name (from the local cache; "
        "downloaded on first use only with allow_downloads, online, HF_HUB_OFFLINE unset).",
    )
    cross_encoder_model: str = Field(
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        description="What the `crossencoder` reranker loads (a local directory or a Hugging Face name).",
    )
    rerank_models: dict[str, str] = Field(
        default_factory=dict,
        description="More checkpoints a request may name as monot5:NAME or "
        "crossencoder:NAME: name -> local directory or Hugging Face name (besides base, 3b, minilm-l6, "
        "bge-base, bge-v2-m3). A name a request makes up never triggers a download.",
    )
    pointwise_batch_size: int = Field(
        16,
        ge=1,
        le=1024,
        description="monot5/crossencoder: candidates per model call (the work between two cancellation checks).",
    )
    pointwise_device: str | None = Field(
        None, description="monot5/crossencoder: cpu, cuda, cuda:1 ...; default CUDA when there is a GPU."
    )
    default_generator: str = "extractive"
    judge: str | None = Field(
        None,
        description="The generator that judges answers (`ragnarok judge`, "
        "`eval-rag`); unset: the proxy judge (no LLM).",
    )
    judge_nli_model: str | None = Field(
        None,
        description="The proxy judge's entailment model: an NLI "
        "cross-encoder (3 labels, order read from its config's id2label) as a "
        "local directory or a Hugging Face name already in the local cache "
        "(loaded offline). Set, it labels each (sentence, nugget) and (segment, "
        "sentence) pair instead of the rules (ragnarok/judge/nli.py); unset: "
        "the rules.",
    )
    judge_timeout_s: float = Field(
        120.0,
        gt=0,
        description="POST /v1/evaluate: an evaluation that has not "
        "finished in this time stops between judgments and answers 504 (each LLM "
        "call also has its generator's own timeout_s).",
    )
    topic_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="`ragnarok search --pipeline`: attempts after the "
        "first for a topic whose stage failed (a timeout, a 5xx); then the topic is "
        "reported and left out (`ragnarok run` has --retries).",
    )
    topic_backoff_s: float = Field(
        1.0,
        ge=0,
        description="`search --pipeline` and `run`: the wait before a "
        "topic's first retry, doubled before each next one.",
    )
    default_template: str = "ragnarok"
    max_candidates: int = 1000
    max_segment_chars: int = 100_000
    max_body_bytes: int = 32 * 1024 * 1024
    cpu_rerank_max_candidates: int = Field(
        1000,
        ge=1,
        description="Candidates one CPU rerank (embedding, mmr, monot5, crossencoder) encodes at most; more is a 413.",
    )
    cpu_rerank_max_chars: int = Field(
        2_000_000,
        ge=1,
        description="Characters of query and candidate text one "
        "CPU rerank encodes at most (1,000 segments of 2 KB); more is a 413.",
    )
    cpu_rerank_timeout_s: float = Field(
        120.0,
        gt=0,
        description="A CPU rerank that has not answered in this time is stopped (within one batch) and answered 504.",
    )
    shutdown_grace_s: float = Field(
        5.0,
        ge=0,
        description="`ragnarok serve`: how long in-flight requests may "
        "take to finish after SIGTERM before the process exits anyway.",
    )
    encoder_backend: Literal["auto", "torch", "onnx", "onnx-int8"] = Field(
        "auto",
        description="What runs the dense encoders: `torch` (sentence-transformers), `onnx` "
        "(onnxruntime on CPU, the weights exported locally on first use; same vectors within float32 rounding) "
        "or `auto` (the default): ONNX on CPU for a model it can export, else PyTorch (a failed export falls "
        "back to PyTorch). ONNX beside PyTorch models and the JVM in one process is stress-tested "
        "(tests/test_onnx_beside_torch.py, docs/BENCHMARKS.md).",
    )
    vector_cache_entries: int = Field(
        50_000,
        ge=1,
        description="Text vectors (MiniLM) kept in memory per "
        "model once encoded: queries, and sentences that no sentence store holds "
        "(about 1.5 KB each at 384 dimensions).",
    )
    encoder_cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "ragnarok" / "models",
        description="Where the ONNX exports of the dense encoders are kept "
        "(by model and weights hash; shared by every data_dir).",
    )
    dense_build_batch_size: int = Field(
        64,
        ge=1,
        le=100_000,
        description="`ragnarok serve`'s background "
        "build of the demo's dense index: segments encoded per step (the "
        "progress GET /v1/retrievers shows moves per step).",
    )
    dense_exact_max_segments: int = Field(
        20_000,
        ge=0,
        description="`--dense-kind auto` (the default): exact "
        "(flat) search up to this many segments, HNSW over 8-bit codes "
        "(hnsw-sq8) past it.",
    )
    sentence_store_max_segments: int = Field(
        8_000,
        ge=0,
        description="Dense builds write the sentence store "
        "(ragnarok.stages.embed.vectors) by default for collections of at most "
        "this many segments (the demo's 6,282 included): it costs ~4.5 KB "
        "and ~65 % more encoding per segment and saves ~70-200 ms per "
        "extractive answer (docs/SCALE.md); `--sentence-store` forces it.",
    )
    prebuilt_dir: Path | None = Field(
        None,
        description="Where pyserini's prebuilt indexes are unpacked "
        "(`prebuilt:NAME`, `dense:prebuilt:NAME`), under pyserini's own directory "
        "names; looked in first, then pyserini's cache. Default data_dir/prebuilt.",
    )
    arctic_model: str = Field(
        "Snowflake/snowflake-arctic-embed-l",
        description="What `arctic-l` (the query "
        "encoder of the prebuilt Arctic-embed-L shards) loads: its Hugging Face name (from "
        "the local cache) or a local model directory with its sentence-transformers files.",
    )
    dense_build_pause_s: float = Field(
        0.0,
        ge=0,
        le=60,
        description="`ragnarok serve`'s background dense build: "
        "seconds it pauses after each step, leaving the CPU to requests.",
    )
