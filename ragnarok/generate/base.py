"""What every generator backend shares: its configuration, its errors, retries and a concurrency bound."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

T = TypeVar("T")
Backend = Literal["openai", "azure", "cohere", "llama-cpp", "extractive"]


class GeneratorConfig(BaseModel):
    """One configured generator. Secrets are named by environment variable, never stored."""

    name: str
    backend: Backend
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    api_version: str | None = Field(None, description="Azure OpenAI API version.")
    model_path: str | None = Field(None, description="GGUF file for the embedded llama.cpp backend.")
    timeout_s: float = 60.0
    max_retries: int = 2
    max_concurrency: int = 4
    max_tokens: int = 1024
    temperature: float = 0.0
    context_tokens: int = 8192
    description: str = ""


class GenerationError(RuntimeError):
    """A backend failed: the API answers 502 (or 504 when ``timeout``), naming backend and cause."""

    def __init__(self, generator: str, cause: str, timeout: bool = False):
        self.generator, self.cause, self.timeout = generator, cause, timeout
        super().__init__(f"generator {generator!r} failed: {cause}")


class GeneratorUnavailable(RuntimeError):
    """A generator that cannot run here now (no key, no model file): 422 naming what is missing."""


@dataclass
class Guard:
    """Bounded concurrency plus retries with exponential backoff for one backend."""

    max_concurrency: int = 4
    max_retries: int = 2
    backoff_s: float = 0.5
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = threading.BoundedSemaphore(max(1, self.max_concurrency))

    def call(self, fn: Callable[[], T], retryable: Callable[[BaseException], bool]) -> T:
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential(multiplier=self.backoff_s, max=8),
            retry=retry_if_exception(retryable),
            reraise=True,
        )
        with self._slots:
            return retrying(fn)


@dataclass
class ApiGenerator:
    """What every backend behind a remote API shares: its config, a :class:`Guard`, an API key named by an
    environment variable, and one client made on first use (``_make_client``, under a lock)."""

    config: GeneratorConfig
    _client: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.config.name
        self.guard = Guard(self.config.max_concurrency, self.config.max_retries)

    def availability(self) -> str | None:
        """None when usable now, else why not."""
        env = self.config.api_key_env
        return f"{env} is not set" if env and not os.environ.get(env) else None

    def api_key(self, default: str = "") -> str:
        env = self.config.api_key_env
        return os.environ.get(env, "") if env else default

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                if reason := self.availability():
                    raise GeneratorUnavailable(f"generator {self.name!r} is unavailable: {reason}")
                self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        raise NotImplementedError


def http_status(exc: BaseException) -> int | None:
    status: Any = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status == 429 or status >= 500)
