"""Search strategies over a :class:`~ragnarok.optimize.space.Space`, all on one Optuna study.

Optuna's ``random``, ``tpe`` and ``grid`` samplers, and the greedy walks of AutoRAG and Orbach et al. 2025.
Keeping every strategy on one study lets any number of workers share it and a new process resume it where it
stopped (reseeded proposals, greedy steps computed from the finished trials).

Design notes: docs/internals/optimize.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.space import RETRIEVAL_SIDE, Space

GREEDY = ("greedy", "greedy-m", "greedy-r")
STAGES = ("query", "retrieval", "rerank", "passage", "generator")  # a trial's seconds per query, by stage


def make_sampler(strategy: str, space: Space, seed: int) -> optuna.samplers.BaseSampler:
    if strategy == "tpe":
        return Reseeded(lambda s: optuna.samplers.TPESampler(seed=s, n_startup_trials=5), seed)
    if strategy == "grid":
        return _Grid({n.name: [c.label for c in n.candidates] for n in space.nodes}, seed=seed)
    if strategy == "random":
        return Reseeded(lambda s: optuna.samplers.RandomSampler(seed=s), seed)
    return optuna.samplers.RandomSampler(seed=seed)  # greedy's (its trials are all enqueued)


class Reseeded(optuna.samplers.BaseSampler):
    """A sampler whose trial N is proposed by ``make(seed of (seed, N))``: its proposals depend on the trial's
    place in the study (and, for TPE, the finished trials), not on how many this process asked for before, so a
    study resumed in a new process continues where it stopped. (A sampler seeded once replays its sequence from
    the start in every process: 8 trials, resumed after 4, covered 4 pipelines.) A trial's place is its number
    less the trials before it that an interrupt gave back: the one that takes over a given-back trial (its rerun,
    or the next trial drawn) has its place, so a study interrupted and resumed proposes what it would have
    uninterrupted."""

    def __init__(self, make: Callable[[int], optuna.samplers.BaseSampler], seed: int):
        self._make, self._seed = make, seed
        self._current: tuple[int, optuna.samplers.BaseSampler] | None = None

    @staticmethod
    def place(study: optuna.Study, trial: FrozenTrial) -> int:
        given_back = sum(
            1 for t in study.get_trials(deepcopy=False) if t.number < trial.number and t.user_attrs.get("interrupted")
        )
        return trial.number - given_back

    def _for(self, study: optuna.Study, trial: FrozenTrial) -> optuna.samplers.BaseSampler:
        if self._current is None or self._current[0] != trial.number:
            seed = int(np.random.SeedSequence([self._seed, self.place(study, trial)]).generate_state(1)[0])
            self._current = (trial.number, self._make(seed))
        return self._current[1]

    def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
        return self._for(study, trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        return self._for(study, trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):  # type: ignore[no-untyped-def]
        return self._for(study, trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial):  # type: ignore[no-untyped-def]
        self._for(study, trial).before_trial(study, trial)

    def after_trial(self, study, trial, state, values):  # type: ignore[no-untyped-def]
        self._for(study, trial).after_trial(study, trial, state, values)


def seconds_per_query(trial: FrozenTrial) -> float:
    """A trial's seconds per query, its stages together (0 when not measured)."""
    return sum((trial.user_attrs.get("seconds") or {}).get(n, 0.0) for n in STAGES)


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
    finished = {
        _key(t.params): t
        for t in trials
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state == TrialState.FAIL and "error" in t.user_attrs)
    }
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
        best = _best_option(options, finished, metric_node)
        if best is not None:
            fixed = best
    return None


def greedy_best(strategy: str, space: Space, trials: Sequence[FrozenTrial]) -> dict[str, str]:
    """The labels the walk has fixed so far (its best pipeline)."""
    finished = {_key(t.params): t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)}
    fixed = space.default()
    for name in greedy_order(strategy, space):
        node = space.node(name)
        assert node is not None
        options = [{**fixed, name: c.label} for c in node.candidates]
        best = _best_option(options, finished, name if strategy == "greedy" else None)
        if best is None:
            break
        fixed = best
    return fixed


def _best_option(
    options: list[dict[str, str]], finished: Mapping[tuple[tuple[str, str], ...], FrozenTrial], metric_node: str | None
) -> dict[str, str] | None:
    """The option whose finished trial scores best (ties: the faster, then the earlier candidate); None when
    none scored."""
    scored = [
        (trial_score(finished[_key(o)], metric_node), -seconds_per_query(finished[_key(o)]), -i)
        for i, o in enumerate(options)
        if _key(o) in finished
    ]
    scored = [s for s in scored if not math.isnan(s[0])]
    return options[-max(scored)[2]] if scored else None


def _key(params: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in params.items()))


def params_key(params: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    return _key(params)
