"""The most backend (LLM) calls a request can make, computed from its body before anything runs.

A key's budget is reserved for a request's worst case before it runs, so every route needs an upper bound of
its backend calls (each attempt of a generator counts, since a paid backend may bill each). The figures are
upper bounds: the meter refuses any call past the reservation, so an estimate that were too low would stop a
request, never let it spend more.

Design notes: docs/internals/auth.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragnarok.core.spec import MAX_GENERATED, MAX_QUERIES, Pipeline
from ragnarok.stages.generate.base import GeneratorConfig

#: Generators that never call a model.
NO_MODEL_BACKENDS = ("extractive",)
LISTWISE_WINDOW, LISTWISE_STRIDE = 20, 10
#: Calls the judge makes per nugget batch, citation or criterion: the question and one reminder.
JUDGE_ASKS = 2
#: Attempts of a model endpoint that is not a configured generator (rankzephyr's vLLM URL): the defaults'.
DEFAULT_ATTEMPTS = GeneratorConfig.model_fields["max_retries"].default + 1
NUGGETS_PER_CALL = 10
GEVAL_CRITERIA = 4


@dataclass
class Cost:
    """Worst-case calls per generator name (each already times its attempts)."""

    calls: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def generators(self) -> set[str]:
        return set(self.calls)

    def add(self, generator: str, logical_calls: int, configs: Mapping[str, GeneratorConfig]) -> None:
        """``logical_calls`` calls of ``generator`` (each with its retries). Unknown generators count with
        one attempt (the request fails on the name later anyway); generators without a model count 0."""
        config = configs.get(generator)
        if logical_calls <= 0 or (config is not None and config.backend in NO_MODEL_BACKENDS):
            return
        self.calls[generator] += logical_calls * (config.attempts if config is not None else DEFAULT_ATTEMPTS)

    def __iadd__(self, other: Cost) -> Cost:
        self.calls.update(other.calls)
        return self


def listwise_windows(n: int, passes: int = 1) -> int:
    """Model calls of a sliding-window listwise rerank of ``n`` candidates (window 20, stride 10)."""
    from ragnarok.stages.rerank.listwise import window_bounds  # noqa: PLC0415

    if n <= 1:
        return 0
    return passes * sum(1 for start, end in window_bounds(n, LISTWISE_WINDOW, LISTWISE_STRIDE) if end - start > 1)


def reranker_generator(spec: str, rankzephyr_url: str | None = None) -> tuple[str, int] | None:
    """The generator a reranker spec calls and its passes (``listwise:G``, ``rankgpt``, ``rankzephyr[:rho]``),
    or None for one that calls no LLM (embedding, mmr, monot5, crossencoder)."""
    base, _, arg = spec.partition(":")
    if base == "listwise":
        return arg, 1
    if base == "rankgpt":
        return "gpt-4o", 1
    if base == "rankzephyr":
        return "rankzephyr" + (f":{arg}" if arg else ""), 3 if arg == "rho" else 1
    return None


def rerank_cost(spec: str, candidates: int, configs: Mapping[str, GeneratorConfig]) -> Cost:
    cost = Cost()
    if (called := reranker_generator(spec)) is not None:
        generator, passes = called
        cost.add(generator, listwise_windows(candidates, passes), configs)
    return cost


def evaluate_cost(
    judge: str | None, nuggets: int, citations: int, geval: bool, configs: Mapping[str, GeneratorConfig]
) -> Cost:
    cost = Cost()
    if judge is None or judge == "proxy":
        return cost
    asks = math.ceil(nuggets / NUGGETS_PER_CALL) + citations + (GEVAL_CRITERIA if geval else 0)
    cost.add(judge, asks * JUDGE_ASKS, configs)
    return cost


def pipeline_cost(pipeline: Pipeline, configs: Mapping[str, GeneratorConfig]) -> Cost:
    """The worst case of ``POST /rag`` with ``pipeline``."""
    from ragnarok.stages.passage.llmcompress import MAX_CALLS as LLMCOMPRESS_CALLS  # noqa: PLC0415

    cost = Cost()
    queries = 1
    for stage in pipeline.query:  # each query so far is rewritten; a stage adds at most n queries per query
        cost.add(stage.generator, queries, configs)
        queries = min(MAX_QUERIES, queries * (1 + (stage.n or MAX_GENERATED)))
    handed = pipeline.depth
    for stage in pipeline.rerank:
        if stage.name == "llmcompress":
            generator = (stage.arg or "").partition(":")[0]
            cost.add(generator, LLMCOMPRESS_CALLS, configs)
        else:
            name = stage.name + (f":{stage.arg}" if stage.arg else "")
            cost += rerank_cost(name, handed, configs)
        handed = min(handed, stage.depth)
    if pipeline.generate is not None:
        cost.add(pipeline.generate.name, 1, configs)
    return cost
