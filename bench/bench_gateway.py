"""``POST /rag`` gateway overhead: end-to-end latency minus the stages' own times, extractive generator.

    python bench/bench_gateway.py [--topics demo] [--rounds 3] [--pipeline 'bm25@20 | extractive' ...]

``ragnarok serve`` runs in its own process; this process posts each demo topic to ``/rag`` over HTTP
(keep-alive) with ``trace: true``. Every service stamps its responses with ``Server-Timing: app;dur=MS``
and the gateway copies each stage's figure into the trace as ``service_ms``, so for every request:

* end-to-end = what this client measured;
* stages     = the sum of the stages' ``service_ms`` (parallel retrievals inside a fusion: the slowest);
* overhead   = end-to-end - stages: parsing the spec, the in-process HTTP hops to R and AG with their
  JSON (de)serialisation, fusion, validation, and the client's own HTTP round trip to the gateway.

Goal: overhead p50 <= 5 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import ragnarok_serve  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402

PIPELINES = ["bm25@20 | extractive", "bm25@100 | extractive", "rrf(bm25, bm25+rm3)@100 | extractive"]


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def measure(conn: http.client.HTTPConnection, pipeline: str, topic: str) -> tuple[float, float, float]:
    """(end-to-end ms, sum of the stages' own ms, the gateway's own Server-Timing ms) for one request."""
    body = json.dumps({"topic": topic, "pipeline": pipeline, "trace": True})
    start = time.perf_counter()
    conn.request("POST", "/rag", body, {"content-type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    e2e = (time.perf_counter() - start) * 1000
    if response.status != 200:
        raise RuntimeError(f"/rag answered {response.status}: {data}")
    stages = sum(t["service_ms"] for t in data["trace"])
    gateway = float(response.getheader("server-timing").split("dur=")[1])
    return e2e, stages, gateway


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pipeline", action="append", help="pipelines to time (default: three bm25 pipelines)")
    args = ap.parse_args()
    pipelines = args.pipeline or PIPELINES

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-")))
    ensure_demo_index(Settings(data_dir=data_dir))
    topics = [t.text for t in load_topics(args.topics, ROOT / "topics")]
    with ragnarok_serve({**os.environ, "RAGNAROK_DATA_DIR": str(data_dir)}) as base:
        conn = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=120)
        rows = {}
        for pipeline in pipelines:
            for t in topics[:5]:  # warm-up: JVM compilation, first-use loads
                measure(conn, pipeline, t)
            samples = [measure(conn, pipeline, t) for _ in range(args.rounds) for t in topics]
            rows[pipeline] = samples

    print(f"topics={len(topics)} rounds={args.rounds} (ms; overhead = end-to-end - stages' own Server-Timing)")
    print(f"{'pipeline':<42} {'e2e p50':>8} {'stages p50':>10} {'overhead p50':>12} {'p95':>6} {'in-gateway p50':>14}")
    worst = 0.0
    for pipeline, samples in rows.items():
        e2e = [s[0] for s in samples]
        overhead = [s[0] - s[1] for s in samples]
        inside = [s[2] - s[1] for s in samples]
        worst = max(worst, pct(overhead, 50))
        print(
            f"{pipeline:<42} {pct(e2e, 50):8.2f} {pct([s[1] for s in samples], 50):10.2f} "
            f"{pct(overhead, 50):12.2f} {pct(overhead, 95):6.2f} {pct(inside, 50):14.2f}"
        )
    print(f"largest overhead p50 = {worst:.2f} ms; goal <= 5 ms: {'met' if worst <= 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
