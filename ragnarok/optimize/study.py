"""Trials in an Optuna study with RDB storage: a SQLite file by default, a PostgreSQL URL for many workers on
many machines. Killing a worker and running it again resumes: a trial whose worker stopped sending heartbeats
is failed and enqueued again (Optuna's ``RetryHeartbeatStaleTrialCallback``); the budget counts trials over all
workers; a trial is claimed once (``study.ask``), and a greedy candidate that another worker already claimed is
never run twice. A sampler's proposal identical to a finished trial is not run again nor counted in the budget:
the trial is told the known result (``same_as``), as Optuna's FAQ suggests for repeated parameters. An
interrupted command's trial in flight is given back: failed with ``interrupted``, its parameters enqueued to run
first on resume (``rerun_of``); trial numbers go on across resumes (Optuna's, from 0)."""

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
from ragnarok.optimize.storage import UncutStorage
from ragnarok.optimize.strategies import GREEDY, greedy_step, make_sampler, params_key, seconds_per_query, suggest
from ragnarok.runtime.interrupt import wait_for_writes, writing

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
            storage = UncutStorage(
                url,
                engine_kwargs=engine,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=3 * HEARTBEAT_S,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
            break
        except SQLAlchemyError:
            if attempt == 9:
                raise
            time.sleep(0.5 + random.random())
    study = optuna.create_study(
        storage=storage,
        study_name=name,
        direction="maximize",
        load_if_exists=True,
        sampler=make_sampler(strategy, space, config.seed),
    )
    if "strategy" not in study.user_attrs:
        study.set_user_attr("strategy", strategy)
    return study


def quiet() -> None:
    """Optuna's notes on its experimental parts (heartbeats with ask/tell) are not the user's business."""
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message=".*Heartbeat of storage.*")
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _counts(trial: FrozenTrial) -> bool:
    """Whether a trial uses the budget: finished, running, or failed by its pipeline (not by a kill, not a repeat
    of a finished trial's parameters)."""
    if "same_as" in trial.user_attrs:
        return False
    return trial.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING) or (
        trial.state == TrialState.FAIL and "error" in trial.user_attrs
    )


def used(trials: Sequence[FrozenTrial]) -> int:
    """Trials that use the budget (a retry at the end, of a candidate failed or too slow under load, does not)."""
    return sum(_counts(t) and "retry_of" not in t.user_attrs for t in trials)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def search(
    study: optuna.Study,
    evaluator: Evaluator,
    space: Space,
    strategy: str,
    train: Sequence[str],
    trials: int | None,
    seconds: float | None,
    on_trial: Callable[[FrozenTrial], None] | None = None,
) -> int:
    """Run trials until the study has ``trials`` (over every worker), ``seconds`` pass, or the strategy has
    nothing left, then once more each candidate that failed or was too slow (load is not a verdict: a 504 or
    a slow minute of a busy machine); a greedy walk that a retry changes walks on. Returns how many trials
    this worker ran."""
    ran = _search(study, evaluator, space, strategy, train, trials, seconds, on_trial)
    retried, completed = retry_failed(study, evaluator, space, train, on_trial)
    ran += retried
    if completed and strategy in GREEDY:
        ran += _search(study, evaluator, space, strategy, train, trials, seconds, on_trial)
    return ran


def retry_failed(
    study: optuna.Study,
    evaluator: Evaluator,
    space: Space,
    train: Sequence[str],
    on_trial: Callable[[FrozenTrial], None] | None = None,
) -> tuple[int, int]:
    """Each candidate that failed by its pipeline (a stage's error or timeout) or was pruned as too slow, run
    once more as a new trial with ``retry_of`` (not counted in the budget); returns (retries run, completed)."""
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs}
    todo = [
        t
        for t in trials
        if "retry_of" not in t.user_attrs
        and t.number not in retried
        and t.params
        and (
            (t.state == TrialState.FAIL and "error" in t.user_attrs)
            or (t.state == TrialState.PRUNED and "too_slow" in t.user_attrs)
        )
    ]
    me = worker_id()
    ran = completed = 0
    for old in todo:
        # a new running trial with the old one's labels (not through the waiting queue, where the walk's
        # candidates left by the budget's end wait)
        template = optuna.trial.create_trial(
            state=TrialState.RUNNING,
            params=old.params,
            distributions=old.distributions,
            user_attrs={"retry_of": old.number},
        )
        with writing():  # a trial made is always known, so given back if the command is interrupted
            trial = optuna.Trial(study, study._storage.create_new_trial(study._study_id, template_trial=template))  # noqa: SLF001
            _in_flight[:] = [(study, trial)]
        study._storage.record_heartbeat(trial._trial_id)  # noqa: SLF001
        if any(
            t.user_attrs.get("retry_of") == old.number and t.number < trial.number and _counts(t)
            for t in study.get_trials(deepcopy=False)
        ):
            trial.set_user_attr("duplicate_of", old.number)  # another worker retries it
            study.tell(trial, state=TrialState.FAIL)
            continue
        ran += 1
        labels = {k: str(v) for k, v in old.params.items()}
        if _run_trial(study, trial, evaluator, space.spec(labels), train, me):
            completed += study._storage.get_trial(trial._trial_id).state == TrialState.COMPLETE  # noqa: SLF001
        if on_trial is not None:
            on_trial(study._storage.get_trial(trial._trial_id))  # noqa: SLF001
    return ran, completed


def _search(
    study: optuna.Study,
    evaluator: Evaluator,
    space: Space,
    strategy: str,
    train: Sequence[str],
    trials: int | None,
    seconds: float | None,
    on_trial: Callable[[FrozenTrial], None] | None = None,
) -> int:
    deadline = time.monotonic() + seconds if seconds else math.inf
    ran = repeats = 0
    me = worker_id()
    while time.monotonic() < deadline:
        try:
            fail_stale_trials(study)
            _fail_unclaimed(study)
            current = study.get_trials(deepcopy=False)
            if trials is not None and used(current) >= trials:
                break
            if strategy in GREEDY:
                step = greedy_step(strategy, space, current)
                if step is None:
                    break
                taken = {
                    params_key(_params(t)) for t in current if t.state != TrialState.FAIL or "error" in t.user_attrs
                }
                waiting = {params_key(_params(t)) for t in current if t.state == TrialState.WAITING}
                for labels in step.candidates:
                    if params_key(labels) not in taken:
                        study.enqueue_trial(labels, user_attrs={"greedy_node": step.node}, skip_if_exists=True)
                if not waiting and all(params_key(c) in taken for c in step.candidates):
                    time.sleep(0.5)  # the step's last candidates run on other workers
                    continue
            elif (
                strategy == "grid"
                and study.sampler.is_exhausted(study)
                and not any(t.state == TrialState.WAITING for t in current)
            ):  # type: ignore[attr-defined]
                break  # (a waiting trial: a killed worker's, enqueued again)
            elif (
                strategy not in GREEDY
                and strategy != "grid"
                and (
                    len({params_key(t.params) for t in current if _counts(t) and t.params}) >= space.size()
                    or repeats >= MAX_REPEATS
                )
            ):
                break  # every pipeline of the space was tried (or the sampler proposes only those tried)
            with writing():  # an interrupt waits for both: a trial asked for is always known, so given back
                trial = study.ask()
                _in_flight[:] = [(study, trial)]  # interrupted while its parameters are chosen, it is given back
            study._storage.record_heartbeat(trial._trial_id)  # noqa: SLF001 - at once: a worker killed now is seen
            labels = suggest(trial, space)  # stored at once: other workers see what this trial runs
            everyone = study.get_trials(deepcopy=False)
            before = [t for t in everyone if t.number < trial.number]
            if trials is not None and used(before) >= trials:
                trial.set_user_attr("surplus", True)
                study.tell(trial, state=TrialState.FAIL)  # another worker took the last trial of the budget
                break
            # the same candidate finished, or claimed by a trial numbered before this one: not run twice (a claimed
            # greedy trial is known by the labels it was enqueued with before its worker writes its parameters)
            clash = [
                t
                for t in everyone
                if t.number != trial.number
                and params_key(_params(t)) == params_key(labels)
                and _counts(t)
                and (t.state != TrialState.RUNNING or t.number < trial.number)
                and t.user_attrs.get("retry_of") == trial.user_attrs.get("retry_of")
            ]
            if clash and (strategy in GREEDY or strategy == "grid" or clash[0].state == TrialState.RUNNING):
                trial.set_user_attr("duplicate_of", clash[0].number)
                study.tell(trial, state=TrialState.FAIL)
                continue
            if clash:  # a sampler's repeat of a finished trial: its known result, not run, not in the budget
                _same_as(study, trial, clash[0])
                repeats += 1
                continue
            repeats = 0
            ran += 1
            _run_trial(study, trial, evaluator, space.spec(labels), train, me)
            if on_trial is not None:
                on_trial(study._storage.get_trial(trial._trial_id))  # noqa: SLF001
        except optuna.exceptions.UpdateFinishedTrialError:
            # the trial this worker held was finished by another one meanwhile (on a busy machine): it counts
            # there, and this worker goes on with the next
            continue
    return ran


MAX_REPEATS = 100  # proposals in a row that repeat finished trials: the sampler has nothing new to say


def _same_as(study: optuna.Study, trial: optuna.Trial, known: FrozenTrial) -> None:
    """Tell ``trial`` the result of the finished ``known`` with the same parameters (the sampler learns it again;
    it is not run and uses no budget)."""
    trial.set_user_attr("same_as", known.number)
    trial.set_user_attr("spec", known.user_attrs.get("spec", ""))
    if known.state == TrialState.COMPLETE and known.value is not None:
        study.tell(trial, known.value)
    else:
        study.tell(trial, state=TrialState.PRUNED if known.state == TrialState.PRUNED else TrialState.FAIL)


def _run_trial(
    study: optuna.Study, trial: optuna.Trial, evaluator: Evaluator, spec: str, train: Sequence[str], me: str
) -> bool:
    """Score ``spec`` as ``trial`` and tell the study; False when it failed by its pipeline (a stage's error)."""
    from optuna.storages._heartbeat import get_heartbeat_thread  # noqa: PLC0415

    _in_flight[:] = [(study, trial)]  # given back if the command is interrupted (give_back_in_flight)
    trial.set_user_attr("worker", me)
    trial.set_user_attr("spec", spec)
    with get_heartbeat_thread(trial._trial_id, study._storage):  # noqa: SLF001
        try:
            result = evaluator.score(spec, train)
        except TrialError as exc:
            trial.set_user_attr("error", str(exc))
            trial.set_user_attr("verdict", "timeout" if _is_timeout(str(exc)) else "error")
            study.tell(trial, state=TrialState.FAIL)
            return False
    for node, value in result.node_metrics.items():
        trial.set_user_attr(f"metric.{node}", None if math.isnan(value) else round(value, 6))
    trial.set_user_attr("seconds", {k: round(v, 4) for k, v in result.node_seconds.items() if k != "final"})
    trial.set_user_attr("wall_s", round(result.wall_s, 3))
    trial.set_user_attr("load", round(getattr(result, "load", 1.0), 3))
    if result.too_slow:
        trial.set_user_attr("too_slow", result.too_slow)
        trial.set_user_attr("verdict", "too_slow")
        study.tell(trial, state=TrialState.PRUNED)
    elif math.isnan(result.value):
        trial.set_user_attr("error", "no topic could be scored")
        trial.set_user_attr("verdict", "error")
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, result.value)
    return True


_in_flight: list[tuple[optuna.Study, optuna.Trial]] = []  # the trial this process scores (or last scored)


def give_back_in_flight() -> None:
    """An interrupted command's trial in flight: failed as ``interrupted`` (not counted in the budget; the report
    lists it) and its parameters enqueued again (``rerun_of``), so that running the command again scores it
    first (no waiting for its heartbeat to go stale). A trial already told is left as it is. Through a storage
    of its own: the study's may be locked by the main thread, which the signal stopped anywhere. A trial being
    asked for when the signal came is waited for (its ``writing`` block), then given back too."""
    wait_for_writes(0.5)
    for study, trial in list(_in_flight):
        storage = _own_storage(study)
        try:
            storage.set_trial_user_attr(trial._trial_id, "interrupted", True)  # noqa: SLF001
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)  # noqa: SLF001
        except (RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            continue
        params = dict(trial.params)
        if params:
            kept = {k: trial.user_attrs[k] for k in ("retry_of", "greedy_node") if k in trial.user_attrs}
            optuna.load_study(study_name=study.study_name, storage=storage).enqueue_trial(
                params, user_attrs={**kept, "rerun_of": trial.number}
            )


def used_now(study: optuna.Study) -> int:
    """:func:`used` of the study's trials, read through a storage of its own (an interrupted command's count)."""
    again = optuna.load_study(study_name=study.study_name, storage=_own_storage(study))
    return used(again.get_trials(deepcopy=False))


def _own_storage(study: optuna.Study) -> RDBStorage:
    backend = getattr(study._storage, "_backend", study._storage)  # noqa: SLF001 - behind optuna's cache
    url = backend.url
    engine = {"connect_args": {"timeout": 1}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    return RDBStorage(url, engine_kwargs=engine, skip_compatibility_check=True, skip_table_creation=True)


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    """The best complete trial; a tie goes to the faster pipeline, then to the earlier trial."""
    done = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.value is not None and "same_as" not in t.user_attrs
    ]
    return max(done, key=lambda t: (t.value, -seconds_per_query(t), -t.number)) if done else None


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


def _is_timeout(message: str) -> bool:
    lowered = message.lower()
    return any(w in lowered for w in ("timeout", "timed out", "time out", "504", "deadline", "within"))
