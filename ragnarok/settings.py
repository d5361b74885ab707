"""One settings object for every service, read from ``RAGNAROK_*`` environment variables (or a ``.env``).

Secrets are never stored here: settings hold the *names* of the environment variables that hold them.
Obtain settings through :func:`get_settings` (cached) or build one explicitly in tests; nothing is read at
import time.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEMO_INDEX = "demo"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RAGNAROK_", env_file=".env", extra="ignore")

    data_dir: Path = Field(default_factory=lambda: Path.home() / ".cache" / "ragnarok",
                           description="Where built indexes, the vote log and caches live.")
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
    jvm_heap: str | None = None
    remote_timeout_s: float = 30.0
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default SQLite in data_dir.")
    openai_api_key_env: str = "OPENAI_API_KEY"
    cohere_api_key_env: str = "COHERE_API_KEY"

    @property
    def demo_index_dir(self) -> Path:
        return self.data_dir / "indexes" / DEMO_INDEX

    def index_sources(self) -> dict[str, str]:
        """Every configured index, the demo index included."""
        return {DEMO_INDEX: str(self.demo_index_dir), **self.indexes}


@lru_cache
def get_settings() -> Settings:
    return Settings()
