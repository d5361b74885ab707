"""Search strategies over a :class:`~ragnarok.optimize.space.Space`, all on one Optuna study.

* ``random``, ``tpe``, ``grid``: Optuna's samplers; a trial suggests one candidate label per node.
* ``greedy`` (AutoRAG): node by node in pipeline order, every candidate of the node with the nodes before it
  fixed at their best and the nodes after it at their first candidate, judged by the node's own metric
  (retrieval nodes: their ranking's metric; the generator: the answer's); candidates over the node's speed
  threshold are dropped.
* ``greedy-m`` / ``greedy-r`` (Orbach et al. 2025): the same walk judged by the end-to-end objective, with
  the generation side first (generator, passage, then the retrieval side) or the retrieval side first.

The greedy walk is a function of the finished trials, so any number of workers share it: each computes the
current step from the study, enqueues the step's missing candidates (Optuna's waiting trials) and claims one
with ``study.ask()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.space import RETRIEVAL_SIDE, Space

GREEDY = ("greedy", "greedy-m", "greedy-r")


def make_sampler(strategy: str, space: Space, seed: int) -> optuna.samplers.BaseSampler:
    if strategy == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5)
    if strategy == "grid":
        return _Grid({n.name: [c.label for c in n.candidates] for n in space.nodes}, seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)  # random, and greedy's (its trials are all enqueued)


class _Grid(optuna.samplers.GridSampler):
    """Optuna's grid; the search loop stops at its end (``is_exhausted``), since ``Study.stop`` (what the
    grid calls after the last trial) works only inside ``study.optimize``, not with ask and tell."""

    def after_trial(self, study, trial, state, values):  # type: ignore[no-untyped-def]
        pass


def suggest(trial: optuna.Trial, space: Space) -> dict[str, str]:
    """One candidate label per node (enqueued trials get their fixed labels back)."""
    return {n.name: trial.suggest_categorical(n.name, [c.label for c in n.candidates]) for n in space.nodes}


def greedy_order(strategy: str, space: Space) -> list[str]:
    names = [n.name for n in space.nodes]
    if strategy == "greedy-m":
        return [n for n in reversed(names) if n not in RETRIEVAL_SIDE] + [n for n in names if n in RETRIEVAL_SIDE]
    if strategy == "greedy-r":
        return [n for n in names if n in RETRIEVAL_SIDE] + [n for n in names if n not in RETRIEVAL_SIDE]
    return names


@dataclass
class GreedyStep:
    node: str
    fixed: dict[str, str]
    candidates: list[dict[str, str]]  # the full labels of each candidate of the step


def trial_score(trial: FrozenTrial, node: str | None) -> float:
    """The score the greedy walk ranks a finished trial by (NaN: dropped: failed, too slow)."""
    if trial.state != TrialState.COMPLETE:
        return math.nan
    value = trial.user_attrs.get(f"metric.{node}") if node else trial.value
    return float(value) if value is not None else math.nan


def greedy_step(strategy: str, space: Space, trials: Sequence[FrozenTrial]) -> GreedyStep | None:
    """The step the walk is at, given the finished trials; None when every node has been fixed."""
    finished = {_key(t.params): t for t in trials
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                or (t.state == TrialState.FAIL and "error" in t.user_attrs)}
    fixed = space.default()
    for name in greedy_order(strategy, space):
        node = space.node(name)
        assert node is not None
        if len(node.candidates) == 1:
            continue
        options = [{**fixed, name: c.label} for c in node.candidates]
        missing = [o for o in options if _key(o) not in finished]
        if missing:
            return GreedyStep(name, fixed, options)
        metric_node = name if strategy == "greedy" else None
        scored = [(trial_score(finished[_key(o)], metric_node), i) for i, o in enumerate(options)]
        scored = [(s, i) for s, i in scored if not math.isnan(s)]
        if scored:
            best = max(scored, key=lambda si: (si[0], -si[1]))[1]  # ties: the earlier candidate
            fixed = options[best]
    return None


def greedy_best(strategy: str, space: Space, trials: Sequence[FrozenTrial]) -> dict[str, str]:
    """The labels the walk has fixed so far (its best pipeline)."""
    finished = {_key(t.params): t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)}
    fixed = space.default()
    for name in greedy_order(strategy, space):
        node = space.node(name)
        assert node is not None
        options = [{**fixed, name: c.label} for c in node.candidates]
        metric_node = name if strategy == "greedy" else None
        scored = [(trial_score(finished[_key(o)], metric_node), i) for i, o in enumerate(options) if _key(o) in finished]
        scored = [(s, i) for s, i in scored if not math.isnan(s)]
        if not scored:
            break
        fixed = options[max(scored, key=lambda si: (si[0], -si[1]))[1]]
    return fixed


def _key(params: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in params.items()))


def params_key(params: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return _key(params)
