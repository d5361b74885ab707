"""Prometheus metrics of the service (``GET /metrics``, :mod:`api.observability`), counted where the work happens.

Families are process-wide, and add up across processes in prometheus-client's multiprocess mode when
``PROMETHEUS_MULTIPROC_DIR`` is set before this module is imported. Labels stay bounded, and the hot path pays
only a few counter increments per request.

Design notes: docs/internals/runtime.md.
"""

from __future__ import annotations

import os
import re

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # no `_created` series beside every counter and histogram: half the exposition

#: Seconds: from a cached 2 ms retrieval to a 2-minute LLM pipeline.
LATENCY_BUCKETS = (0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: The kinds of pipeline stage the gateway calls (``ragnarok.service.gateway``: "retrieve bm25", "rerank monot5", ...).
STAGES = ("retrieve", "rerank", "passage", "query", "generate")

REQUESTS = Counter(
    "ragnarok_http_requests",
    "HTTP requests answered, by method, route template and status.",
    ["method", "route", "status"],
)
REQUEST_SECONDS = Histogram(
    "ragnarok_http_request_duration_seconds",
    "Time to answer a request, by route template (until the last byte of the body was handed to the server).",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "ragnarok_stage_duration_seconds",
    "One stage call of a pipeline as the gateway saw "
    "it (HTTP hop included), by kind of stage: retrieve, rerank, passage, query, generate.",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)
STAGE_FAILURES = Counter(
    "ragnarok_stage_failures",
    "Stage calls that failed, by kind of stage and the status the gateway answers.",
    ["stage", "status"],
)
BACKEND_CALLS = Counter(
    "ragnarok_backend_calls", "Calls to a generator's backend (every HTTP attempt, retries included).", ["generator"]
)
BACKEND_FAILURES = Counter(
    "ragnarok_backend_failures",
    "Generator calls that failed after their retries, by "
    "cause: timeout, busy (no slot in time), rate_limited (429), server_error (5xx), "
    "client_error (other 4xx), connection, bad_answer.",
    ["generator", "cause"],
)
BACKEND_TOKENS = Counter(
    "ragnarok_backend_tokens",
    "Tokens the backends reported (usage), by generator and kind (prompt, completion).",
    ["generator", "kind"],
)
SLOT_WAIT_SECONDS = Histogram(
    "ragnarok_slot_wait_seconds",
    "Time a call waited for one of its generator's max_concurrency slots (a 'busy' failure is not observed here).",
    ["generator"],
    buckets=(0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0),
)
DENSE_BUILD = Gauge(
    "ragnarok_dense_build_segments",
    "Background dense index builds: segments encoded (state="
    "done) of the total (state=total), by Lucene index directory name and model.",
    ["index", "model", "state"],
    multiprocess_mode="livemax",
)
ARENA_BATTLES = Counter(
    "ragnarok_arena_battles",
    "Arena battles recorded, by mode (blinded, unblinded) and whether both answers came (votable) or not (failed).",
    ["mode", "outcome"],
)
ARENA_VOTES = Counter("ragnarok_arena_votes", "Arena votes recorded, by winner (a, b, tie, bothbad).", ["winner"])
CACHE_LOOKUPS = Counter(
    "ragnarok_cache_lookups",
    "Cache lookups by cache (segment_json: candidates' JSON "
    "per Lucene segment; query_stage: generated queries; judgment: LLM judgments) and "
    "result (hit, miss); the hit rate is hit / (hit + miss).",
    ["cache", "result"],
)

_HTTP_STATUS = re.compile(r"HTTP (\d{3})")


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when set (prometheus-client's multiprocess mode)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition() -> tuple[bytes, str]:
    """The Prometheus text format of every family (every process's, in multiprocess mode), and its
    content type."""
    if multiprocess_dir():
        from prometheus_client import multiprocess  # noqa: PLC0415

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def stage_kind(stage: str) -> str:
    """``"retrieve bm25"`` -> ``retrieve``: the kind of a gateway stage name (``other`` when unknown)."""
    kind = stage.partition(" ")[0]
    return kind if kind in STAGES else "other"


def observe_stage(stage: str, seconds: float, failed_status: int | None = None) -> None:
    kind = stage_kind(stage)
    STAGE_SECONDS.labels(kind).observe(seconds)
    if failed_status is not None:
        STAGE_FAILURES.labels(kind, str(failed_status)).inc()


def backend_call(generator: str) -> None:
    BACKEND_CALLS.labels(generator).inc()


def failure_cause(cause: str, timeout: bool = False, retryable: bool = False) -> str:
    """A failed backend call's cause in the fixed vocabulary of ``ragnarok_backend_failures``."""
    if timeout:
        return "timeout"
    if cause.startswith("busy"):
        return "busy"
    if match := _HTTP_STATUS.match(cause):
        status = int(match.group(1))
        if status == 429:
            return "rate_limited"
        if status >= 500:
            return "server_error"
        if status >= 400:
            return "client_error"
        return "bad_answer"  # HTTP 200 with an unusable body
    return "connection" if retryable else "bad_answer"


def backend_failure(generator: str, cause: str) -> None:
    BACKEND_FAILURES.labels(generator, cause).inc()


def tokens(generator: str | None, prompt: int, completion: int) -> None:
    name = generator or "unknown"
    if prompt > 0:
        BACKEND_TOKENS.labels(name, "prompt").inc(prompt)
    if completion > 0:
        BACKEND_TOKENS.labels(name, "completion").inc(completion)


def slot_wait(generator: str, seconds: float) -> None:
    SLOT_WAIT_SECONDS.labels(generator).observe(seconds)


def dense_progress(index: str, model: str, done: int, total: int) -> None:
    DENSE_BUILD.labels(index, model, "done").set(done)
    DENSE_BUILD.labels(index, model, "total").set(total)


def arena_battle(mode: str, votable: bool) -> None:
    ARENA_BATTLES.labels(mode, "votable" if votable else "failed").inc()


def arena_vote(winner: str) -> None:
    ARENA_VOTES.labels(winner).inc()


def cache_lookup(cache: str, hit: bool, n: int = 1) -> None:
    if n > 0:
        CACHE_LOOKUPS.labels(cache, "hit" if hit else "miss").inc(n)


def cache_lookups(cache: str, hits: int, misses: int) -> None:
    """Several lookups at once (the segment JSON cache counts one answer's hits and misses together)."""
    cache_lookup(cache, True, hits)
    cache_lookup(cache, False, misses)
