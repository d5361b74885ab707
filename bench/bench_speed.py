"""Two batch goals, timed: (a) ``eval-rag`` of two runs over the 32 demo eval topics with the PROXY
judge in under 10 s warm (>= 500 nugget judgments/s), (b) ``ragnarok run`` of the 301 TREC RAG 2024 test topics
with ``bm25@100 | extractive`` on the demo collection in <= 60 s.

    RAGNAROK_DATA_DIR=/tmp/sdata HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_speed.py \\
        [--runs offline.jsonl extractive.jsonl] [--workdir DIR] [--skip-eval] [--skip-run] [--compare-run FILE]

(a) Without ``--runs`` the two answer files are made first (not timed) with ``ragnarok run`` over the 32 topics
of ``topics/eval/`` (``offline`` and ``bm25@20 | extractive``), in ``--workdir`` (kept there: a second call
reuses them). Then, in this process, ``eval-rag RUN RUN --nuggets topics/eval/demo.nuggets.jsonl`` (the CLI's
own function, its report and paired test included) is timed **warm**: MiniLM and nltk loaded before the clock,
but the judgment cache empty (a new ``judgments.db`` in a temporary folder), no text encoded yet (the vector
cache cleared) and no rule memoised. Printed: seconds, nugget judgments and judgments/s (over the whole command:
report and bootstrap intervals included). ``--vectors-known`` times it a second time keeping the vectors
encoded by the first (what a service that judged these nuggets before has).

(b) ``ragnarok run --topics <rag24 test> --pipeline 'bm25@100 | extractive'`` in its own process, timed from
start to exit (the JVM, the index and the app included), into a new file; ``--compare-run FILE`` says whether
its bytes equal a run written before (a change must not change the answers).

The 1-minute load average is printed before and after each part: on a shared machine, read the times with it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAGNAROK = (
    [sys.executable, "-m", "ragnarok.cli"]
    if not (Path(sys.executable).parent / "ragnarok").exists()
    else [str(Path(sys.executable).parent / "ragnarok")]
)
NUGGETS = ROOT / "topics/eval/demo.nuggets.jsonl"
RAG24 = Path("/work/shared/data/trec-rag/topics.rag24.test.txt")
EVAL_PIPELINES = {"offline": "offline", "extractive": "bm25@20 | extractive"}
EVAL_GOAL_S, JUDGMENTS_GOAL, RUN_GOAL_S = 10.0, 500.0, 60.0


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def verdict(ok: bool) -> str:
    return "goal met" if ok else "goal NOT met"


def make_runs(workdir: Path) -> list[Path]:
    """The two answer files of part (a), made with ``ragnarok run`` when missing."""
    import json

    topics = workdir / "demo32.tsv"
    qids = {json.loads(line)["qid"] for line in NUGGETS.read_text(encoding="utf-8").splitlines() if line.strip()}
    lines = [
        line
        for line in (ROOT / "topics/demo.tsv").read_text(encoding="utf-8").splitlines()
        if line.split("\t", 1)[0] in qids
    ]
    topics.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    runs = []
    for name, pipeline in EVAL_PIPELINES.items():
        out = workdir / f"{name}.jsonl"
        if not out.exists():
            print(f"making {out} ({pipeline!r}, {len(lines)} topics; not timed)", flush=True)
            subprocess.run(
                [
                    *RAGNAROK,
                    "run",
                    "--topics",
                    str(topics),
                    "--pipeline",
                    pipeline,
                    "--run-id",
                    name,
                    "--output",
                    str(out),
                    "--no-progress",
                ],
                check=True,
            )
        runs.append(out)
    return runs


def bench_eval(runs: list[Path], vectors_known: bool = False) -> bool:
    from ragnarok.judge import cli as judge_cli
    from ragnarok.judge import entail, service, statements, textrules
    from ragnarok.judge.proxy import cosines
    from ragnarok.stages.embed.vectors import text_vectors

    cosines(["warm"], ["up"])  # MiniLM loaded before the clock
    textrules.stem("warm")  # and nltk (its import is start-up, like MiniLM's load)
    if not vectors_known:
        text_vectors("minilm").clear()  # nothing encoded yet
    for module in (entail, statements, textrules):  # and no rule memoised
        for value in vars(module).values():
            if hasattr(value, "cache_clear") and value is not textrules.vocabulary:
                value.cache_clear()
    with tempfile.TemporaryDirectory() as tmp:
        service.cache_path = lambda settings: Path(tmp) / "judgments.db"  # an empty judgment cache
        before = load()
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            judge_cli.eval_rag(
                runs=runs,
                nuggets=NUGGETS,
                support=False,
                support_mode="all",
                references=None,
                geval=False,
                run_name=None,
                judge="proxy",
                index=None,
                test_metric="all",
                resamples=1000,
                assignments=None,
                concurrency=4,
                retry_failed=False,
            )
        seconds = time.perf_counter() - start
        judge = judge_cli._judging[0][0]
    print(out.getvalue().rstrip())
    judged = judge.stats.judged
    rate = judged / seconds
    print(
        f"(a) eval-rag, {len(runs)} runs, PROXY judge, warm: {seconds:.2f} s, {judged} nugget judgments "
        f"({judge.stats.cached} from the cache), {rate:.0f} judgments/s; load {before} -> {load()}"
    )
    print(
        f"    < {EVAL_GOAL_S:.0f} s: {verdict(seconds < EVAL_GOAL_S)}; >= {JUDGMENTS_GOAL:.0f} judgments/s: "
        f"{verdict(rate >= JUDGMENTS_GOAL)}",
        flush=True,
    )
    return seconds < EVAL_GOAL_S and rate >= JUDGMENTS_GOAL


def bench_run(workdir: Path, topics: Path, compare: Path | None) -> bool:
    out = workdir / "rag24-bm25-extractive.jsonl"
    out.unlink(missing_ok=True)
    n = sum(1 for line in topics.read_text(encoding="utf-8").splitlines() if line.strip())
    before = load()
    start = time.perf_counter()
    subprocess.run(
        [
            *RAGNAROK,
            "run",
            "--topics",
            str(topics),
            "--pipeline",
            "bm25@100 | extractive",
            "--run-id",
            "bench-speed",
            "--output",
            str(out),
            "--no-progress",
        ],
        check=True,
    )
    seconds = time.perf_counter() - start
    print(
        f"(b) ragnarok run, {n} topics, 'bm25@100 | extractive': {seconds:.1f} s wall, {n / seconds:.1f} "
        f"topics/s; load {before} -> {load()}  ({out})"
    )
    if compare is not None:
        same = compare.read_bytes() == out.read_bytes()
        print(f"    same bytes as {compare}: {same}")
    ok = seconds <= RUN_GOAL_S
    print(f"    <= {RUN_GOAL_S:.0f} s: {verdict(ok)}", flush=True)
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", type=Path, help="answer files for (a) (default: made in --workdir)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench-speed")
    ap.add_argument("--topics", type=Path, default=RAG24, help="topics for (b)")
    ap.add_argument("--compare-run", type=Path, help="(b)'s output must have these bytes")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--skip-run", action="store_true")
    ap.add_argument(
        "--vectors-known",
        action="store_true",
        help="(a) twice, the second time with the texts' vectors kept from the first (a service that "
        "judged these nuggets before), the judgment cache still empty",
    )
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"data dir {os.environ.get('RAGNAROK_DATA_DIR', '(default)')}, {os.cpu_count()} CPUs, load {load()}")
    met = []
    if not args.skip_eval:
        runs = args.runs or make_runs(args.workdir)
        met.append(bench_eval(runs))
        if args.vectors_known:
            met.append(bench_eval(runs, vectors_known=True))
    if not args.skip_run:
        met.append(bench_run(args.workdir, args.topics, args.compare_run))
    print("all goals met" if all(met) else "some goal NOT met")


if __name__ == "__main__":
    main()
