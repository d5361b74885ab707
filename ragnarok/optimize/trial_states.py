"""How the search's report reads a study's trials: which ran, which it lists, the best objective so far, and
each trial's state in words (too slow, failed with its whole error, interrupted and run again, retried).

A trial is named by Optuna's number, from 0, everywhere; a sampler's repeat of a finished trial (``same_as``:
not run) is left out, and a trial given back by an interrupted command is listed as ``interrupted``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from optuna.trial import FrozenTrial, TrialState


def best_so_far(trials: Sequence[FrozenTrial]) -> list[float]:
    """The best objective after each trial that ran (:func:`ran`), in trial order (NaN until the first complete
    one)."""
    out, best = [], -math.inf
    for t in ran(trials):
        if t.state == TrialState.COMPLETE and t.value is not None:
            best = max(best, t.value)
        out.append(best if best > -math.inf else math.nan)
    return out


def ran(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """The trials in number order, less a sampler's repeats of finished trials (``same_as``: not run)."""
    return sorted((t for t in trials if "same_as" not in t.user_attrs), key=lambda t: t.number)


def finished(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """The trials the report lists: complete, too slow, failed by their pipeline, or interrupted."""
    return [
        t
        for t in ran(trials)
        if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
        or (t.state == TrialState.FAIL and ("error" in t.user_attrs or "interrupted" in t.user_attrs))
    ]


def state_of(trial: FrozenTrial, all_trials: Sequence[FrozenTrial] = ()) -> str:
    """``complete``, ``too slow (NODES)`` or ``failed: ERROR`` (whole), with its retry, when there was one."""
    if trial.state == TrialState.PRUNED:
        text = "too slow (" + ", ".join(trial.user_attrs.get("too_slow", [])) + ")"
        load = trial.user_attrs.get("load")
        if isinstance(load, (int, float)) and load > 1.05:
            text += f" at load x{load:.1f}"
    elif trial.state == TrialState.FAIL and "error" not in trial.user_attrs and "interrupted" in trial.user_attrs:
        again = [t for t in all_trials if t.user_attrs.get("rerun_of") == trial.number]
        text = (
            "interrupted (given back"
            + (
                f"; run again as #{again[0].number}: "
                + (num(again[0].value) if again[0].state == TrialState.COMPLETE else again[0].state.name.lower())
                if again
                else ""
            )
            + ")"
        )
    elif trial.state == TrialState.FAIL:
        text = "failed: " + str(trial.user_attrs.get("error", "?"))
    else:
        text = trial.state.name.lower()
    if "retry_of" in trial.user_attrs:
        text += f"; retry of #{trial.user_attrs['retry_of']}"
    retries = [
        t for t in all_trials if t.user_attrs.get("retry_of") == trial.number and "duplicate_of" not in t.user_attrs
    ]
    if retries:
        again = retries[0]
        text += f"; retried as #{again.number}: " + (
            num(again.value) if again.state == TrialState.COMPLETE else again.state.name.lower()
        )
    return text


def num(value: object) -> str:
    """A metric as the report writes it: 4 decimals, or ``-`` for none."""
    return f"{value:.4f}" if isinstance(value, (int, float)) and not math.isnan(value) else "-"
