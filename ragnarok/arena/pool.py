"""The arena's pool of pipelines and how battles are paired (pure functions: no I/O, no UI).

A pool entry is a full RAG pipeline spec, keyed by component (retriever, rerankers, generator) as the vote log
and the R / AG leaderboards group it. Pairs are drawn as Chatbot Arena's sampler draws them, favouring pairs
with fewer votes, and weighted down for pipelines whose recent answers are slow or miss the time budget
(:class:`LatencyBook`, :func:`speed_weights`), so that battles stay fast; pipelines whose backend just
failed are paused (:mod:`ragnarok.arena.health`), and two sides never share a one-slot generator at once.

Design notes: docs/internals/arena.md.
"""

from __future__ import annotations

import itertools
import random
import statistics
import threading
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragnarok.core.spec import Pipeline, parse

NO_RERANKER = "none"
DEFAULT_DEPTH = 20
LEAVE_OUT_FACTOR = 4.0
#: How many of a pipeline's last answers :func:`miss_factor` looks at.
RECENT = 5
#: What each recent answer that missed the time budget multiplies a pipeline's weight by.
MISS_FACTOR = 0.5


@dataclass(frozen=True, order=True)
class PipelineId:
    """One pool pipeline by component; ``spec`` is the normalised spec string."""

    spec: str
    retriever: str
    reranker: str
    generator: str

    def as_dict(self) -> dict[str, str]:
        return {"spec": self.spec, "retriever": self.retriever, "reranker": self.reranker, "generator": self.generator}

    def names(self) -> set[str]:
        """Every string that would reveal this pipeline (for blinding checks)."""
        return {self.spec, self.retriever, self.generator} | ({self.reranker} - {NO_RERANKER})


def identify(spec: str) -> PipelineId:
    """Parse a pool spec; it must end with a generator (an arena battle compares answers)."""
    from ragnarok.core.presets import resolve  # noqa: PLC0415 - a preset name (built in or saved) is a spec too

    pipeline: Pipeline = parse(resolve(spec))
    if pipeline.generate is None:
        raise ValueError(f"arena pipeline {spec!r} has no generator: end it with one, e.g. `| extractive`")
    reranker = " | ".join(map(str, pipeline.rerank)) or NO_RERANKER
    queries = "".join(f"{q} > " for q in pipeline.query)  # query stages belong to the retrieval side
    return PipelineId(str(pipeline), f"{queries}{pipeline.retrieve}@{pipeline.depth}", reranker, str(pipeline.generate))


def compose(retriever: str, reranker: str, generator: str) -> PipelineId:
    """The pipeline made of three components (as the side-by-side dropdowns name them)."""
    stages = [retriever] + ([] if reranker in ("", NO_RERANKER) else [reranker]) + [generator]
    return identify(" | ".join(stages))


def make_pool(specs: Iterable[str]) -> list[PipelineId]:
    """Parsed, de-duplicated, in the given order; fewer than two pipelines cannot battle."""
    pool = list(dict.fromkeys(identify(s) for s in specs))
    if len(pool) < 2:
        raise ValueError(f"the arena pool needs at least two different pipelines, got {[p.spec for p in pool]}")
    return pool


def fused_retrievers(retrievers: Sequence[str]) -> list[str]:
    """Reciprocal-rank fusion of the best sparse retriever (``bm25+rocchio``, else ``bm25``) with each dense
    one, as the ``offline`` preset does: ``rrf(bm25+rocchio, dense:minilm)``."""
    sparse = next((r for r in ("bm25+rocchio", "bm25") if r in retrievers), None)
    if sparse is None:
        return []
    return [f"rrf({sparse}, {r})" for r in retrievers if r.startswith("dense:")]


#: Backends that never call a paid API: a generator list that does not say ``paid`` is judged by these.
FREE_BACKENDS = ("extractive", "llama-cpp")


def free_generators(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The generators the default pool may draw, from ``GET /v1/generators``' rows: available and ``paid``
    false. A row that does not say ``paid`` (an older service) counts as paid unless its backend is one that
    calls no paid API, so a paid generator is never drawn unless the pool lists it."""
    return [
        row["name"]
        for row in rows
        if row.get("available") and not row.get("paid", row.get("backend") not in FREE_BACKENDS)
    ]


def default_specs(
    retrievers: Sequence[str],
    generators: Sequence[str],
    rerankers: Sequence[str] = (NO_RERANKER,),
    depth: int = DEFAULT_DEPTH,
    fuse: bool = True,
) -> list[str]:
    """The product retriever × reranker × generator (retrievers by name, e.g. ``bm25``, ``dense:minilm``),
    with ``fuse`` the :func:`fused_retrievers` of the available ones too. The arena passes only the
    generators that cost nothing (:func:`free_generators`): a paid one joins only when ``arena_pool`` lists
    it."""
    specs = []
    every = [*retrievers, *(fused_retrievers(retrievers) if fuse else [])]
    for retriever, reranker, generator in itertools.product(every, rerankers, generators):
        stages = [f"{retriever}@{depth}"] + ([] if reranker == NO_RERANKER else [reranker]) + [generator]
        specs.append(" | ".join(stages))
    return specs


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class LatencyBook:
    """The last ``window`` answers of each pipeline by spec, in memory (thread-safe): their seconds, and whether
    each missed the time budget (:func:`miss_factor`)."""

    def __init__(self, window: int = 20):
        self.window = window
        self._seen: dict[str, deque[float]] = {}
        self._missed: dict[str, deque[bool]] = {}
        self._lock = threading.Lock()

    def record(self, spec: str, seconds: float, missed: bool = False) -> None:
        with self._lock:
            self._seen.setdefault(spec, deque(maxlen=self.window)).append(float(seconds))
            self._missed.setdefault(spec, deque(maxlen=self.window)).append(bool(missed))

    def medians(self) -> dict[str, float]:
        with self._lock:
            return {spec: statistics.median(times) for spec, times in self._seen.items() if times}

    def misses(self, recent: int = RECENT) -> dict[str, tuple[int, int]]:
        """Per spec: how many of its last ``recent`` answers missed the budget, of how many."""
        with self._lock:
            return {
                spec: (sum(list(flags)[-recent:]), min(recent, len(flags)))
                for spec, flags in self._missed.items()
                if flags
            }


def miss_factor(missed: int) -> float:
    """A pipeline's sampling factor from its recent answers that missed the time budget: ``MISS_FACTOR`` per
    miss (1 without any)."""
    return MISS_FACTOR**missed


def speed_weights(
    pool: Sequence[PipelineId],
    medians: Mapping[str, float],
    budget_s: float,
    misses: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str, float]:
    """Each pipeline's sampling factor from its median latency: 1 when unmeasured or within ``budget_s``,
    ``(budget_s / median)^2`` above it, 0 (left out) beyond ``LEAVE_OUT_FACTOR * budget_s`` as long as at
    least two pipelines keep a non-zero factor; times :func:`miss_factor` of its recent misses (``misses``:
    :meth:`LatencyBook.misses`)."""
    weights = {}
    for p in pool:
        median = medians.get(p.spec)
        weights[p.spec] = 1.0 if median is None or median <= budget_s else (budget_s / median) ** 2
        weights[p.spec] *= miss_factor((misses or {}).get(p.spec, (0, 0))[0])
    slow = {p.spec for p in pool if medians.get(p.spec, 0.0) > LEAVE_OUT_FACTOR * budget_s}
    if len(weights) - len(slow) >= 2:
        weights.update(dict.fromkeys(slow, 0.0))
    return weights


def shares_slot(a: PipelineId, b: PipelineId, serial: Collection[str]) -> bool:
    """Whether both pipelines use one generator that answers one request at a time (``serial``)."""
    return a.generator == b.generator and a.generator.partition(":")[0] in serial


def serial_factor(
    a: PipelineId, b: PipelineId, medians: Mapping[str, float], budget_s: float, serial: Collection[str]
) -> float:
    """A pair whose two sides use one generator that answers one request at a time (the embedded model) runs
    them one after the other: its battle takes the sum of both medians. 1 while that is within ``budget_s``
    (or a side is unmeasured), ``(budget_s / sum)^2`` above, 0 beyond ``LEAVE_OUT_FACTOR * budget_s``."""
    if not shares_slot(a, b, serial):
        return 1.0
    if a.spec not in medians or b.spec not in medians:
        return 1.0
    total = medians[a.spec] + medians[b.spec]
    if total > LEAVE_OUT_FACTOR * budget_s:
        return 0.0
    return 1.0 if total <= budget_s else (budget_s / total) ** 2


def pair_weights(
    pool: Sequence[PipelineId],
    votes: Mapping[tuple[str, str], int],
    speed: Mapping[str, float] | None = None,
    medians: Mapping[str, float] | None = None,
    budget_s: float = 0.0,
    serial: Collection[str] = (),
) -> dict[tuple[str, str], float]:
    """Sampling weight of every unordered pair: ``1 / (1 + votes on that pair)``, times both sides' speed
    factors when given, times :func:`serial_factor` for pairs that share a one-at-a-time generator."""
    speed, medians = speed or {}, medians or {}
    return {
        pair_key(a.spec, b.spec): speed.get(a.spec, 1.0)
        * speed.get(b.spec, 1.0)
        * (serial_factor(a, b, medians, budget_s, serial) if serial else 1.0)
        / (1 + votes.get(pair_key(a.spec, b.spec), 0))
        for a, b in itertools.combinations(pool, 2)
    }


def pick_pair(
    pool: Sequence[PipelineId],
    votes: Mapping[tuple[str, str], int],
    rng: random.Random,
    speed: Mapping[str, float] | None = None,
    medians: Mapping[str, float] | None = None,
    budget_s: float = 0.0,
    serial: Collection[str] = (),
    paused: Collection[str] = (),
) -> tuple[PipelineId, PipelineId]:
    """Two different pipelines, favouring pairs with fewer votes (and fast pipelines, given ``speed``:
    :func:`speed_weights`), sides in random order. Pipelines in ``paused``
    (:meth:`ragnarok.arena.health.PauseBook.paused`) are left out while at least two others remain, else all
    are drawn. Two sides that share a one-at-a-time generator (:func:`shares_slot`) are drawn only when no
    other pair can be, weighted by :func:`serial_factor`: the battle then runs them one after the other."""
    if len({p.spec for p in pool}) < 2:
        raise ValueError("the arena pool needs at least two different pipelines")
    by_spec = {p.spec: p for p in pool}
    live = [p for p in pool if p.spec not in paused]
    if len({p.spec for p in live}) >= 2:
        pool = live
    weights = pair_weights(pool, votes, speed, medians, budget_s, serial)
    shared = {pair_key(a.spec, b.spec) for a, b in itertools.combinations(pool, 2) if shares_slot(a, b, serial)}
    apart = {key: w for key, w in weights.items() if key not in shared}
    if any(apart.values()):
        weights = apart
    elif not any(weights.values()):
        weights = pair_weights(pool, votes)
    pairs = sorted(weights)
    a, b = rng.choices(pairs, weights=[weights[p] for p in pairs], k=1)[0]
    if rng.random() < 0.5:
        a, b = b, a
    return by_spec[a], by_spec[b]


def components(pool: Sequence[PipelineId]) -> tuple[list[str], list[str], list[str]]:
    """The retrievers, rerankers (``none`` first) and generators that occur in the pool, for dropdowns."""
    retrievers = list(dict.fromkeys(p.retriever for p in pool))
    rerankers = list(dict.fromkeys([NO_RERANKER, *(p.reranker for p in pool)]))
    generators = list(dict.fromkeys(p.generator for p in pool))
    return retrievers, rerankers, generators
