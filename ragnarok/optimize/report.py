"""The search's report: the held-out scores, plots (best-so-far vs trials with each trial's value; per node,
each candidate's best metric as AutoRAG's bar plots, failed and too-slow candidates marked; parameter
importance) and the trials table (spec, metric per node, seconds per query, state with the whole error), as
Markdown and as an HTML page built as HTML (tables are ``<table>``, never Markdown run through a converter:
a ``|`` inside a spec stays in its cell), beside PNG files.

A trial is named by Optuna's number, from 0, everywhere: the table's ``#``, the plot's x axis, the progress
lines. A trial given back by an interrupted command is listed as ``interrupted`` (with the trial that ran it
again); a sampler's repeat of a finished trial (``same_as``: not run) is left out. Bars start at 0."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.space import Space
from ragnarok.optimize.strategies import seconds_per_query


@dataclass
class FoldResult:
    study: str
    train: list[str]
    test: list[str]
    best_spec: str | None
    train_value: float | None
    held_out: dict[str, float]  # metric -> mean over the held-out topics
    per_topic: dict[str, float] = field(default_factory=dict)  # the objective per held-out topic
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)  # spec -> metric -> held-out mean
    baseline_topics: dict[str, dict[str, float]] = field(default_factory=dict)


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
                + (_num(again[0].value) if again[0].state == TrialState.COMPLETE else again[0].state.name.lower())
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
            _num(again.value) if again.state == TrialState.COMPLETE else again.state.name.lower()
        )
    return text


def shorten(text: str, width: int) -> str:
    """``text`` cut at a word before ``width`` with an ellipsis, its open parentheses and brackets closed."""
    if len(text) <= width:
        return text
    cut = text[:width].rsplit(" ", 1)[0].rstrip(" ,;:") + " …"
    closing = ""
    for opened, closed in (("(", ")"), ("[", "]")):
        closing += closed * max(0, cut.count(opened) - cut.count(closed))
    return cut + closing


def _rows(trials: Sequence[FrozenTrial], limit: int | None) -> list[FrozenTrial]:
    """Best first; ties: the faster, then the earlier."""
    return sorted(
        finished(trials),
        key=lambda t: (-(t.value if t.value is not None else -math.inf), seconds_per_query(t), t.number),
    )[:limit]


def table(trials: Sequence[FrozenTrial], space: Space, limit: int | None = None) -> str:
    """The trials as a Markdown table, best first (a spec's ``|`` escaped; errors shortened whole words)."""
    nodes = [n.name for n in space.nodes]
    head = ["#", "objective", "spec", *(f"{n} metric" for n in nodes), "s/query", "state"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in _rows(trials, limit):
        metrics = [_num(t.user_attrs.get(f"metric.{n}")) for n in nodes]
        spec = _cell(str(t.user_attrs.get("spec", "")))
        lines.append(
            "| "
            + " | ".join(
                [
                    str(t.number),
                    _num(t.value),
                    f"`{spec}`",
                    *metrics,
                    f"{seconds_per_query(t):.3f}",
                    _cell(shorten(state_of(t, trials), 200)),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def html_table(trials: Sequence[FrozenTrial], space: Space, limit: int | None = None) -> str:
    """The trials as an HTML table, best first; failed and too-slow rows marked by class."""
    nodes = [n.name for n in space.nodes]
    head = ["#", "objective", "spec", *(f"{n} metric" for n in nodes), "s/query", "state"]
    out = ['<table class="trials"><thead><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for t in _rows(trials, limit):
        kind = {TrialState.PRUNED: "pruned", TrialState.FAIL: "failed"}.get(t.state, "complete")
        cells = [str(t.number), _num(t.value)]
        row = "".join(f'<td class="num">{_e(c)}</td>' for c in cells)
        row += f'<td class="spec"><code>{_e(str(t.user_attrs.get("spec", "")))}</code></td>'
        row += "".join(f'<td class="num">{_e(_num(t.user_attrs.get(f"metric.{n}")))}</td>' for n in nodes)
        row += f'<td class="num">{seconds_per_query(t):.3f}</td><td class="state">{_e(state_of(t, trials))}</td>'
        out.append(f'<tr class="{kind}">{row}</tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _cell(text: str | None) -> str:
    """Text inside a Markdown table cell (its ``|`` escaped)."""
    return str(text).replace("|", "\\|")


def _e(text: object) -> str:
    return html.escape(str(text))


def _num(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) and not math.isnan(value) else "-"


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


def _counts(trials: Sequence[FrozenTrial]) -> str:
    done = finished(trials)
    cut = [t for t in done if t.state == TrialState.FAIL and "error" not in t.user_attrs]
    parts = [
        f"{sum(t.state == s for t in done if t not in cut)} {w}"
        for s, w in ((TrialState.COMPLETE, "complete"), (TrialState.PRUNED, "too slow"), (TrialState.FAIL, "failed"))
    ]
    if cut:
        parts.append(f"{len(cut)} interrupted")
    retries = sum("retry_of" in t.user_attrs for t in done)
    repeats = sum("same_as" in t.user_attrs for t in trials)
    return (
        f"{len(done)} trials: "
        + ", ".join(parts)
        + (f", including {retries} retried at the end" if retries else "")
        + (f"; {repeats} proposals repeating a finished trial were not run" if repeats else "")
    )


def write_report(
    out: Path,
    title: str,
    objective: str,
    folds: Sequence[FoldResult],
    studies: Sequence[tuple[str, object, list[FrozenTrial]]],
    space: Space,
    pooled: Mapping[str, float],
    stem: str = "report",
) -> tuple[Path, Path]:
    """``STEM.md`` and ``STEM.html`` in ``out`` (with the plots)."""
    out.mkdir(parents=True, exist_ok=True)
    md = [
        f"# Pipeline search: {title}",
        "",
        f"Objective: **{objective}** (training topics); final scores on held-out topics only.",
        "",
    ]
    page = [
        f"<h1>Pipeline search: {_e(title)}</h1>",
        f"<p>Objective: <strong>{_e(objective)}</strong> (training topics); final scores on held-out topics only.</p>",
    ]
    md += [
        "## Held-out scores",
        "",
        "| fold | train | test | pipeline | train " + objective + " | held-out |",
        "|---|---|---|---|---|---|",
    ]
    rows = []
    for i, f in enumerate(folds):
        held = ", ".join(f"{k} {v:.4f}" for k, v in f.held_out.items())
        md.append(
            f"| {i} | {len(f.train)} | {len(f.test)} | best: `{_cell(f.best_spec)}` | {_num(f.train_value)} | {held} |"
        )
        rows.append(
            f'<tr class="best"><td class="num">{i}</td><td class="num">{len(f.train)}</td>'
            f'<td class="num">{len(f.test)}</td><td class="spec">best: <code>{_e(f.best_spec or "-")}</code>'
            f'</td><td class="num">{_num(f.train_value)}</td><td>{_e(held or "-")}</td></tr>'
        )
        for spec, values in f.baselines.items():
            scores = ", ".join(f"{k} {v:.4f}" for k, v in values.items())
            md.append(f"| {i} | | | baseline `{_cell(spec)}` | | {scores} |")
            rows.append(
                f'<tr class="baseline"><td class="num">{i}</td><td></td><td></td><td class="spec">baseline: '
                f"<code>{_e(spec)}</code></td><td></td><td>{_e(scores)}</td></tr>"
            )
    page += [
        "<h2>Held-out scores</h2>",
        '<table class="held"><thead><tr><th>fold</th><th>train topics</th>'
        f"<th>test topics</th><th>pipeline</th><th>train {_e(objective)}</th><th>held-out</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table>",
    ]
    if pooled:
        text = ", ".join(f"{k} {v:.4f}" for k, v in pooled.items())
        md += ["", f"Pooled over folds (each topic scored by the pipeline searched without it): {text}"]
        page.append(f"<p>Pooled over folds (each topic scored by the pipeline searched without it): {_e(text)}</p>")
    for name, study, trials in studies:
        curve = plot_best_so_far(
            {name: [best_so_far(trials)]}, out / f"{name}.best.png", f"{objective} (train)", trials
        )
        md += ["", f"## Study `{name}`", "", _counts(trials), "", f"![best so far]({curve.name})", ""]
        page += [
            f"<h2>Study <code>{_e(name)}</code></h2>",
            f"<p>{_e(_counts(trials))}</p>",
            f'<figure><img src="{_e(curve.name)}" alt="best {_e(objective)} so far vs trials">'
            "<figcaption>Best so far (line), each trial (dots), failed and too-slow trials (marks at the "
            "bottom)</figcaption></figure>",
        ]
        if (bars := plot_modules(trials, space, out / f"{name}.modules.png")) is not None:
            md += [f"![candidates per node]({bars.name})", ""]
            page.append(
                f'<figure><img src="{_e(bars.name)}" alt="best metric per candidate and node">'
                "<figcaption>Per node, each candidate's best metric (hatched: failed or too slow)"
                "</figcaption></figure>"
            )
        if (imp := plot_importance(study, out / f"{name}.importance.png")) is not None:
            md += [f"![parameter importance]({imp.name})", ""]
            page.append(f'<figure><img src="{_e(imp.name)}" alt="parameter importance"></figure>')
        md += [table(trials, space, limit=50), ""]
        page += ["<h3>Trials (best first)</h3>", html_table(trials, space, limit=200)]
    md_path = out / f"{stem}.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    html_path = out / f"{stem}.html"
    html_path.write_text(_page(title, "\n".join(page)), encoding="utf-8")
    return md_path, html_path


CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px;width:100%}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
td.spec code{white-space:pre-wrap;word-break:break-word}td.state{max-width:28em;overflow-wrap:anywhere}
tr.pruned td{background:#fff6e5}tr.failed td{background:#fdecea}tr.best td{font-weight:600}
figure{margin:1em 0}figure img{max-width:100%}figcaption{font-size:12px;color:#555}"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )
