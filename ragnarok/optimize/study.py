"""Trials in an Optuna study with RDB storage: a SQLite file by default, a PostgreSQL URL for many workers on
many machines. Killing a worker and running it again resumes: a trial whose worker stopped sending heartbeats
is failed and enqueued again (Optuna's ``RetryHeartbeatStaleTrialCallback``); the budget counts trials over all
workers; a trial is claimed once (``study.ask``), and a greedy candidate that another worker already claimed is
never run twice."""

from __future__ import annotations

import math
import os
import random
import socket
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.config import OptimizeConfig
from ragnarok.optimize.objective import Evaluator, TrialError
from ragnarok.optimize.space import Space
from ragnarok.optimize.strategies import GREEDY, greedy_step, make_sampler, params_key, suggest

HEARTBEAT_S = int(os.environ.get("RAGNAROK_OPTIMIZE_HEARTBEAT_S", "10"))


def storage_url(config: OptimizeConfig, output: Path) -> str:
    if config.storage:
        return config.storage
    output.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{output / 'study.db'}"


def open_study(config: OptimizeConfig, space: Space, url: str, name: str, strategy: str) -> optuna.Study:
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]  # psycopg 3 (the `postgres` extra), not psycopg2
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    quiet()
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415

    for attempt in range(10):  # workers starting together on a new database race to create its tables
        try:
            storage = RDBStorage(url, engine_kwargs=engine, heartbeat_interval=HEARTBEAT_S,
                                 grace_period=3 * HEARTBEAT_S,
                                 heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3))
            break
        except SQLAlchemyError:
            if attempt == 9:
                raise
            time.sleep(0.5 + random.random())
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize", load_if_exists=True,
                                sampler=make_sampler(strategy, space, config.seed))
    if "strategy" not in study.user_attrs:
        study.set_user_attr("strategy", strategy)
    return study


def quiet() -> None:
    """Optuna's notes on its experimental parts (heartbeats with ask/tell) are not the user's business."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _counts(trial: FrozenTrial) -> bool:
    """Whether a trial uses the budget: finished, running, or failed by its pipeline (not by a kill)."""
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING) or (
        trial.state == TrialState.FAIL and "error" in trial.user_attrs)


def used(trials: Sequence[FrozenTrial]) -> int:
    return sum(_counts(t) for t in trials)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def search(study: optuna.Study, evaluator: Evaluator, space: Space, strategy: str, train: Sequence[str],
           trials: int | None, seconds: float | None,
           on_trial: Callable[[FrozenTrial], None] | None = None) -> int:
    """Run trials until the study has ``trials`` (over every worker), ``seconds`` pass, or the strategy has
    nothing left; returns how many this worker ran."""
    from optuna.storages._heartbeat import get_heartbeat_thread  # noqa: PLC0415

    deadline = time.monotonic() + seconds if seconds else math.inf
    ran = 0
    me = worker_id()
    while time.monotonic() < deadline:
        fail_stale_trials(study)
        _fail_unclaimed(study)
        current = study.get_trials(deepcopy=False)
        if trials is not None and used(current) >= trials:
            break
        if strategy in GREEDY:
            step = greedy_step(strategy, space, current)
            if step is None:
                break
            taken = {params_key(_params(t)) for t in current if t.state != TrialState.FAIL or "error" in t.user_attrs}
            waiting = {params_key(_params(t)) for t in current if t.state == TrialState.WAITING}
            for labels in step.candidates:
                if params_key(labels) not in taken:
                    study.enqueue_trial(labels, user_attrs={"greedy_node": step.node}, skip_if_exists=True)
            if not waiting and all(params_key(c) in taken for c in step.candidates):
                time.sleep(0.5)  # the step's last candidates run on other workers
                continue
        elif strategy == "grid" and study.sampler.is_exhausted(study) and \
                not any(t.state == TrialState.WAITING for t in current):  # type: ignore[attr-defined]
            break  # (a waiting trial: a killed worker's, enqueued again)
        trial = study.ask()
        study._storage.record_heartbeat(trial._trial_id)  # noqa: SLF001 - at once: a worker killed now is seen
        labels = suggest(trial, space)  # stored at once: other workers see what this trial runs
        everyone = study.get_trials(deepcopy=False)
        before = [t for t in everyone if t.number < trial.number]
        if trials is not None and used(before) >= trials:
            trial.set_user_attr("surplus", True)
            study.tell(trial, state=TrialState.FAIL)  # another worker took the last trial of the budget
            break
        if strategy in GREEDY or strategy == "grid":
            # the same candidate finished, or claimed by a trial numbered before this one: not run twice
            clash = [t for t in everyone if t.number != trial.number and params_key(t.params) == params_key(labels)
                     and _counts(t) and (t.state != TrialState.RUNNING or t.number < trial.number)]
            if clash:
                trial.set_user_attr("duplicate_of", clash[0].number)
                study.tell(trial, state=TrialState.FAIL)
                continue
        trial.set_user_attr("worker", me)
        spec = space.spec(labels)
        trial.set_user_attr("spec", spec)
        with get_heartbeat_thread(trial._trial_id, study._storage):  # noqa: SLF001
            try:
                result = evaluator.score(spec, train)
            except TrialError as exc:
                trial.set_user_attr("error", str(exc))
                study.tell(trial, state=TrialState.FAIL)
                ran += 1
                continue
        for node, value in result.node_metrics.items():
            trial.set_user_attr(f"metric.{node}", None if math.isnan(value) else round(value, 6))
        trial.set_user_attr("seconds", {k: round(v, 4) for k, v in result.node_seconds.items() if k != "final"})
        trial.set_user_attr("wall_s", round(result.wall_s, 3))
        if result.too_slow:
            trial.set_user_attr("too_slow", result.too_slow)
            study.tell(trial, state=TrialState.PRUNED)
        elif math.isnan(result.value):
            trial.set_user_attr("error", "no topic could be scored")
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, result.value)
        ran += 1
        if on_trial is not None:
            on_trial(study._storage.get_trial(trial._trial_id))  # noqa: SLF001
    return ran


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.value is not None]
    return max(done, key=lambda t: (t.value, -t.number)) if done else None


def _params(trial: FrozenTrial) -> dict[str, object]:
    """A trial's labels: its parameters, or (enqueued, not yet claimed) the ones it was enqueued with."""
    return trial.params or dict(trial.system_attrs.get("fixed_params", {}))


def _fail_unclaimed(study: optuna.Study) -> None:
    """A trial whose worker died between claiming it and its first heartbeat has no heartbeat for Optuna to
    find stale: fail it after the grace period and enqueue its parameters again."""
    import datetime  # noqa: PLC0415

    grace = datetime.timedelta(seconds=3 * HEARTBEAT_S)
    now = datetime.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if "worker" in t.user_attrs or t.datetime_start is None or now - t.datetime_start < grace:
            continue
        try:
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)  # noqa: SLF001
        except (RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another worker did it
        params = _params(t)
        if params:
            study.enqueue_trial(params)
