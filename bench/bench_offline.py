"""``POST /rag`` with the ``offline`` pipeline over the 50 demo topics: latency, each stage's share, the answers
themselves (to compare before/after a change byte for byte) and the server's memory.

    RAGNAROK_DATA_DIR=/tmp/bench-data python bench/bench_offline.py [--rounds 2] [--pipeline offline]
        [--save answers.json | --compare answers.json] [--retrieve]

``ragnarok serve`` runs in its own process on ``RAGNAROK_DATA_DIR`` (the demo index and its dense index are built
there first when missing: minutes); this process posts each topic with ``trace: true`` over one keep-alive
connection, once the server's start-up work is over (the arena's warm-up) and after 5 warm-up topics. Printed: end-to-end p50/p95 (this client's clock), each stage's own
``service_ms`` p50/p95, the server's RSS after the run (``/proc/PID/status`` VmRSS), and with ``--compare`` how
many answers differ from a saved run. Goal: p50 <= 100 ms, p95 <= 200 ms.

With ``--retrieve``, each ``/rag`` goes with ``POST /v1/retrieve`` of the same topic on the same connection (the
default retriever, BM25, k 100), each asked first for half the topics (what is asked second finds the segments
the first read in the server's caches), and the ratio of the two p50s is printed (goal: <= 3x), with where the
``/rag`` time goes: each stage as the gateway saw it and as its service did, the rest (the gateway's own work
and its hops), and ``/v1/retrieve`` with each of the offline pipeline's retrievers alone.
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


#: What ``--retrieve`` asks ``/v1/retrieve`` after each ``/rag``: the default (BM25, k 100), then the offline
#: pipeline's two retrievers alone, at its depth.
RETRIEVERS = ("bm25", "bm25+rocchio", "dense:minilm")


def retrieve(conn: http.client.HTTPConnection, topic: str, retriever: str = "bm25") -> float:
    start = time.perf_counter()
    body = json.dumps({"query": topic, "retriever": retriever, "k": 100})
    conn.request("POST", "/v1/retrieve", body, {"content-type": "application/json"})
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"/v1/retrieve answered {response.status}: {body[:300]!r}")
    return (time.perf_counter() - start) * 1000


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
    ap.add_argument("--retrieve", action="store_true", help="interleave POST /v1/retrieve of each topic")
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
            if args.retrieve:
                retrieve(conn, topic)
        runs, retrieved, first = [], {r: [] for r in RETRIEVERS}, []
        for n in range(args.rounds):
            run = []
            for i, topic in enumerate(topics):
                rag_first = not args.retrieve or (i + n) % 2 == 0  # each asked first half the time
                if rag_first:
                    run.append(ask(conn, args.pipeline, topic))
                if args.retrieve:
                    for retriever, times in retrieved.items():
                        times.append(retrieve(conn, topic, retriever))
                if not rag_first:
                    run.append(ask(conn, args.pipeline, topic))
                first.append(rag_first)
            runs.append(run)
        memory = rss_mb(started[0].pid)

    samples = [s for run in runs for s in run]
    e2e = [elapsed for elapsed, _ in samples]
    print(f"{args.pipeline}: {len(topics)} topics x {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print(
        f"  end-to-end ms   p50 {pct(e2e, 50):7.1f}  p95 {pct(e2e, 95):7.1f}  "
        f"(goal p50 <= 100, p95 <= 200: {'met' if pct(e2e, 50) <= 100 and pct(e2e, 95) <= 200 else 'NOT met'})"
    )
    stages = [t["stage"] for t in samples[0][1]["trace"]]
    for stage in stages:
        own = [next(t["service_ms"] for t in data["trace"] if t["stage"] == stage) for _, data in samples]
        seen = [next(t["latency_ms"] for t in data["trace"] if t["stage"] == stage) for _, data in samples]
        print(
            f"  {stage:<40} p50 {pct(own, 50):7.1f}  p95 {pct(own, 95):7.1f}  (as the gateway saw it: p50 "
            f"{pct(seen, 50):.1f})"
        )
    rest = [elapsed - sum(t["latency_ms"] for t in data["trace"]) for elapsed, data in samples]
    print(f"  outside the stages (the gateway's own work, its hop, this client) p50 {pct(rest, 50):.1f}")
    if args.retrieve:
        for retriever, times in retrieved.items():
            print(f"  /v1/retrieve {retriever:<14} ms p50 {pct(times, 50):7.1f}  p95 {pct(times, 95):7.1f}")
        ratio = pct(e2e, 50) / pct(retrieved["bm25"], 50)
        met = "met" if ratio <= 3 else "NOT met"
        print(f"  /rag p50 / /v1/retrieve (bm25) p50 = {ratio:.2f}x (goal <= 3x: {met})")
        for label, flag in (("/rag asked first", True), ("/v1/retrieve asked first", False)):
            rag = [t for t, f in zip(e2e, first) if f is flag]
            bm25 = [t for t, f in zip(retrieved["bm25"], first) if f is flag]
            print(
                f"    {label:<26} /rag p50 {pct(rag, 50):6.1f}  bm25 p50 {pct(bm25, 50):6.1f}  = {pct(rag, 50) / pct(bm25, 50):.2f}x"
            )
        for n in range(args.rounds):
            rag, bm25 = (
                e2e[n * len(topics) : (n + 1) * len(topics)],
                retrieved["bm25"][n * len(topics) : (n + 1) * len(topics)],
            )
            print(
                f"    round {n + 1} (segments {'first seen' if n == 0 else 'seen before'}) = {pct(rag, 50) / pct(bm25, 50):.2f}x"
            )
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
