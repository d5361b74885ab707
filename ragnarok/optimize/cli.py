"""``ragnarok optimize CONFIG``: search pipelines on the training topics, score the best on the held-out ones,
save it as a preset, write the report; the best spec is the last line of stdout. ``--worker`` only runs
trials of the shared study (start as many as you like, on any machine that reaches its storage)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputFormatOpt
from ragnarok.runtime.interrupt import on_stop, resume_with, stops_on_signals


@fails_cleanly
@stops_on_signals("no trial was run yet; run the same command again")
def optimize(
    config_file: Annotated[Path, typer.Argument(metavar="CONFIG", help="The search's config (YAML or TOML).")],
    strategy: Annotated[
        Optional[str], typer.Option(help="greedy, greedy-m, greedy-r, random, tpe or grid (overrides the config).")
    ] = None,
    trials: Annotated[
        Optional[int], typer.Option(help="Trials in all, over every worker (overrides the config's budget.trials).")
    ] = None,
    seconds: Annotated[Optional[float], typer.Option(help="Wall-clock seconds to search.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Sampler seed (overrides the config).")] = None,
    storage: Annotated[
        Optional[str],
        typer.Option(help="sqlite:///FILE or a postgresql:// URL shared by workers (overrides the config)."),
    ] = None,
    worker: Annotated[
        bool,
        typer.Option("--worker", help="Only run trials of the shared study: no held-out scores, report or preset."),
    ] = False,
    folds: Annotated[
        Optional[int],
        typer.Option(
            min=2, max=10, help="k folds instead of the config's split: k searches, each topic held out once."
        ),
    ] = None,
    fold: Annotated[Optional[int], typer.Option(help="With split.folds: search this fold only.")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Run every stage every time (to measure the stage cache).")
    ] = False,
    output: Annotated[Optional[Path], typer.Option(help="Report directory (overrides the config).")] = None,
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """Search pipeline specs (AutoRAG's node-by-node greedy, or Optuna's random, TPE, grid) on your topics."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.optimize.config import STRATEGIES, load_config  # noqa: PLC0415
    from ragnarok.optimize.objective import Evaluator  # noqa: PLC0415
    from ragnarok.optimize.space import build_space  # noqa: PLC0415

    if output is not None:
        cli_output.file_not_format(output)
    config, located = load_config(config_file)
    if strategy is not None and strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} (use {', '.join(STRATEGIES)})")
    if trials is not None and trials <= 0 or seconds is not None and seconds <= 0:
        raise ValueError("the budget is 0: --trials and --seconds must be above 0")
    config = config.model_copy(
        update={k: v for k, v in {"strategy": strategy, "seed": seed, "storage": storage}.items() if v is not None}
    )
    if trials is not None:
        config.budget.trials = trials
    if seconds is not None:
        config.budget.seconds = seconds
    if config.budget.trials is None and config.budget.seconds is None:
        raise located.error(("budget",), "no budget: give budget.trials and/or budget.seconds (or --trials)")
    if folds is not None:
        config.split.folds, config.split.test = folds, None
    if no_cache:
        config.cache.memory_mb, config.cache.disk = 0, None
    settings = get_settings()
    space = build_space(config, located, settings)
    _check_judge(config, located, space, settings)
    # the report directory: --output, the config's `output`, else the data directory (never beside the
    # config: a config in a source tree would get its reports and study.db written into it)
    out = output or Path(config.output or settings.data_dir / "optimize" / config.study)
    names = _study_names(config, space, out, fold, "study" in located.data, located)  # before any work
    from ragnarok.optimize.prepare import prepare_index  # noqa: PLC0415

    config.index = prepare_index(config, space, settings)
    evaluator = Evaluator(config, space, settings)
    try:
        from ragnarok.optimize.study import give_back_in_flight  # noqa: PLC0415

        with on_stop(give_back_in_flight):  # interrupted: the trial in flight is run first on resume
            _search(config, space, evaluator, out, worker, fold, names)
    finally:
        evaluator.close()


def _check_judge(config, located, space, settings) -> None:  # type: ignore[no-untyped-def]
    """The judge names a configured LLM generator (or the proxy judge), when a nugget score is asked for."""
    from ragnarok.optimize.config import NUGGET_METRICS, suggest  # noqa: PLC0415

    nuggets = config.objective in NUGGET_METRICS or any(n.metric in NUGGET_METRICS for n in space.nodes)
    if not nuggets or config.judge == "proxy":
        return
    known = list(settings.generator_configs())
    if config.judge not in known:
        close = suggest(config.judge, ["proxy", *known])
        raise located.error(
            ("judge",),
            f"judge: unknown judge {config.judge!r}"
            + (f"; did you mean {close!r}?" if close else f" (proxy, or a generator: {', '.join(known)})"),
            True,
        )


def _study_names(config, space, out: Path, only: int | None, explicit: bool, located):  # type: ignore[no-untyped-def]
    """Per fold, the study for this config (keyed by what changes results) and its fingerprint; a one-line note
    when the config changed since the study of its default name was made. The same explicit name with
    another config is refused (exit 2), the difference shown."""
    from ragnarok.optimize.study import storage_url  # noqa: PLC0415
    from ragnarok.optimize.study_keys import StudyConflict, fingerprint, study_name  # noqa: PLC0415

    url = storage_url(config, out)
    print_ = fingerprint(config, space)
    count = config.split.folds or 1
    names = {}
    for i in range(count):
        if only is not None and i != only:
            continue
        base = f"{config.study}.{config.strategy}.seed{config.seed}" + (f".fold{i}" if count > 1 else "")
        try:
            name, note = study_name(url, base, print_, explicit)
        except StudyConflict as exc:
            raise located.error(("study",), str(exc), True) from None
        if note:
            cli_output.warn(note, prefix="")
        names[i] = (name, print_)
    return names


def _search(config, space, evaluator, out: Path, worker: bool, only: int | None, names) -> None:  # type: ignore[no-untyped-def]
    from tqdm import tqdm  # noqa: PLC0415

    from ragnarok.optimize.report import FoldResult, finished, write_report  # noqa: PLC0415
    from ragnarok.optimize.study import best_trial, open_study, search, storage_url, used, used_now  # noqa: PLC0415
    from ragnarok.optimize.study_keys import mark  # noqa: PLC0415

    splits = evaluator.splits()
    if only is not None and not 0 <= only < len(splits):
        raise ValueError(f"--fold {only}: the split has folds 0 to {len(splits) - 1}")
    url = storage_url(config, out)
    typer.echo(
        f"search space: {space.size():,} pipelines over {len(space.nodes)} nodes; strategy "
        f"{config.strategy}; storage {_redacted(url)}",
        err=True,
    )
    folds: list[FoldResult] = []
    studies = []
    for i, (train, test) in enumerate(splits):
        if only is not None and i != only:
            continue
        name, print_ = names[i]
        study = open_study(config, space, url, name, config.strategy)
        mark(study, print_)
        total = config.budget.trials
        tty = sys.stderr.isatty()
        bar = tqdm(
            total=total,
            desc=f"{name}",
            unit="trial",
            file=sys.stderr,
            initial=min(total or 0, used(study.get_trials())),
            disable=not tty,
        )
        clock = _Clock(total, config.budget.seconds, used(study.get_trials()))
        resume_with(
            lambda study=study, name=name, total=total: (
                f"{used_now(study)}{f' of {total}' if total else ''} trials of study {name!r} "
                f"kept in {_redacted(url)}; run the same command again to resume"
            )
        )

        def progress(trial, bar=bar, study=study, name=name, clock=clock, tty=tty):  # type: ignore[no-untyped-def]
            best = best_trial(study)
            bar.update(1)
            bar.set_postfix_str(f"best {best.value:.4f}" if best else "best -")
            if not tty:  # a log or a pipe: one line per trial
                typer.echo(clock.line(name, trial, best), err=True)

        search(study, evaluator, space, config.strategy, train, total, config.budget.seconds, progress)
        bar.close()
        if worker:
            continue
        best = best_trial(study)
        trials_ = study.get_trials(deepcopy=False)
        studies.append((name, study, trials_))
        result = FoldResult(
            name, train, test, best.user_attrs["spec"] if best else None, best.value if best else None, {}
        )
        if best is not None or config.baselines:
            typer.echo(
                f"{name}: scoring the best pipeline"
                + (f" and {len(config.baselines)} baseline(s)" if config.baselines else "")
                + f" on {len(test)} held-out topics",
                err=True,
            )
        if best is not None:
            held = evaluator.score(best.user_attrs["spec"], test, check_speed=False)
            result.held_out = {config.objective: held.value, **_extra(evaluator, held, test)}
            result.per_topic = held.per_topic
        for spec in config.baselines:
            base = evaluator.score(spec, test, check_speed=False)
            result.baselines[spec] = {config.objective: base.value, **_extra(evaluator, base, test)}
            result.baseline_topics[spec] = base.per_topic
        folds.append(result)
        typer.echo(
            f"{name}: {len(finished(trials_))} trials; best on train {config.objective} "
            f"{result.train_value if result.train_value is not None else float('nan'):.4f}; held-out "
            + ", ".join(f"{k} {v:.4f}" for k, v in result.held_out.items())
            + f" ({len(test)} topics)"
        )
    summary = _summary(config, folds, worker)
    cli_output.result(summary)
    if worker:
        typer.echo(f"worker done: cache hits {evaluator.cache.hits}, misses {evaluator.cache.misses}", err=True)
        return
    chosen = [f.best_spec for f in folds if f.best_spec]
    if not chosen:
        raise RuntimeError("no trial finished: every pipeline failed or was too slow (see the report)")
    pooled = {}
    if len(folds) > 1:
        per_topic = {q: v for f in folds for q, v in f.per_topic.items()}
        pooled = {config.objective: statistics.fmean(per_topic.values())} if per_topic else {}
        for spec in config.baselines:
            base = {q: v for f in folds for q, v in f.baseline_topics.get(spec, {}).items()}
            if base:
                pooled[f"baseline {spec}"] = statistics.fmean(base.values())
    # one report and one preset per strategy: a search with another strategy keeps this one's
    md, html_path = write_report(
        out,
        f"{config.study} ({config.strategy})",
        config.objective,
        folds,
        studies,
        space,
        pooled,
        stem=f"report.{config.strategy}",
    )
    best_spec = max(set(chosen), key=lambda s: (chosen.count(s), -chosen.index(s)))
    preset = config.preset or f"{config.study}-{config.strategy}"
    saved, note = save_preset_noting(preset, best_spec, evaluator.settings.data_dir)
    if note:
        cli_output.warn(note, prefix="")
    summary.update(best_spec=best_spec, preset=preset, report=str(md), report_html=str(html_path), pooled=pooled)
    typer.echo(f"report: {md} and {html_path}; preset {preset!r} saved in {saved}", err=True)
    if pooled:
        typer.echo("pooled held-out " + ", ".join(f"{k} {v:.4f}" for k, v in pooled.items()))
    typer.echo(best_spec)


def _summary(config, folds, worker: bool) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The search as the ``--output json`` envelope's result (the best spec, preset and report: once known)."""
    return {
        "study": config.study,
        "strategy": config.strategy,
        "objective": config.objective,
        "worker": worker,
        "folds": [
            {
                "study": f.study,
                "best_spec": f.best_spec,
                "train_value": f.train_value,
                "held_out": dict(f.held_out),
                "topics": len(f.test),
            }
            for f in folds
        ],
        "best_spec": None,
        "preset": None,
        "report": None,
        "report_html": None,
        "pooled": {},
    }


def _extra(evaluator, result, test) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """MAP and nDCG@10 beside a retrieval objective (the held-out table shows both)."""
    if evaluator.generation or evaluator.qrels is None:
        return {}
    out = {}
    from ragnarok.core.evaluation import evaluate  # noqa: PLC0415

    run = result.run
    for metric in ("nDCG@10", "AP"):
        if metric != evaluator.config.objective and run:
            out["MAP" if metric == "AP" else metric] = evaluate(evaluator.qrels, run, {metric: metric})[metric]
    return {k: v for k, v in out.items() if not math.isnan(v)}


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    return make_url(url).render_as_string(hide_password=True)


def save_preset_noting(name: str, spec: str, data_dir: Path) -> tuple[Path, str | None]:
    """Save the preset; a line saying so when it replaces one of the same name."""
    from ragnarok.core.presets import save_preset, saved_presets  # noqa: PLC0415

    before = saved_presets(data_dir).get(name)
    saved = save_preset(name, spec, data_dir)
    if before is None:
        return saved, None
    if before == spec:
        return saved, f"preset {name!r} was already saved with this spec"
    return saved, f"preset {name!r} replaced: it was {before!r}"


class _Clock:
    """One progress line per trial (when stderr is no terminal): its number (Optuna's, from 0), how many of the
    budget are done (a resumed study's count goes on from what it kept), value, elapsed time and ETA."""

    def __init__(self, trials: int | None, seconds: float | None, already: int):
        import time  # noqa: PLC0415

        self.start, self.trials, self.seconds, self.done = time.monotonic(), trials, seconds, 0
        self.already = already
        self.left = None if trials is None else max(0, trials - already)

    def line(self, name: str, trial, best) -> str:  # type: ignore[no-untyped-def]
        import time  # noqa: PLC0415

        self.done += 1
        elapsed = time.monotonic() - self.start
        value = f"{trial.value:.4f}" if trial.value is not None else trial.state.name.lower()
        why = trial.user_attrs.get("verdict")
        if why and trial.value is None:
            value += f" ({why})"
        if "retry_of" in trial.user_attrs:
            value += f" (retry of #{trial.user_attrs['retry_of']})"
        etas = []
        if self.left:
            etas.append(elapsed / self.done * max(0, self.left - self.done))
        if self.seconds:
            etas.append(max(0.0, self.seconds - elapsed))
        eta = f"{min(etas):.0f}s" if etas else "?"
        of = f"/{self.trials}" if self.trials else ""
        top = f"{best.value:.4f}" if best else "-"
        return (
            f"{name}: trial {trial.number} [{self.already + self.done}{of}] {value}; best {top}; "
            f"elapsed {elapsed:.0f}s; eta {eta}"
        )
