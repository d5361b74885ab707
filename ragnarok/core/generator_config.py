"""One configured generator (:class:`GeneratorConfig`): the settings list them and the generators read them, so
it lives below both (core); :mod:`ragnarok.stages.generate.base` re-exports it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

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
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="The most one attempt may take, all of it (connecting, "
        "waiting, reading), however the backend sends its answer.",
    )
    first_token_s: float | None = Field(
        None,
        gt=0,
        description="A streamed answer's first token within this "
        "(default: timeout_s); then an `error` event names the deadline.",
    )
    stall_s: float | None = Field(
        None,
        gt=0,
        description="A streamed answer's next token within this of the "
        "last (default: timeout_s). A whole stream takes at most timeout_s.",
    )
    max_retries: int = Field(
        2,
        ge=0,
        description="Attempts after the first, on 429, 5xx, timeouts and "
        "connection errors, after the backend's Retry-After or an exponential backoff.",
    )
    max_concurrency: int = Field(
        4,
        ge=1,
        description="Calls in flight to this backend at most (at most 64: "
        "each holds a worker thread, one of the backend's own).",
    )
    deadline_s: float | None = Field(
        None,
        gt=0,
        description="The most one request may take in all: waiting "
        "for a slot, every attempt and the waits between them (504 after it). "
        "Default: timeout_s x (max_retries + 1).",
    )
    slot_wait_s: float | None = Field(
        None,
        gt=0,
        description="The most a request waits for one of the "
        "max_concurrency slots (then 504 'busy'). Default: timeout_s.",
    )
    max_tokens: int = 1024
    temperature: float = 0.0
    context_tokens: int = 8192
    description: str = ""
    paid: bool | None = Field(
        None,
        description="Whether a call costs money. Default: true for the openai, "
        "azure and cohere backends, false for the embedded and extractive ones. A paid "
        "generator is drawn by the arena only when its pool lists it.",
    )
    # what to send and what to keep: tuned per generator (small local models want fewer, shorter contexts)
    template: str | None = Field(
        None, description="The prompt template when the request names none (default: the `default_template` setting)."
    )
    max_contexts: int | None = Field(
        None, ge=1, le=100, description="The top candidates the generator reads at most (default: all it is given)."
    )
    max_prompt_tokens: int | None = Field(
        None,
        ge=64,
        description="The prompt's size at most; segments are "
        "shortened evenly to fit (default: context_tokens - max_tokens - 64).",
    )
    prompt_tokens_per_s: float | None = Field(
        None,
        gt=0,
        description="The model's measured prompt-evaluation "
        "speed here (bench/bench_generate.py prints it); with prompt_s, "
        "the prompt is at most prompt_tokens_per_s x prompt_s tokens.",
    )
    prompt_s: float | None = Field(
        None, gt=0, description="The time prompt evaluation may take (see prompt_tokens_per_s)."
    )
    max_answer_words: int | None = Field(
        None,
        ge=1,
        description="The answer's length at most, in words (ended at a sentence; the template's max_words when lower).",
    )
    repeat_penalty: float | None = Field(None, gt=0, description="llama.cpp's repetition penalty (1 = off).")
    frequency_penalty: float | None = Field(None, ge=-2, le=2, description="OpenAI-style frequency penalty.")
    presence_penalty: float | None = Field(None, ge=-2, le=2, description="OpenAI-style presence penalty.")
    drop_repeats: bool = Field(
        True,
        description="Drop an answer sentence that repeats an earlier one "
        "(counted in the /rag trace as repeats_dropped).",
    )
    attribution: Literal["off", "missing", "check"] = Field(
        "off",
        description="Citations attached after the fact by matching each answer sentence to the "
        "context that best supports it (the /rag trace says how many were attributed): `missing` for sentences "
        "that cite nothing, `check` also replaces a citation of a context that does not support its sentence.",
    )
    uncited: Literal["keep", "no_answer"] = Field(
        "keep",
        description="An answer none of whose sentences cites a context (after attribution): `keep` it, "
        "or (`no_answer`) answer that the contexts do not hold the answer, citing nothing (the trace says so).",
    )

    @property
    def costs_money(self) -> bool:
        return self.paid if self.paid is not None else self.backend in ("openai", "azure", "cohere")

    @property
    def attempts(self) -> int:
        """HTTP calls one logical call may make at most: the first and every retry."""
        return 1 if self.backend in ("extractive", "llama-cpp") else self.max_retries + 1

    def prompt_budget(self) -> int:
        """The prompt's token budget: the context window less the answer, within max_prompt_tokens and what
        prompt_s allows at prompt_tokens_per_s."""
        budget = self.context_tokens - self.max_tokens - 64
        if self.max_prompt_tokens is not None:
            budget = min(budget, self.max_prompt_tokens)
        if self.prompt_tokens_per_s is not None and self.prompt_s is not None:
            budget = min(budget, int(self.prompt_tokens_per_s * self.prompt_s))
        return max(64, budget)
