"""Dense query latency: query encoding + FAISS search, flat vs HNSW, on the demo index (a few thousand segments).

    python bench/bench_dense.py [--index LUCENE_DIR] [--topics demo] [--k 100] [--rounds 5] [--model minilm]

Builds (in a temporary directory unless RAGNAROK_DATA_DIR is set) the demo Lucene index, a flat dense index of
its segments and an HNSW index of the same vectors, then times, per query, after warm-up rounds, in this process:

* ``encode``: the query embedding alone (sentence-transformers, CPU);
* ``search flat`` / ``search hnsw``: FAISS search alone, on a pre-encoded query;
* ``encode + search flat`` / ``encode + search hnsw``: what a dense first stage costs per query;
* ``retrieve hnsw``: ``DenseRetriever.retrieve``, adding each hit's stored fields read from Lucene.

Queries come from ``topics/<topics>.tsv``; when that set does not exist, 40 synthetic queries are used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import faiss

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_retrieve import timed  # noqa: E402 - bench/ is on sys.path when run as a script

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from ragnarok.core.types import Query  # noqa: E402
from ragnarok.stages.retrieve.dense import HNSW_M, DenseRetriever, shared_encoder  # noqa: E402
from ragnarok.stages.retrieve.dense_build import build_dense_index, segments_from_lucene  # noqa: E402

SUBJECTS = [
    "files",
    "strings",
    "lists",
    "dictionaries",
    "threads",
    "sockets",
    "regular expressions",
    "dates",
    "JSON",
    "logging",
]
FORMS = [
    "how do I work with {} in Python",
    "what is the fastest way to sort {}",
    "examples of {} errors",
    "best practices for {}",
]


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def queries_for(topics: str) -> tuple[list[str], str]:
    try:
        return [t.text for t in load_topics(topics, ROOT / "topics")], f"topics/{topics}"
    except (FileNotFoundError, ValueError):
        return [form.format(s) for s in SUBJECTS for form in FORMS], "40 synthetic queries"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-dense-"))
    lucene = args.index or ensure_demo_index(Settings(data_dir=data_dir))
    queries, source = queries_for(args.topics)

    dense_root = Path(tempfile.mkdtemp(prefix="dense-", dir=data_dir))
    t = time.perf_counter()
    count = build_dense_index(segments_from_lucene(lucene), dense_root / "flat", args.model, "flat", lucene_dir=lucene)
    built = {"flat (encoding included)": time.perf_counter() - t}
    # the HNSW index holds the very same vectors: rebuilt from the flat index instead of re-encoding everything
    t = time.perf_counter()
    shutil.copytree(dense_root / "flat", dense_root / "hnsw")
    flat = faiss.read_index(str(dense_root / "flat" / "index.faiss"))
    hnsw = faiss.IndexHNSWFlat(flat.d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(flat.reconstruct_n(0, flat.ntotal))
    faiss.write_index(hnsw, str(dense_root / "hnsw" / "index.faiss"))
    meta = json.loads((dense_root / "flat" / "meta.json").read_text())
    (dense_root / "hnsw" / "meta.json").write_text(json.dumps({**meta, "kind": "hnsw"}))
    built["hnsw (graph only)"] = time.perf_counter() - t
    retrievers = {
        kind: DenseRetriever(f"dense:{args.model}", str(lucene), args.model, str(dense_root / kind))
        for kind in ("flat", "hnsw")
    }
    for retriever in retrievers.values():
        retriever.warm_up()

    encoder = shared_encoder(args.model)
    vectors = {q: encoder.encode([q], query=True) for q in queries}
    hnsw_params = faiss.SearchParametersHNSW(efSearch=max(retrievers["hnsw"].ef_search, args.k))
    indexes = {kind: r._index for kind, r in retrievers.items()}  # noqa: SLF001 - the bench looks inside

    overlap = []
    for q in queries:
        exact = {d for d, _ in retrievers["flat"].search(q, args.k)}
        approx = {d for d, _ in retrievers["hnsw"].search(q, args.k)}
        overlap.append(len(exact & approx) / max(1, len(exact)))

    paths: dict[str, Callable[[str], object]] = {
        "encode": lambda q: encoder.encode([q], query=True),
        "search flat": lambda q: indexes["flat"].search(vectors[q], args.k),
        "search hnsw": lambda q: indexes["hnsw"].search(vectors[q], args.k, params=hnsw_params),
        "encode + search flat": lambda q: retrievers["flat"].search(q, args.k),
        "encode + search hnsw": lambda q: retrievers["hnsw"].search(q, args.k),
        "retrieve hnsw (+ docs)": lambda q: retrievers["hnsw"].retrieve(Query(text=q), args.k),
    }
    results = timed(paths, queries, args.rounds, warmup=1)

    print(
        f"index={lucene} segments={count} model={args.model} queries={len(queries)} ({source}) "
        f"rounds={args.rounds} k={args.k} faiss_threads={faiss.omp_get_max_threads()} cpus={os.cpu_count()}"
    )
    print("build: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in built.items()))
    print(f"HNSW recall@{args.k} vs flat: {statistics.mean(overlap):.3f}")
    print(f"{'path':<24} {'p50 ms':>8} {'p95 ms':>8}")
    for name, values in results.items():
        print(f"{name:<24} {pct(values, 50):8.2f} {pct(values, 95):8.2f}")


if __name__ == "__main__":
    main()
