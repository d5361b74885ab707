"""Where a ``/rag`` answer's time goes, for topics sent the first time and again.

    RAGNAROK_DATA_DIR=DIR python bench/bench_rag_stages.py [--index DIR/indexes/demo] [--pipeline offline]
                                                            [--topics demo] [--k 100]

The index needs its dense MiniLM index beside it for the ``offline`` pipeline (``make serve`` builds both).

1. In this process, Anserini's searcher on the index (``ragnarok.stages.retrieve.anserini``): the p50 of one BM25
   search and of one BM25+Rocchio search at ``--k``, over the topics three times after a warm-up over them. This is what
   the expansion costs in Lucene alone, at several feedback sizes.
2. A fresh ``ragnarok serve --no-dense`` (one worker), one warm-up answer on a topic not among them, then each
   topic once, and then again:
   - ``/v1/retrieve`` with bm25;
   - ``/rag`` with ``trace``: its p50 and each stage's p50, both as the gateway saw it and as the services' own
     time;
   - ``/v1/retrieve`` with bm25+rocchio.

   "Again" reads what the first pass cached: the query's MiniLM vector, and the segments read from Lucene.

Report the load average printed with the figures: only the ratios of one run compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_throughput import loadavg, start_server  # noqa: E402
from servers import free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: E402

FEEDBACK = [(10, 10), (1, 10), (10, 30)]  # (documents, terms); (10, 10) is the default


def p50(values: list[float]) -> float:
    return statistics.median(values)


def in_process(index: Path, queries: list[str], k: int) -> None:
    searcher = LuceneSearcher(index)

    def timed(label: str) -> None:
        for q in queries:  # a warm-up: the JVM compiles this setting's path
            searcher.search(q, k)
        times = []
        for _ in range(3):
            for q in queries:
                t = time.perf_counter()
                searcher.search(q, k)
                times.append((time.perf_counter() - t) * 1000)
        print(f"in process, {label}: p50 {p50(times):.2f} ms", flush=True)

    searcher.set_bm25(0.9, 0.4)
    timed("bm25")
    for docs, terms in FEEDBACK:
        searcher.set_rocchio(terms, docs)
        timed(f"bm25+rocchio ({docs} feedback documents, {terms} terms)")
    searcher.object.unset_rocchio()
    timed("bm25 again")
    searcher.close()


def over_http(base: str, queries: list[str], k: int, pipeline: str) -> None:
    with httpx.Client(base_url=base, timeout=120) as client:

        def retrieve(label: str, retriever: str) -> None:
            times = []
            for q in queries:
                t = time.perf_counter()
                r = client.post("/v1/retrieve", json={"query": q, "k": k, "retriever": retriever})
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text[:300]
            print(f"/v1/retrieve {retriever}, {label}: p50 {p50(times):.1f} ms", flush=True)

        def rag(label: str) -> None:
            times, stages = [], {}
            for q in queries:
                t = time.perf_counter()
                r = client.post("/rag", json={"topic": q, "pipeline": pipeline, "trace": True})
                times.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text[:300]
                for s in r.json()["trace"]:
                    stages.setdefault(s["stage"], []).append((s["latency_ms"], s.get("service_ms") or 0.0))
            parts = "; ".join(
                f"{stage} {p50([a for a, _ in v]):.1f} ms (services {p50([b for _, b in v]):.1f})"
                for stage, v in stages.items()
            )
            print(f"/rag {pipeline}, {label}: p50 {p50(times):.1f} ms; stages: {parts}", flush=True)

        warm = client.post("/rag", json={"topic": "a warm-up topic about nothing in particular", "pipeline": pipeline})
        assert warm.status_code == 200, warm.text[:300]
        for label in ("first time", "again"):
            retrieve(label, "bm25")
        for label in ("first time", "again"):
            rag(label)
        for label in ("first time", "again"):
            retrieve(label, "bm25+rocchio")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--pipeline", default="offline")
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--k", type=int, default=100)
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-rag-"))
    index = args.index or ensure_demo_index(Settings(data_dir=data_dir))
    queries = [t.text for t in load_topics(args.topics, ROOT / "topics")]
    print(f"index={index} queries={len(queries)} k={args.k} pipeline={args.pipeline!r} loadavg {loadavg()}")
    in_process(index, queries, args.k)

    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data_dir),
        "RAGNAROK_INDEXES": json.dumps({"bench": str(index)}),
        "RAGNAROK_DEFAULT_INDEX": "bench",
    }
    port = free_port()
    server, _ = start_server(env, port)
    try:
        over_http(f"http://127.0.0.1:{port}", queries, args.k, args.pipeline)
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(f"loadavg at end {loadavg()}")


if __name__ == "__main__":
    main()
