"""R service latency vs in-process pyserini, on the same index and queries, in one run.

    python bench/bench_retrieve.py [--index DIR] [--topics demo] [--k 100] [--rounds 5]

The service runs in its own process (``ragnarok serve`` with uvicorn), queried over HTTP (keep-alive
``http.client``) by this process; its latency includes sending the query and parsing the JSON answer.
Baselines, in this process: pyserini's ``LuceneSearcher.search(q, k)`` alone, and the same plus reading
each hit's stored raw JSON (what any caller needs to get the text the service returns).
Goal: service p50 <= 1.2 x baseline p50 + 1 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.java import import_pyserini_search  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def timed(paths: dict, queries: list[str], rounds: int, warmup: int = 3) -> dict[str, list[float]]:
    """Latencies (ms) per path; rounds interleave the paths so that they share the machine's noise, after
    ``warmup`` untimed rounds (the JVM compiles the search path during the first few hundred queries)."""
    out: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(warmup + rounds):
        for name, fn in paths.items():
            for q in queries:
                t = time.perf_counter()
                fn(q)
                if round_ >= warmup:
                    out[name].append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-")))
    settings = Settings(data_dir=data_dir)
    index = args.index or ensure_demo_index(settings)
    queries = [t.text for t in load_topics(args.topics, ROOT / "topics")]

    port = free_port()
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data_dir),
        "RAGNAROK_INDEXES": json.dumps({"bench": str(index)}),
        "RAGNAROK_DEFAULT_INDEX": "bench",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        for _ in range(600):
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # keep-alive, a light client

        def service(q: str) -> None:
            try:
                conn.request(
                    "POST", "/v1/retrieve", json.dumps({"query": q, "k": args.k}), {"content-type": "application/json"}
                )
                response = conn.getresponse()
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                conn.close()  # uvicorn closed the idle keep-alive connection (5 s) while the baselines ran
                conn.request(
                    "POST", "/v1/retrieve", json.dumps({"query": q, "k": args.k}), {"content-type": "application/json"}
                )
                response = conn.getresponse()
            body = json.loads(response.read())
            assert response.status == 200 and body["candidates"]

        searcher = import_pyserini_search().LuceneSearcher(str(index))
        searcher.set_bm25(0.9, 0.4)

        def search_only(q: str) -> None:
            searcher.search(q, args.k)

        def search_raw(q: str) -> None:
            for hit in searcher.search(q, args.k):
                json.loads(hit.lucene_document.get("raw"))

        results = timed(
            {"pyserini search": search_only, "pyserini search + raw docs": search_raw, "POST /v1/retrieve": service},
            queries,
            args.rounds,
        )
    finally:
        server.terminate()
        server.wait(timeout=30)

    print(f"index={index} queries={len(queries)} rounds={args.rounds} k={args.k}")
    print(f"{'path':<28} {'p50 ms':>8} {'p95 ms':>8}")
    for name, values in results.items():
        print(f"{name:<28} {pct(values, 50):8.2f} {pct(values, 95):8.2f}")
    service_p50 = pct(results["POST /v1/retrieve"], 50)
    for base in ("pyserini search", "pyserini search + raw docs"):
        b50 = pct(results[base], 50)
        print(
            f"service p50 / {base} p50 = {service_p50 / b50:.2f}x; "
            f"goal <= 1.2x + 1 ms: {'met' if service_p50 <= 1.2 * b50 + 1 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
