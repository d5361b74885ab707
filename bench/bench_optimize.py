"""Pipeline search (``ragnarok optimize``) on CACM: the stage cache's effect, and the HPO study's comparison of
strategies — the held-out metric of the best-so-far pipeline (best on the training topics) after each trial,
mean and spread over seeds (each seed: its own train/test split and sampler seed).

    python bench/bench_optimize.py cache      [--config configs/optimize-cacm.yaml] [--index DIR] [--out DIR]
                                              [--specs 5] [--modes "no cache" "cache, cold" "cache, warm"]
    python bench/bench_optimize.py strategies [--trials 30] [--seeds 0 1 2] [--strategies greedy random tpe ...]

Every strategy and seed shares one process and one stage cache (a SQLite file in --out, kept across runs), so
a retrieval is computed once for the whole benchmark; ``cache`` measures what that saves per trial.

``cache`` scores the same specs (drawn with seed 0 from the config's space; CACM's: fused pipelines at depth
1000) on the training topics, one mode after the other: ``no cache``; ``cache, cold`` (a fresh evaluator, in
memory); ``cache, warm`` (the same specs again on that evaluator, with its memo of finished trials cleared, so
the stage cache alone serves them: the rankings, the fusions, the per-topic metric values). It prints the seconds
of each trial and their mean per mode, the warm mean's ratio to the cold one, and checks that every mode gives
the same results (objective, per-topic values, node metrics and final rankings, to the last digit).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(args: argparse.Namespace, memory_mb: int = 1024, disk: bool = True):  # type: ignore[no-untyped-def]
    from ragnarok.core.settings import get_settings
    from ragnarok.optimize.config import load_config
    from ragnarok.optimize.objective import Evaluator
    from ragnarok.optimize.prepare import prepare_index
    from ragnarok.optimize.space import build_space

    config, located = load_config(Path(args.config))
    settings = get_settings()
    space = build_space(config, located, settings)
    config.index = args.index or prepare_index(config, space, settings)
    config.cache.memory_mb = memory_mb
    config.cache.disk = str(Path(args.out) / "stage-cache.db") if disk else None
    return config, space, Evaluator(config, space, settings)


def cache_effect(args: argparse.Namespace) -> dict:
    """Seconds per trial for the same specs: no cache; cache cold (first run); cache warm (second run)."""
    out: dict[str, list[float]] = {}
    config, space, _ = setup(args, 0, False)
    rng = random.Random(0)
    specs = [space.spec({n.name: rng.choice(n.candidates).label for n in space.nodes}) for _ in range(args.specs)]
    results: dict[str, list] = {}
    evaluator = None
    for mode, memory in (("no cache", 0), ("cache, cold", 1024), ("cache, warm", 1024)):
        if mode not in args.modes:
            continue
        if mode != "cache, warm" or evaluator is None or not evaluator.cache.enabled:
            if evaluator is not None:
                evaluator.close()
            config, space, evaluator = setup(args, memory, False)
            train = evaluator.splits()[0][0]
        if mode == "cache, warm" and "cache, cold" not in args.modes:  # warm it up first
            for spec in specs:
                evaluator.score(spec, train, check_speed=False)
        times, results[mode] = [], []
        for spec in specs:
            evaluator._scores.clear()  # noqa: SLF001 - the stage cache alone, not the memo of finished trials
            start = time.perf_counter()
            result = evaluator.score(spec, train, check_speed=False)
            times.append(time.perf_counter() - start)
            results[mode].append(result)
            print(f"  {mode}: {times[-1]:.2f} s  {spec}  {config.objective} {result.value!r}", flush=True)
        out[mode] = times
        print(
            f"{mode}: {statistics.fmean(times):.2f} s/trial (mean) over {len(specs)} specs, {len(train)} topics",
            flush=True,
        )

    def exact(r) -> str:  # type: ignore[no-untyped-def]  # floats as repr: the last digit counts, NaN too
        return json.dumps([r.value, r.per_topic, r.node_metrics, r.run], sort_keys=True)

    first = next(iter(results.values()))
    for mode, got in results.items():  # every mode scores each spec the same, to the last digit
        for a, b in zip(first, got):
            assert exact(a) == exact(b), f"{mode} differs from {next(iter(results))} on {a.spec}"
    if "cache, warm" in out:
        warm = statistics.fmean(out["cache, warm"])
        print(
            f"warm fused trial: {warm:.2f} s per trial (mean of {len(specs)}; each: "
            f"{', '.join(f'{t:.2f}' for t in out['cache, warm'])})"
            + (f"; cold/warm {statistics.fmean(out['cache, cold']) / warm:.1f}x" if "cache, cold" in out else "")
        )
    print(f"results identical across modes ({', '.join(results)})", flush=True)
    return {"specs": specs, "seconds": out, "values": {m: [r.value for r in rs] for m, rs in results.items()}}


def curves_of(study, evaluator, test, held_cache, seed):  # type: ignore[no-untyped-def]
    """After each finished trial (in order): the training objective of the best trial so far, and that
    pipeline's score on the held-out topics."""
    from optuna.trial import TrialState

    from ragnarok.optimize.report import finished

    curve, train_curve, best = [], [], None
    for trial in sorted(finished(study.get_trials(deepcopy=False)), key=lambda t: t.number):
        if trial.state == TrialState.COMPLETE and (best is None or trial.value > best.value):
            best = trial
        if best is None:
            curve.append(math.nan)
            train_curve.append(math.nan)
            continue
        key = (best.user_attrs["spec"], seed)
        if key not in held_cache:
            held_cache[key] = evaluator.score(best.user_attrs["spec"], test, check_speed=False).value
        curve.append(held_cache[key])
        train_curve.append(best.value)
    return curve, train_curve


def strategies(args: argparse.Namespace) -> dict:
    from ragnarok.optimize.objective import split_topics
    from ragnarok.optimize.report import plot_best_so_far
    from ragnarok.optimize.study import best_trial, open_study, search

    config, space, evaluator = setup(args)
    results: dict[str, dict[str, dict]] = {}
    held_cache: dict[tuple[str, int], float] = {}
    storage = f"sqlite:///{Path(args.out) / 'strategies.db'}"
    for seed in args.seeds:
        train, test = split_topics(evaluator.judged, 0.5, None, seed)[0]
        config.seed = seed
        for strategy in args.strategies:
            name = f"{strategy}.seed{seed}.t{args.trials}"
            study = open_study(config, space, storage, name, strategy)
            start = time.perf_counter()
            if not args.no_search:
                search(study, evaluator, space, strategy, train, args.trials, None)  # resumes a study cut short
            if not study.get_trials():
                continue
            curve, train_curve = curves_of(study, evaluator, test, held_cache, seed)
            best = best_trial(study)
            results.setdefault(strategy, {})[str(seed)] = {
                "held_out": curve,
                "train": train_curve,
                "seconds": time.perf_counter() - start,
                "best": best.user_attrs["spec"] if best else None,
                "trials": len(curve),
            }
            print(
                f"{name}: {len(curve)} trials in {time.perf_counter() - start:.0f} s; best {results[strategy][str(seed)]['best']}"
                f"; held-out {config.objective} {curve[-1] if curve else float('nan'):.4f} "
                f"(after 10 trials {curve[min(9, len(curve) - 1)] if curve else float('nan'):.4f})",
                flush=True,
            )
    curves = {s: [r["held_out"] for r in runs.values() if r["held_out"]] for s, runs in results.items()}
    plot = plot_best_so_far(
        {s: c for s, c in curves.items() if c},
        Path(args.out) / "strategies.png",
        f"held-out {config.objective} of the best-so-far pipeline",
    )
    print(f"plot: {plot}")
    table = [
        "| strategy | after 5 | after 10 | after 20 | final (mean ± sd over seeds) | trials |",
        "|---|---|---|---|---|---|",
    ]
    for s, runs in curves.items():

        def at(n: int) -> str:
            vals = [r[min(n, len(r)) - 1] for r in runs if r]
            return f"{statistics.fmean(vals):.4f}" if vals else "-"

        finals = [r[-1] for r in runs if r]
        sd = statistics.pstdev(finals) if len(finals) > 1 else 0.0
        table.append(
            f"| {s} | {at(5)} | {at(10)} | {at(20)} | {statistics.fmean(finals):.4f} ± {sd:.4f} | "
            f"{statistics.fmean(len(r) for r in runs):.0f} |"
        )
    print("\n".join(table))
    return {"results": results, "table": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["cache", "strategies"])
    parser.add_argument("--config", default=str(ROOT / "configs" / "optimize-cacm.yaml"))
    parser.add_argument("--index", default=None, help="a built Lucene index (default: the config's)")
    parser.add_argument("--out", default="/tmp/bench-optimize")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--strategies", nargs="+", default=["greedy", "greedy-m", "random", "tpe"])
    parser.add_argument(
        "--no-search", action="store_true", help="strategies: only the curves of the studies already in --out"
    )
    parser.add_argument("--specs", type=int, default=5, help="cache: specs timed")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["no cache", "cache, cold", "cache, warm"],
        choices=["no cache", "cache, cold", "cache, warm"],
        help="cache: the modes timed",
    )
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    from ragnarok.optimize.study import quiet

    quiet()
    result = cache_effect(args) if args.what == "cache" else strategies(args)
    (Path(args.out) / f"{args.what}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
