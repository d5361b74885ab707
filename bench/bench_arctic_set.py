"""The Arctic set's shape at 100k vectors: 10 Lucene HNSW-int8 shards searched as one index against one unsharded
index over the same vectors, and both against exact search.

    python bench/bench_arctic_set.py [--size 100000] [--queries 100] [--ef 1000] [--workdir DIR]

Vectors: MiniLM vectors of the demo collection (real text; its dense index is built in the data directory if
missing) mixed into ``--size`` synthetic ones (bench/scale_measure.py: ``synthetic_vectors``), so that
neighbourhoods look like real embeddings'; queries: MiniLM query vectors of prose sentences of demo segments.
Built with Anserini's own ``IndexHnswDenseVectors -quantize.int8`` (M 16, efC 100), as the prebuilt shards are:
10 shards of contiguous rows and one index of all, then a float (unquantised) set too. Each is searched by
:class:`ragnarok.stages.retrieve.lucene_hnsw.LuceneHnsw` (the set: one MultiReader over the shards, their
segments searched on 2 Java threads, merged by raw score) at ``--ef`` per shard (Anserini's setting for the
Arctic shards) and at ``--ef`` / 10 per shard (the same breadth in all): recall@100 against exact inner-product
search over the float vectors, and against exact search over the same int8 codes (the unsharded int8 index
searched with efSearch = its size: what 8-bit codes allow), and the searcher's own p50 (in this process: no
HTTP) with 2 cores. Goals: recall >= 0.98, set p50 <= 1.5x one index's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_measure as sm  # noqa: E402
import v21_standins  # noqa: E402

from ragnarok.core.settings import get_settings  # noqa: E402
from ragnarok.stages.retrieve.lucene_hnsw import LuceneHnsw, write_lucene_hnsw  # noqa: E402


def timed(index: LuceneHnsw, queries: np.ndarray, ef: int, passes: int = 3) -> tuple[float, list[list[str]]]:
    for q in queries[:10]:
        index.search(q, 100, ef)
    times, found = [], []
    for n in range(passes):
        for q in queries:
            start = time.perf_counter()
            hits = index.search(q, 100, ef)
            times.append((time.perf_counter() - start) * 1000)
            if n == 0:
                found.append([d for d, _ in hits])
    return statistics.median(times), found


def recall(found: list[list[str]], exact: np.ndarray, docids: list[str]) -> float:
    return float(np.mean([len(set(f) & {docids[i] for i in row}) / len(row) for f, row in zip(found, exact)]))


def overlap(found: list[list[str]], reference: list[list[str]]) -> float:
    return float(np.mean([len(set(f) & set(r)) / len(r) for f, r in zip(found, reference)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--ef", type=int, default=1000)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-arctic-"))
    work.mkdir(parents=True, exist_ok=True)
    real, sentences = sm.demo_bases(get_settings().data_dir, args.queries)
    from ragnarok.stages.retrieve.dense import shared_encoder  # noqa: PLC0415

    queries = shared_encoder("minilm").encode(sentences, query=True)
    vectors_file = work / f"vectors-{args.size}.npy"
    vectors = (
        np.load(vectors_file, mmap_mode="r")
        if vectors_file.exists()
        else sm.synthetic_vectors(real, vectors_file, args.size, seed=0)
    )
    docids = [f"msmarco_v2.1_doc_{i % 59:02d}_{i}#0_0" for i in range(args.size)]
    exact = sm.exact_top(vectors, queries, 100)
    print(
        f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.size:,} vectors, {len(queries)} queries, "
        f"efSearch {args.ef}"
    )
    rows = {}
    for int8 in (True, False):
        tag = "int8" if int8 else "float"
        start = time.monotonic()
        shards = v21_standins.write_shards(work / f"set-{tag}", docids, vectors, int8=int8)
        one = work / f"one-{tag}"
        if not one.exists():
            write_lucene_hnsw(vectors, docids, one, int8=int8)
        built = time.monotonic() - start
        print(f"{tag}: built in {built:.0f} s", flush=True)
        whole = LuceneHnsw([one], args.ef)
        _, codes = timed(whole, queries, args.size, passes=1)  # exact over these codes: efSearch = all
        for label, dirs, ef in (
            ("10 shards", shards, args.ef),
            ("10 shards", shards, args.ef // 10),
            ("one index", [one], args.ef),
        ):
            index = whole if dirs == [one] else LuceneHnsw(dirs, ef)
            p50, found = timed(index, queries, ef)
            rows[(tag, label, ef)] = p50
            print(
                f"{tag:5} {label:9} efSearch {ef:4} per index  recall@100 {recall(found, exact, docids):.3f} "
                f"against exact, {overlap(found, codes):.3f} against exact over its codes  p50 {p50:6.2f} ms  "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            index.close()
    for tag in ("int8", "float"):
        for ef in (args.ef, args.ef // 10):
            print(
                f"{tag}: the set's p50 at efSearch {ef} per shard / one index's at {args.ef}: "
                f"{rows[(tag, '10 shards', ef)] / rows[(tag, 'one index', args.ef)]:.2f}x (goal <= 1.5x)"
            )


if __name__ == "__main__":
    main()
