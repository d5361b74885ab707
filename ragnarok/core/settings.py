"""One settings object for every service, read from ``RAGNAROK_*`` environment variables (or a ``.env``).

Secrets are never stored here: settings hold the *names* of the environment variables that hold them.
Obtain settings through :func:`get_settings` (cached) or build one explicitly in tests; nothing is read at
import time. The fields of the services' own work (indexes, models, stages) come first, from
:class:`~ragnarok.core.stage_settings.StageSettings`; the default generators are
:mod:`ragnarok.core.generator_defaults`'.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from ragnarok.core.generator_config import GeneratorConfig
from ragnarok.core.generator_defaults import default_generators
from ragnarok.core.stage_settings import DEMO_INDEX, StageSettings


class Settings(StageSettings):
    model_config = SettingsConfigDict(env_prefix="RAGNAROK_", env_file=".env", extra="ignore")

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
        defaults = default_generators(self.openai_api_key_env, self.cohere_api_key_env)
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

    def demo_is_embedded(self) -> bool:
        """Whether the index called ``demo`` is the embedded demo collection's, the one built on first use
        (false when ``indexes`` points the name at another index: then nothing builds the demo index)."""
        configured = self.indexes.get(DEMO_INDEX)
        return configured is None or Path(configured).expanduser().resolve() == self.demo_index_dir.resolve()


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
