"""``ragnarok optimize CONFIG``: search pipelines on the training topics, score the best on the held-out ones,
save it as a preset, write the report; the best spec is the last line of stdout. ``--worker`` only runs
trials of the shared study (start as many as you like, on any machine that reaches its storage)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.cli_errors import fails_cleanly


@fails_cleanly
def optimize(
    config_file: Annotated[Path, typer.Argument(metavar="CONFIG", help="The search's config (YAML or TOML).")],
    strategy: Annotated[Optional[str], typer.Option(help="greedy, greedy-m, greedy-r, random, tpe or grid "
                                                         "(overrides the config).")] = None,
    trials: Annotated[Optional[int], typer.Option(help="Trials in all, over every worker (overrides the config's "
                                                       "budget.trials).")] = None,
    seconds: Annotated[Optional[float], typer.Option(help="Wall-clock seconds to search.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Sampler seed (overrides the config).")] = None,
    storage: Annotated[Optional[str], typer.Option(help="sqlite:///FILE or a postgresql:// URL shared by "
                                                        "workers (overrides the config).")] = None,
    worker: Annotated[bool, typer.Option("--worker", help="Only run trials of the shared study: no held-out "
                                                          "scores, report or preset.")] = False,
    folds: Annotated[Optional[int], typer.Option(min=2, max=10, help="k folds instead of the config's split: "
                                                                      "k searches, each topic held out once.")] = None,
    fold: Annotated[Optional[int], typer.Option(help="With split.folds: search this fold only.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run every stage every time (to measure the "
                                                              "stage cache).")] = False,
    output: Annotated[Optional[Path], typer.Option(help="Report directory (overrides the config).")] = None,
) -> None:
    """Search pipeline specs (AutoRAG's node-by-node greedy, or Optuna's random, TPE, grid) on your topics."""
    from ragnarok.optimize.config import STRATEGIES, load_config  # noqa: PLC0415
    from ragnarok.optimize.objective import Evaluator  # noqa: PLC0415
    from ragnarok.optimize.space import build_space  # noqa: PLC0415
    from ragnarok.settings import get_settings  # noqa: PLC0415

    config, located = load_config(config_file)
    if strategy is not None and strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} (use {', '.join(STRATEGIES)})")
    if trials is not None and trials <= 0 or seconds is not None and seconds <= 0:
        raise ValueError("the budget is 0: --trials and --seconds must be above 0")
    config = config.model_copy(update={k: v for k, v in {"strategy": strategy, "seed": seed, "storage": storage}.items()
                                       if v is not None})
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
    out = output or Path(config.output or config_file.parent / f"optimize-{config.study}")
    from ragnarok.optimize.prepare import prepare_index  # noqa: PLC0415

    config.index = prepare_index(config, space, settings)
    evaluator = Evaluator(config, space, settings)
    try:
        _search(config, space, evaluator, out, worker, fold, bool(output))
    finally:
        evaluator.close()


def _search(config, space, evaluator, out: Path, worker: bool, only: int | None, _given: bool) -> None:  # type: ignore[no-untyped-def]
    from tqdm import tqdm  # noqa: PLC0415

    from ragnarok.optimize.report import FoldResult, write_report  # noqa: PLC0415
    from ragnarok.optimize.study import best_trial, open_study, search, storage_url, used  # noqa: PLC0415

    splits = evaluator.splits()
    if only is not None and not 0 <= only < len(splits):
        raise ValueError(f"--fold {only}: the split has folds 0 to {len(splits) - 1}")
    url = storage_url(config, out)
    typer.echo(f"search space: {space.size():,} pipelines over {len(space.nodes)} nodes; strategy "
               f"{config.strategy}; storage {_redacted(url)}", err=True)
    folds: list[FoldResult] = []
    studies = []
    for i, (train, test) in enumerate(splits):
        if only is not None and i != only:
            continue
        name = f"{config.study}.{config.strategy}.seed{config.seed}" + (f".fold{i}" if len(splits) > 1 else "")
        study = open_study(config, space, url, name, config.strategy)
        total = config.budget.trials
        bar = tqdm(total=total, desc=f"{name}", unit="trial", file=sys.stderr, initial=min(total or 0, used(study.get_trials())),
                   disable=not sys.stderr.isatty())

        def progress(_trial, bar=bar, study=study):  # type: ignore[no-untyped-def]
            best = best_trial(study)
            bar.update(1)
            bar.set_postfix_str(f"best {best.value:.4f}" if best else "best -")

        search(study, evaluator, space, config.strategy, train, total, config.budget.seconds, progress)
        bar.close()
        if worker:
            continue
        best = best_trial(study)
        trials_ = study.get_trials(deepcopy=False)
        studies.append((name, study, trials_))
        result = FoldResult(name, train, test, best.user_attrs["spec"] if best else None,
                            best.value if best else None, {})
        if best is not None:
            held = evaluator.score(best.user_attrs["spec"], test, check_speed=False)
            result.held_out = {config.objective: held.value, **_extra(evaluator, held, test)}
            result.per_topic = held.per_topic
        for spec in config.baselines:
            base = evaluator.score(spec, test, check_speed=False)
            result.baselines[spec] = {config.objective: base.value, **_extra(evaluator, base, test)}
            result.baseline_topics[spec] = base.per_topic
        folds.append(result)
        typer.echo(f"{name}: {len(trials_)} trials; best on train {config.objective} "
                   f"{result.train_value if result.train_value is not None else float('nan'):.4f}; held-out "
                   + ", ".join(f"{k} {v:.4f}" for k, v in result.held_out.items()) + f" ({len(test)} topics)")
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
    md, html_path = write_report(out, config.study, config.objective, folds, studies, space, pooled)
    best_spec = max(set(chosen), key=lambda s: (chosen.count(s), -chosen.index(s)))
    from ragnarok.presets import save_preset  # noqa: PLC0415

    preset = config.preset or config.study
    saved = save_preset(preset, best_spec, evaluator.settings.data_dir)
    typer.echo(f"report: {md} and {html_path}; preset {preset!r} saved in {saved}", err=True)
    if pooled:
        typer.echo("pooled held-out " + ", ".join(f"{k} {v:.4f}" for k, v in pooled.items()))
    typer.echo(best_spec)


def _extra(evaluator, result, test) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """MAP and nDCG@10 beside a retrieval objective (the held-out table shows both)."""
    if evaluator.generation or evaluator.qrels is None:
        return {}
    out = {}
    from ragnarok.evaluate import evaluate  # noqa: PLC0415

    run = result.run
    for metric in ("nDCG@10", "AP"):
        if metric != evaluator.config.objective and run:
            out["MAP" if metric == "AP" else metric] = evaluate(evaluator.qrels, run, {metric: metric})[metric]
    return {k: v for k, v in out.items() if not math.isnan(v)}


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url  # noqa: PLC0415

    return make_url(url).render_as_string(hide_password=True)
