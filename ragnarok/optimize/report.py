"""The search's report: the trials table (spec, parameters, metric per node, seconds per query), the held-out
scores, and plots (best-so-far vs trials; per node, each module's best metric as AutoRAG's bar plots;
parameter importance), as Markdown and HTML beside PNG files."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.space import Space


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
    """The best objective after each trial, in trial order (NaN until the first complete one)."""
    out, best = [], -math.inf
    for t in sorted(trials, key=lambda t: t.number):
        if t.state == TrialState.COMPLETE and t.value is not None:
            best = max(best, t.value)
        out.append(best if best > -math.inf else math.nan)
    return out


def finished(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    return [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            or (t.state == TrialState.FAIL and "error" in t.user_attrs)]


def table(trials: Sequence[FrozenTrial], space: Space, limit: int | None = None) -> str:
    """The trials as a Markdown table, best first."""
    nodes = [n.name for n in space.nodes]
    rows = sorted(finished(trials), key=lambda t: (-(t.value if t.value is not None else -math.inf), t.number))
    head = ["#", "objective", "spec", *(f"{n} metric" for n in nodes), "s/query", "state"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in rows[:limit]:
        seconds = sum((t.user_attrs.get("seconds") or {}).get(n, 0.0) for n in ("query", "retrieval", "rerank",
                                                                                 "passage", "generator"))
        metrics = [_num(t.user_attrs.get(f"metric.{n}")) for n in nodes]
        state = t.state.name.lower() + (f" (too slow: {', '.join(t.user_attrs['too_slow'])})"
                                        if "too_slow" in t.user_attrs else "") + \
            (f" ({t.user_attrs['error'][:80]})" if "error" in t.user_attrs else "")
        spec = _cell(str(t.user_attrs.get("spec", "")))
        lines.append("| " + " | ".join([str(t.number), _num(t.value), f"`{spec}`", *metrics, f"{seconds:.3f}",
                                        state]) + " |")
    return "\n".join(lines)


def _cell(text: str | None) -> str:
    """A spec inside a Markdown table cell (its ``|`` escaped)."""
    return str(text).replace("|", "\\|")


def _num(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) and not math.isnan(value) else "-"


def plot_best_so_far(curves: Mapping[str, Sequence[Sequence[float]]], path: Path, ylabel: str) -> Path:
    """Mean (line) and min-max band (shaded) of each strategy's best-so-far curves."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, runs in curves.items():
        length = max(len(r) for r in runs)
        data = np.array([list(r) + [r[-1]] * (length - len(r)) for r in runs], dtype=float)
        x = np.arange(1, length + 1)
        mean = np.nanmean(data, axis=0)
        ax.plot(x, mean, label=f"{name} (n={len(runs)})")
        if len(runs) > 1:
            ax.fill_between(x, np.nanmin(data, axis=0), np.nanmax(data, axis=0), alpha=0.2)
    ax.set_xlabel("trials")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_modules(trials: Sequence[FrozenTrial], space: Space, path: Path) -> Path | None:
    """Per node, the best node metric each module reached (AutoRAG's per-node bar plots)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    nodes = [n for n in space.nodes if len(n.candidates) > 1]
    if not nodes:
        return None
    fig, axes = plt.subplots(len(nodes), 1, figsize=(7, 2.2 * len(nodes)), squeeze=False)
    for ax, node in zip(axes[:, 0], nodes):
        modules = {c.label: c.module for c in node.candidates}
        best: dict[str, float] = {}
        for t in trials:
            value = t.user_attrs.get(f"metric.{node.name}")
            module = modules.get(str(t.params.get(node.name)))
            if t.state == TrialState.COMPLETE and module and isinstance(value, (int, float)):
                best[module] = max(best.get(module, -math.inf), value)
        ax.barh(list(best), list(best.values()))
        ax.set_title(f"{node.name} ({node.metric})", fontsize=9)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_importance(study: object, path: Path) -> Path | None:
    import optuna  # noqa: PLC0415

    try:
        importances = optuna.importance.get_param_importances(study)  # type: ignore[arg-type]
    except (RuntimeError, ValueError, ZeroDivisionError):
        return None  # too few complete trials, or one value per parameter
    if not importances:
        return None
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(6, 0.5 + 0.4 * len(importances)))
    ax.barh(list(importances)[::-1], list(importances.values())[::-1])
    ax.set_xlabel("importance (fANOVA)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(out: Path, title: str, objective: str, folds: Sequence[FoldResult],
                 studies: Sequence[tuple[str, object, list[FrozenTrial]]], space: Space,
                 pooled: Mapping[str, float]) -> tuple[Path, Path]:
    """``report.md`` and ``report.html`` in ``out`` (with the plots)."""
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# Pipeline search: {title}", "", f"Objective: **{objective}** (training topics); final scores on "
          "held-out topics only.", ""]
    md += ["## Held-out scores", "", "| fold | train | test | best pipeline | train " + objective + " | held-out |",
           "|---|---|---|---|---|---|"]
    for i, f in enumerate(folds):
        held = ", ".join(f"{k} {v:.4f}" for k, v in f.held_out.items())
        md.append(f"| {i} | {len(f.train)} | {len(f.test)} | `{_cell(f.best_spec)}` | {_num(f.train_value)} | {held} |")
        for spec, values in f.baselines.items():
            md.append(f"| {i} | | | baseline `{_cell(spec)}` | | {', '.join(f'{k} {v:.4f}' for k, v in values.items())} |")
    if pooled:
        md += ["", "Pooled over folds (each topic scored by the pipeline searched without it): " +
               ", ".join(f"{k} {v:.4f}" for k, v in pooled.items())]
    images: list[str] = []
    for name, study, trials in studies:
        curve = plot_best_so_far({name: [best_so_far(trials)]}, out / f"{name}.best.png", f"best {objective} (train)")
        images.append(curve.name)
        md += ["", f"## Study `{name}`", "", f"![best so far]({curve.name})", ""]
        if (bars := plot_modules(trials, space, out / f"{name}.modules.png")) is not None:
            md += [f"![modules per node]({bars.name})", ""]
            images.append(bars.name)
        if (imp := plot_importance(study, out / f"{name}.importance.png")) is not None:
            md += [f"![parameter importance]({imp.name})", ""]
            images.append(imp.name)
        md += [table(trials, space, limit=50), ""]
    text = "\n".join(md) + "\n"
    md_path = out / "report.md"
    md_path.write_text(text, encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(_html(title, text), encoding="utf-8")
    return md_path, html_path


def _html(title: str, markdown: str) -> str:
    """A plain HTML page of the Markdown (headings, tables, images, paragraphs), every text escaped."""
    body = []
    in_table = False
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            if set(line) <= set("|-"):
                continue
            body.append(("<table>" if not in_table else "") + "<tr>" +
                        "".join(f"<td>{html.escape(c.strip('`').replace(chr(92) + '|', '|'))}</td>" for c in cells) + "</tr>")
            in_table = True
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("!["):
            src = line[line.index("(") + 1:-1]
            body.append(f'<img src="{html.escape(src)}" alt="">')
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>td{border:1px solid #ccc;padding:2px 6px;font-size:12px}table{border-collapse:collapse}"
            "</style></head><body>" + "\n".join(body) + "</body></html>\n")
