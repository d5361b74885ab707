"""An experiment of 5 retrieval pipelines on CACM's 52 topics against the 5 ``ragnarok search`` runs alone.

    python bench/bench_experiment.py [--shared ../shared] [--rounds 2]

CACM (../shared/data/cacm) is indexed once with ``ragnarok index --collection HtmlCollection``. Then, each round:

- *search alone*: ``ragnarok search --pipeline P --k 1000`` for each of the 5 pipelines, then ``ragnarok eval`` of
  the 5 run files: what a researcher runs without ``compare``;
- *compare*: ``ragnarok compare P1 ... P5 --baseline 0 --correction holm`` (each pipeline run once, per-topic
  scores, paired tests), one process.

Both are timed as a client sees them (wall seconds of the commands, JVM start included). It prints the ratio
compare / search alone (goal <= 1.2) and the largest difference from ``ragnarok eval``'s means. Report the load average printed.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = [
    "bm25@1000",
    "bm25+rm3@1000",
    "bm25+rocchio@1000",
    "rrf(bm25, bm25+rm3)@1000",
    "rrf(bm25, bm25+rocchio, bm25+rm3)@1000",
]


def ragnarok(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"ragnarok {' '.join(args)} failed: {out.stderr[-2000:]}")
    return out.stdout


def timed(func) -> tuple[float, str]:
    started = time.perf_counter()
    out = func()
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    cacm = args.shared / "data" / "cacm"
    work = Path(tempfile.mkdtemp(prefix="bench-experiment-"))
    os.environ["RAGNAROK_DATA_DIR"] = str(work / "data")
    with tarfile.open(cacm / "cacm.tar.gz") as tar:
        tar.extractall(work / "html", filter="data")
    ragnarok("index", str(work / "html"), str(work / "index"), "--collection", "HtmlCollection")
    topics, qrels, index = str(cacm / "topics.cacm.txt"), str(cacm / "qrels.cacm.txt"), str(work / "index")

    def alone() -> str:
        for n, spec in enumerate(PIPELINES):
            ragnarok(
                "search",
                "--topics",
                topics,
                "--index",
                index,
                "--pipeline",
                spec,
                "--output",
                str(work / f"run{n}.txt"),
                "--run-id",
                f"run{n}",
            )
        return ragnarok("eval", qrels, *(str(work / f"run{n}.txt") for n in range(len(PIPELINES))))

    def together() -> str:
        return ragnarok(
            "compare",
            *PIPELINES,
            "--topics",
            topics,
            "--qrels",
            qrels,
            "--index",
            index,
            "--baseline",
            "0",
            "--correction",
            "holm",
            "--csv",
            str(work / "means.csv"),
        )

    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for round_ in range(1, args.rounds + 1):
        alone_s, table = timed(alone)
        compare_s, shown = timed(together)
        print(
            f"round {round_}: search alone x5 + eval {alone_s:.1f} s; compare {compare_s:.1f} s; "
            f"ratio {compare_s / alone_s:.2f} (goal <= 1.2); load {os.getloadavg()[0]:.1f}"
        )
    evaluated = [line.split()[1:] for line in table.splitlines()[1:]]
    compared = [row[1:5] for row in list(csv.reader((work / "means.csv").open()))[1:]]
    gap = max(abs(float(a) - float(b)) for row_a, row_b in zip(evaluated, compared) for a, b in zip(row_a, row_b))
    # a run file keeps 6 decimals of a score: fused scores that tie there are ranked by docid, in memory they are not
    print(f"largest difference from ragnarok eval's means of the run files: {gap:.5f}")
    print(shown)


if __name__ == "__main__":
    main()
