"""One settings object for every service, read from ``RAGNAROK_*`` environment variables (or a ``.env``).

Secrets are never stored here: settings hold the *names* of the environment variables that hold them.
Obtain settings through :func:`get_settings` (cached) or build one explicitly in tests; nothing is read at
import time.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragnarok.core.generator_config import GeneratorConfig

DEMO_INDEX = "demo"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGNAROK_", env_file=".env", extra="ignore")

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
    retrieval_url: str | None = Field(
        None, description="Base URL of the R service the gateway calls; default: this process."
    )
    generation_url: str | None = Field(None, description="Base URL of the AG service; default: this process.")
    gateway_timeout_s: float = 300.0
    topics_source_url: str = Field(
        "https://raw.githubusercontent.com/castorini/anserini-tools/master/topics-and-qrels",
        description="Where `ragnarok topics fetch` downloads the track's topic files.",
    )
    topics_dir: Path | None = Field(
        None,
        description="A folder of topic files and qrels (e.g. a copy of the track's "
        "topics.rag24.test.txt, qrels.rag24.test.txt): set names (`--topics rag24`) resolve "
        "there after the project's own and the fetched ones. Default: the shared copies "
        "beside a checkout, ../shared/data/trec-rag, when there are some.",
    )
    database_url: str | None = Field(
        default=None,
        description="The arena's vote log: a SQLite or PostgreSQL URL (postgresql://user@host/db "
        "needs the 'postgres' extra); default SQLite arena.db in data_dir.",
    )
    arena_pool: list[str] = Field(
        default_factory=list,
        description="Arena pipeline specs (default: every "
        "available retriever x generator that costs nothing; a paid generator is drawn "
        "only when a spec here uses it).",
    )
    arena_time_budget_s: float = Field(
        30.0,
        gt=0,
        description="The arena's target time for a battle: a pool pipeline whose recent median "
        "latency is above it is drawn less often (weight (budget/latency)^2) and left out of blinded "
        "battles beyond 4x the budget while at least two faster ones remain.",
    )
    arena_min_votes: int = Field(
        10,
        ge=1,
        description="Arena leaderboards: a system with fewer votes is "
        "listed as provisional, without a rank, a rating or an interval.",
    )
    arena_votes_per_minute: int = Field(
        30,
        ge=1,
        description="Arena votes recorded per client address in any minute (the TCP peer; behind a "
        "reverse proxy, list it in trusted_proxies so its X-Forwarded-For counts).",
    )
    # -- on a network: keys, spend bounds, the public arena, what a request may name --
    auth: Literal["off", "keys"] = Field(
        "off",
        description="`keys`: every route but /healthz, /docs and /openapi.json needs `Authorization: "
        "Bearer KEY` (ragnarok keys create). `ragnarok serve` refuses a non-loopback host while this is `off` "
        "unless given --insecure-open.",
    )
    auth_cache_s: float = Field(
        1.0,
        ge=0,
        le=60,
        description="How long a key's record (scopes, expiry, "
        "revocation) is reused in memory before the database is read again: a "
        "revocation reaches every worker and instance within this time (0: every "
        "request reads the database).",
    )
    max_calls_per_request: int = Field(
        64,
        ge=1,
        description="The most backend (LLM) calls one request may make "
        "in the worst case, retries included, computed from its body before "
        "anything runs: more is a 413 naming the count.",
    )
    rate_limit_storage: str = Field(
        "memory://",
        description="Where per-key requests-per-minute and the arena's "
        "battles-per-minute are counted: a `limits` storage URI (memory:// per "
        "process; redis://HOST:PORT shared by every instance).",
    )
    trusted_proxies: str = Field(
        "",
        description="Comma-separated addresses (or CIDR networks) of reverse "
        "proxies whose X-Forwarded-For is believed; from any other peer the header is "
        "ignored (default: none).",
    )
    allow_model_paths: bool = Field(
        False,
        description="Let a request name a local model directory "
        "(crossencoder:/models/x, monot5:/models/y, embedding:DIR); off: only "
        "configured names. Paths are resolved with realpath and the loaded models "
        "kept in a bounded LRU (model_cache_max, model_cache_max_mb).",
    )
    allow_downloads: bool = Field(
        False,
        description="Let a request make the server download a model from a "
        "model hub (off: only models already on disk load; nothing is fetched).",
    )
    model_cache_max: int = Field(
        4,
        ge=1,
        description="Request-named models (allow_model_paths) kept loaded at most, least recently used dropped first.",
    )
    model_cache_max_mb: int = Field(2048, ge=1, description="Their size on disk in all at most (MB).")
    arena_battles_per_minute: int = Field(
        6, ge=1, description="Arena battles one client address may start in any minute."
    )
    arena_calls_per_day: int = Field(
        500,
        ge=0,
        description="Backend (LLM) calls the whole arena may make in a "
        "UTC day, reserved from each battle's worst case before it runs; a battle "
        "that would pass it is refused.",
    )
    arena_api_key_env: str = Field(
        "RAGNAROK_ARENA_KEY",
        description="`python -m webui --rag-url ...`: the "
        "environment variable holding the key the arena sends to a gateway with keys.",
    )
    # -- operations: logs, metrics, request ids --
    log_format: Literal["text", "json"] = Field(
        "text",
        description="`ragnarok serve`'s log lines: `text` "
        "(TIME LEVEL LOGGER [REQUEST_ID STAGE] MESSAGE) or `json`, one "
        "object per line (time, level, logger, message, request_id, "
        "route, stage, latency_ms, status).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "warning",
        description="`ragnarok serve`'s log level; `info` adds one access line per request (logger "
        "ragnarok.access: method, path, status, ms; about 1.4 % of /v1/retrieve's CPU, docs/BENCHMARKS.md).",
    )
    metrics: bool = Field(
        True,
        description="GET /metrics (Prometheus; the admin scope with keys), the "
        "per-request counters and the access lines; off: none of them.",
    )
    request_ids: bool = Field(
        True,
        description="An X-Request-ID on every answer (the request's own when it "
        "carries a valid one), passed on to every stage call and in every log line.",
    )
    openai_api_key_env: str = "OPENAI_API_KEY"
    cohere_api_key_env: str = "COHERE_API_KEY"

    def generator_configs(self) -> dict[str, GeneratorConfig]:
        """The default generators, overridden or extended by ``generators``."""
        defaults = [
            GeneratorConfig(
                name="extractive",
                backend="extractive",
                model="minilm",
                max_answer_words=150,
                max_contexts=10,
                description="extractive baseline: the candidates' own sentences (MMR over MiniLM), cited",
            ),
            # a 135M model on 2 cores: the top 5 contexts, a prompt of what 4 s of prompt evaluation allow at the
            # measured ~150 tokens/s (bench/bench_generate.py), an answer of at most 80 words (the model stops
            # writing there; max_tokens stays 400 for its other uses: query stages, compression, judging),
            # repetition controls, citations checked and attributed after the fact
            GeneratorConfig(
                name="smollm2",
                backend="llama-cpp",
                model="SmolLM2-135M-Instruct",
                context_tokens=4096,
                max_tokens=400,
                template="small",
                max_contexts=5,
                prompt_tokens_per_s=150,
                prompt_s=4,
                max_answer_words=80,
                repeat_penalty=1.1,
                attribution="check",
                uncited="no_answer",
                description="embedded SmolLM2-135M-Instruct (llama.cpp)",
            ),
            GeneratorConfig(
                name="gpt-4o",
                backend="openai",
                model="gpt-4o",
                api_key_env=self.openai_api_key_env,
                context_tokens=128_000,
                description="OpenAI GPT-4o",
            ),
            GeneratorConfig(
                name="command-r-plus",
                backend="cohere",
                model="command-r-plus",
                api_key_env=self.cohere_api_key_env,
                context_tokens=128_000,
                description="Cohere Command R+ with document grounding",
            ),
        ]
        return {c.name: c for c in [*defaults, *self.generators]}

    def trusted_proxy_list(self) -> list[str]:
        """``trusted_proxies`` as a list (empty: X-Forwarded-For is never believed)."""
        return [p.strip() for p in self.trusted_proxies.split(",") if p.strip()]

    @property
    def prebuilt_path(self) -> Path:
        """Where ``ragnarok prebuilt fetch`` unpacks and the R service looks first (``prebuilt_dir``)."""
        return self.prebuilt_dir or self.data_dir / "prebuilt"

    @property
    def demo_index_dir(self) -> Path:
        return self.data_dir / "indexes" / DEMO_INDEX

    def index_sources(self) -> dict[str, str]:
        """Every configured index, the demo index included."""
        return {DEMO_INDEX: str(self.demo_index_dir), **self.indexes}


@lru_cache
def get_settings() -> Settings:
    return Settings()


def names_a_source(index: str) -> bool:
    """``index`` names a source rather than a configured index: a directory, or ``prebuilt:NAME``."""
    return index.startswith("prebuilt:") or Path(index).is_dir()


def index_name(index: str | None) -> str | None:
    """The name ``index`` goes by in :func:`with_index_path`'s settings (``path:DIR`` for a source)."""
    return None if index is None else (f"path:{index}" if names_a_source(index) else index)


def with_index_path(settings: Settings, index: str | None) -> Settings:
    """Settings that also know ``index`` when it is a directory (or ``prebuilt:NAME``) rather than a configured
    name, as :func:`index_name`."""
    if index is not None and names_a_source(index):
        return settings.model_copy(update={"indexes": {**settings.indexes, f"path:{index}": index}})
    return settings
