"""``POST /rag`` with the ``offline`` pipeline over the 50 demo topics: latency, each stage's share, the answers
themselves (to compare before/after a change byte for byte) and the server's memory.

    RAGNAROK_DATA_DIR=/tmp/bench-data python bench/bench_offline.py [--rounds 2] [--pipeline offline]
        [--save answers.json | --compare answers.json]

``ragnarok serve`` runs in its own process on ``RAGNAROK_DATA_DIR`` (the demo index and its dense index are built
there first when missing: minutes); this process posts each topic with ``trace: true`` over one keep-alive
connection, once the server's start-up work is over (the arena's warm-up) and after 5 warm-up topics. Printed: end-to-end p50/p95 (this client's clock), each stage's own
``service_ms`` p50/p95, the server's RSS after the run (``/proc/PID/status`` VmRSS), and with ``--compare`` how
many answers differ from a saved run. Goal: p50 <= 100 ms, p95 <= 200 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import ragnarok_serve, wait_until_idle  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def ask(conn: http.client.HTTPConnection, pipeline: str, topic: str) -> tuple[float, dict]:
    body = json.dumps({"topic": topic, "pipeline": pipeline, "trace": True})
    start = time.perf_counter()
    conn.request("POST", "/rag", body, {"content-type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    elapsed = (time.perf_counter() - start) * 1000
    if response.status != 200:
        raise RuntimeError(f"/rag answered {response.status}: {data}")
    return elapsed, data


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", default="offline")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--save", type=Path, help="write the answers (first round) to this JSON file")
    ap.add_argument("--compare", type=Path, help="count the answers that differ from this saved JSON file")
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", ROOT / ".bench-data"))
    ensure_demo_index(Settings(data_dir=data_dir), dense_model="minilm")
    topics = [t.text for t in load_topics("demo", ROOT / "topics")]
    started: list = []
    with ragnarok_serve({**os.environ, "RAGNAROK_DATA_DIR": str(data_dir)}, dense=True, started=started) as base:
        port = int(base.rsplit(":", 1)[1])
        ask(http.client.HTTPConnection("127.0.0.1", port, timeout=120), args.pipeline, topics[0])  # loaded
        print(
            f"(waited {wait_until_idle(started[0].pid):.0f} s for the server's start-up work: the arena's "
            "warm-up answers once with each generator)"
        )
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for topic in topics[:5]:
            ask(conn, args.pipeline, topic)
        runs = [[ask(conn, args.pipeline, topic) for topic in topics] for _ in range(args.rounds)]
        memory = rss_mb(started[0].pid)

    samples = [s for run in runs for s in run]
    e2e = [elapsed for elapsed, _ in samples]
    print(f"{args.pipeline}: {len(topics)} topics x {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print(
        f"  end-to-end ms   p50 {pct(e2e, 50):7.1f}  p95 {pct(e2e, 95):7.1f}  "
        f"(goal p50 <= 100, p95 <= 200: {'met' if pct(e2e, 50) <= 100 and pct(e2e, 95) <= 200 else 'NOT met'})"
    )
    for stage in [t["stage"] for t in samples[0][1]["trace"]]:
        own = [next(t["service_ms"] for t in data["trace"] if t["stage"] == stage) for _, data in samples]
        print(f"  {stage:<40} p50 {pct(own, 50):7.1f}  p95 {pct(own, 95):7.1f}")
    print(f"  server RSS after the run: {memory:.0f} MB")
    answers = [data["answer"] for _, data in runs[0]]
    if args.save:
        args.save.write_text(json.dumps(answers, indent=1))
    if args.compare:
        old = json.loads(args.compare.read_text())
        differ = [i for i, (a, b) in enumerate(zip(old, answers)) if a != b]
        print(f"  answers differing from {args.compare}: {len(differ)} of {len(answers)} {differ[:10]}")


if __name__ == "__main__":
    main()
