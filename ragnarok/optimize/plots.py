"""The search report's plots, as PNG files: the best objective so far against trials (each trial's value a dot,
failed, too-slow and interrupted trials marked), per node each candidate's best metric (AutoRAG's bar plots,
bars from 0, failed and too-slow candidates hatched), and parameter importance (fANOVA).

matplotlib (Agg) and numpy are imported on first use, so that importing the report costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.space import Space
from ragnarok.optimize.trial_states import finished, ran


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def plot_best_so_far(
    curves: Mapping[str, Sequence[Sequence[float]]],
    path: Path,
    ylabel: str,
    trials: Sequence[FrozenTrial] | None = None,
) -> Path:
    """Mean (line) and min-max band (shaded) of each strategy's best-so-far curves, over trial numbers from 0;
    with ``trials`` (one study, its curve made by :func:`best_so_far`), at the trials' own numbers, each
    complete trial's value as a dot and each failed / too-slow / interrupted trial as a mark at the bottom."""
    import numpy as np  # noqa: PLC0415

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    numbers = [t.number for t in ran(trials)] if trials else []
    for name, runs in curves.items():
        length = max(len(r) for r in runs)
        data = np.array([list(r) + [r[-1]] * (length - len(r)) for r in runs], dtype=float)
        x = np.array(numbers) if len(numbers) == length else np.arange(length)
        mean = np.nanmean(data, axis=0) if np.isfinite(data).any() else data[0]
        ax.plot(
            x,
            mean,
            label=f"{name} best so far" + (f" (n={len(runs)})" if len(runs) > 1 else ""),
            drawstyle="steps-post",
            linewidth=2,
        )
        if len(runs) > 1:
            ax.fill_between(x, np.nanmin(data, axis=0), np.nanmax(data, axis=0), alpha=0.2, step="post")
    if trials:
        ordered = finished(trials)
        done = trial_points(trials)
        if done:
            ax.scatter(*zip(*done), s=18, color="#555", zorder=3, label="trial")
        bottom, top = ax.get_ylim()
        low = bottom - (top - bottom) * 0.04
        ax.set_ylim(low - (top - bottom) * 0.04, top)
        for marker, color, label, which in (
            ("v", "#e08a00", "too slow", lambda t: t.state == TrialState.PRUNED),
            ("x", "#c0392b", "failed", lambda t: t.state == TrialState.FAIL and "error" in t.user_attrs),
            ("|", "#7f8c8d", "interrupted", lambda t: t.state == TrialState.FAIL and "error" not in t.user_attrs),
        ):
            xs = [t.number for t in ordered if which(t)]
            if xs:
                ax.scatter(xs, [low] * len(xs), marker=marker, color=color, s=40, zorder=4, label=label, clip_on=False)
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial # (from 0, as in the table)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def trial_points(trials: Sequence[FrozenTrial]) -> list[tuple[int, float]]:
    """(trial number, value) of each complete trial that ran: the plot's dots, at the table's numbers."""
    return [(t.number, float(t.value)) for t in ran(trials) if t.state == TrialState.COMPLETE and t.value is not None]


def bar_span(values: Sequence[float]) -> tuple[float, float]:
    """The value axis of a node's bars: from 0 (a bar's length is its value; below 0 when a value is), to the
    largest value and a margin."""
    lo, hi = (min(0.0, *values), max(0.0, *values)) if values else (0.0, 1.0)
    return lo, ((hi + (hi - lo) * 0.05) if hi > lo else 1.0)


def module_scores(trials: Sequence[FrozenTrial], space: Space) -> dict[str, dict[str, float | str]]:
    """Per node (with more than one candidate), each candidate's best node metric, or ``failed`` /
    ``too slow`` when none of its trials completed."""
    out: dict[str, dict[str, float | str]] = {}
    for node in space.nodes:
        if len(node.candidates) < 2:
            continue
        scores: dict[str, float | str] = {}
        for t in sorted(trials, key=lambda t: t.number):
            label = t.params.get(node.name)
            if label is None:
                continue
            label = str(label)
            value = t.user_attrs.get(f"metric.{node.name}")
            if t.state == TrialState.COMPLETE and isinstance(value, (int, float)) and not math.isnan(value):
                old = scores.get(label)
                scores[label] = max(old, value) if isinstance(old, float) else float(value)
            elif label not in scores and t.state == TrialState.PRUNED:
                scores[label] = "too slow"
            elif label not in scores and t.state == TrialState.FAIL and "error" in t.user_attrs:
                scores[label] = "failed"
        out[node.name] = scores
    return out


def plot_modules(trials: Sequence[FrozenTrial], space: Space, path: Path) -> Path | None:
    """Per node, the best node metric each candidate reached (AutoRAG's per-node bar plots): bars from 0
    (:func:`bar_span`), each labelled with its value (near-equal bars told apart by their labels), failed and
    too-slow candidates drawn hatched and named."""
    scores = module_scores(trials, space)
    nodes = [n for n in space.nodes if scores.get(n.name)]
    if not nodes:
        return None
    plt = _pyplot()
    heights = [max(1.4, 0.35 * len(scores[n.name]) + 0.9) for n in nodes]
    fig, axes = plt.subplots(
        len(nodes), 1, figsize=(8, sum(heights)), squeeze=False, gridspec_kw={"height_ratios": heights}
    )
    for ax, node in zip(axes[:, 0], nodes):
        items = scores[node.name]
        left, right = bar_span([v for v in items.values() if isinstance(v, float)])
        ordered = sorted(
            items.items(), key=lambda kv: (not isinstance(kv[1], float), -(kv[1] if isinstance(kv[1], float) else 0))
        )
        for y, (label, value) in enumerate(reversed(ordered)):
            if isinstance(value, float):
                ax.barh(y, value - left, left=left, color="#3b76af")
                ax.text(value, y, f" {value:.4f}", va="center", fontsize=8)
            else:
                ax.barh(
                    y,
                    (right - left) * 0.3,
                    left=left,
                    color="#eee",
                    edgecolor="#c0392b" if value == "failed" else "#e08a00",
                    hatch="//",
                )
                ax.text(
                    left + (right - left) * 0.31,
                    y,
                    f" {value}",
                    va="center",
                    fontsize=8,
                    color="#c0392b" if value == "failed" else "#b36b00",
                )
        ax.set_yticks(range(len(ordered)), [label for label, _ in reversed(ordered)])
        ax.set_xlim(left, right + (right - left) * 0.15)  # room for the value labels
        ax.set_title(f"{node.name} ({node.metric})", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_importance(study: object, path: Path) -> Path | None:
    import optuna  # noqa: PLC0415

    if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < 5:  # type: ignore[attr-defined]
        return None  # too few to say (Optuna would call every parameter equally important)
    try:
        importances = optuna.importance.get_param_importances(study)  # type: ignore[arg-type]
    except (RuntimeError, ValueError, ZeroDivisionError):
        return None  # too few complete trials, or one value per parameter
    if not importances:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 0.8 + 0.4 * len(importances)))
    names, values = list(importances)[::-1], list(importances.values())[::-1]
    ax.barh(names, values)
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.2 or 1)
    ax.set_xlabel("importance (fANOVA)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
