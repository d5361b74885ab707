"""Segmentation throughput (MB/s of input) and peak memory of `ragnarok collection segment`.

    python bench/bench_segment.py                    # 100k docs: 1 and 2 workers; memory at 100k and 1M docs
    python bench/bench_segment.py --sizes 100000 --no-large

Synthetic 1-2 KB documents (see bench_dedup.generate). Each run is the real CLI in a fresh child process;
peak memory is its largest resident set (getrusage of children). The parallel output is checked byte for
byte against the sequential one.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dedup import generate, measured, ragnarok  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None, help="keep (and reuse) the generated files here")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-segment-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    for n in args.sizes:
        docs = work / f"docs-{n}.jsonl"
        if not docs.exists():
            generate(docs, n)
        mb = docs.stat().st_size / 1e6
        outs = {}
        for workers in (1, 2):
            outs[workers] = work / f"segments-{n}-{workers}.jsonl"
            m = measured(
                ragnarok(
                    "collection", "segment", str(docs), str(outs[workers]), "--workers", str(workers), "--no-progress"
                )
            )
            s, rss, _ = m
            print(
                f"{n:>9,} docs ({mb:,.0f} MB)  workers={workers}  {s:6.1f} s  {mb / s:6.1f} MB/s  "
                f"{n / s:8,.0f} docs/s  CPU {m.cpu:6.1f} s ({mb / m.cpu:5.1f} MB per CPU-s)  "
                f"peak RSS {rss:5,.0f} MiB (tree {m.rss_sum:5,.0f} MiB)  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        same = filecmp.cmp(outs[1], outs[2], shallow=False)
        print(f"# parallel output identical to sequential: {same}")
        for p in outs.values():
            p.unlink()
    if not args.no_large:
        docs = work / f"docs-{args.large}.jsonl"
        if not docs.exists():
            generate(docs, args.large)
        mb = docs.stat().st_size / 1e6
        m = measured(
            ragnarok(
                "collection", "segment", str(docs), str(work / "segments.jsonl"), "--workers", "2", "--no-progress"
            )
        )
        s, rss, _ = m
        (work / "segments.jsonl").unlink()
        print(
            f"{args.large:>9,} docs ({mb:,.0f} MB)  workers=2  {s:6.1f} s  {mb / s:6.1f} MB/s  "
            f"{args.large / s:8,.0f} docs/s  CPU {m.cpu:6.1f} s ({mb / m.cpu:5.1f} MB per CPU-s)  "
            f"peak RSS {rss:5,.0f} MiB (tree {m.rss_sum:5,.0f} MiB)  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"# bench took {time.perf_counter() - t:.0f} s")
