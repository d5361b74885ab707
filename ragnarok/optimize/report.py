"""The search's report: the held-out scores, the plots and the trials table (spec, metric per node, seconds per
query, state with the whole error), as Markdown and as an HTML page built as HTML (tables are ``<table>``, never
Markdown run through a converter: a ``|`` inside a spec stays in its cell), beside PNG files.

The plots are :mod:`ragnarok.optimize.plots`' and the trials' states :mod:`ragnarok.optimize.trial_states`';
a trial is named by Optuna's number, from 0, everywhere: the table's ``#``, the plot's x axis, the progress
lines."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from optuna.trial import FrozenTrial, TrialState

from ragnarok.optimize.plots import bar_span, plot_best_so_far, plot_importance, plot_modules, trial_points
from ragnarok.optimize.space import Space
from ragnarok.optimize.strategies import seconds_per_query
from ragnarok.optimize.trial_states import best_so_far, finished, num, ran, state_of

# the plots and the trial states have modules of their own; what the command line, the tests and the benchmarks
# import from here stays importable here
__all__ = [
    "FoldResult",
    "bar_span",
    "best_so_far",
    "finished",
    "html_table",
    "plot_best_so_far",
    "ran",
    "shorten",
    "state_of",
    "table",
    "trial_points",
    "write_report",
]


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
        metrics = [num(t.user_attrs.get(f"metric.{n}")) for n in nodes]
        spec = _cell(str(t.user_attrs.get("spec", "")))
        lines.append(
            "| "
            + " | ".join(
                [
                    str(t.number),
                    num(t.value),
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
        cells = [str(t.number), num(t.value)]
        row = "".join(f'<td class="num">{_e(c)}</td>' for c in cells)
        row += f'<td class="spec"><code>{_e(str(t.user_attrs.get("spec", "")))}</code></td>'
        row += "".join(f'<td class="num">{_e(num(t.user_attrs.get(f"metric.{n}")))}</td>' for n in nodes)
        row += f'<td class="num">{seconds_per_query(t):.3f}</td><td class="state">{_e(state_of(t, trials))}</td>'
        out.append(f'<tr class="{kind}">{row}</tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _cell(text: str | None) -> str:
    """Text inside a Markdown table cell (its ``|`` escaped)."""
    return str(text).replace("|", "\\|")


def _e(text: object) -> str:
    return html.escape(str(text))


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
            f"| {i} | {len(f.train)} | {len(f.test)} | best: `{_cell(f.best_spec)}` | {num(f.train_value)} | {held} |"
        )
        rows.append(
            f'<tr class="best"><td class="num">{i}</td><td class="num">{len(f.train)}</td>'
            f'<td class="num">{len(f.test)}</td><td class="spec">best: <code>{_e(f.best_spec or "-")}</code>'
            f'</td><td class="num">{num(f.train_value)}</td><td>{_e(held or "-")}</td></tr>'
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
