"""R service throughput and memory against pyserini's own batch search, in one run.

    python bench/bench_throughput.py [--index DIR] [--topics demo] [--k 100] [--seconds 10] [--clients 1,8,32]
                                     [--rag 20] [--rag-pipeline offline --rag-pipeline 'bm25@20 | smollm2']

* ``batch_search``: pyserini's ``LuceneSearcher.batch_search(queries, k, threads=2)`` in this process, over the
  topics repeated for ``--seconds`` after a 5 s warm-up, before the server starts and again after it stops
  (their mean is the reference): queries/s;
* start-up work: a first server, sent nothing, from ``/healthz`` until it is idle (under 2 % of a core over
  2 s, at most ``--startup-wait`` s): the seconds and the CPU seconds it spent, then its idle CPU over 10 s
  (share of one core) and its RSS; it is stopped;
* a cold row: a second server, 8 clients from the moment its ``/healthz`` answers (no warm-up, while its
  start-up work runs), for ``--seconds``; then, once it is idle, the warm rows below;
* ``POST /v1/retrieve`` with 1, 8 and 32 keep-alive clients (threads of this process, ``http.client``), each
  sending the topics in turn for ``--seconds`` after a 5 s warm-up: queries/s, p50/p99 latency, the server's
  CPU and this client's (cores busy: the two share the machine's cores);
* the server's RSS at idle (after a warm-up) and its peak under the 32-client load (sampled every 50 ms);
* oversized requests (k = max_k, a body over max_body_bytes, a query over max_query_chars): their statuses
  and the RSS after them;
* ``/rag`` p50/p95 and the server's peak RSS over ``--rag`` topics, one topic at a time, for each
  ``--rag-pipeline`` (default: none given, the pipeline the service picks: ``offline`` when the index has its
  dense MiniLM index, else its fallback; each is named in the output).

The server is ``ragnarok serve --no-dense`` (one uvicorn worker) in its own process. Report the load average
printed with the figures: on a shared machine only the ratios of one run compare.
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
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core import java  # noqa: E402
from ragnarok.core.java import import_pyserini_search  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def until_idle(pid: int, most_s: float) -> tuple[float, float]:
    """Wait until the process uses under 2 % of a core over 2 s (at most ``most_s``): the seconds waited
    and the CPU seconds it used, both up to the start of that quiet window."""
    start, c0, samples = time.monotonic(), cpu_s(pid), []
    while time.monotonic() - start < most_s:
        samples.append((time.monotonic(), cpu_s(pid)))
        old = [x for x in samples if x[0] <= samples[-1][0] - 2.0]
        if old and (samples[-1][1] - old[-1][1]) / (samples[-1][0] - old[-1][0]) < 0.02:
            return old[-1][0] - start, old[-1][1] - c0
        time.sleep(0.25)
    return time.monotonic() - start, cpu_s(pid) - c0


def start_server(env: dict, port: int) -> tuple[subprocess.Popen, float]:
    """``ragnarok serve --no-dense`` on ``port``; returns it once ``/healthz`` answers, and the seconds that
    took."""
    t = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(6000):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return server, time.monotonic() - t
        except httpx.HTTPError:
            time.sleep(0.05)
    server.terminate()
    raise RuntimeError("the server never answered /healthz")


def load_with(port: int, send, queries: list[str], clients: int, seconds: float) -> list[float]:
    """Latencies (ms) of ``clients`` keep-alive clients sending queries for ``seconds``; ``send(conn, query)``
    sends one and returns ``(status, body)``."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def client(offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine, n = [], offset
        while time.monotonic() < stop:
            t = time.perf_counter()
            status, payload = send(conn, queries[n % len(queries)])
            mine.append((time.perf_counter() - t) * 1000)
            assert status == 200, payload[:200]
            n += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(i * 7,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies


def retrieve_sender(k: int, index: str | None = None):
    """``POST /v1/retrieve`` of one query, for :func:`load_with`."""

    def send(conn: http.client.HTTPConnection, query: str) -> tuple[int, bytes]:
        body = {"query": query, "k": k, **({"index": index} if index else {})}
        conn.request("POST", "/v1/retrieve", json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()

    return send


def load(port: int, queries: list[str], k: int, clients: int, seconds: float) -> list[float]:
    """Latencies (ms) of ``clients`` keep-alive clients sending ``POST /v1/retrieve`` for ``seconds``."""
    return load_with(port, retrieve_sender(k), queries, clients, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--startup-wait", type=float, default=120.0, help="the most seconds to wait for idle")
    ap.add_argument("--rag", type=int, default=20, help="topics sent to /rag (0: skip)")
    ap.add_argument(
        "--rag-pipeline",
        action="append",
        default=[],
        help="a /rag pipeline to time (repeatable; default: the service's own choice)",
    )
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-tp-"))
    settings = Settings(data_dir=data_dir)
    index = args.index or ensure_demo_index(settings)
    queries = [t.text for t in load_topics(args.topics, ROOT / "topics")]
    print(f"index={index} queries={len(queries)} k={args.k} cpus={os.cpu_count()} loadavg at start {loadavg()}")

    java.memory_options = lambda heap: []  # the reference runs as pyserini's users run it: the JVM's own defaults
    searcher = import_pyserini_search().LuceneSearcher(str(index))
    searcher.set_bm25(0.9, 0.4)

    def batch_search(seconds: float) -> float:
        """pyserini's batch_search(threads=2) in this process: queries/s over ``seconds``."""
        done, t = 0, time.perf_counter()
        while time.perf_counter() - t < seconds:
            batch = queries * 4
            searcher.batch_search(batch, [str(i) for i in range(len(batch))], args.k, 2)
            done += len(batch)
        return done / (time.perf_counter() - t)

    batch_search(5.0)  # warm-up: the JVM compiles the search path during the first thousand queries
    before = batch_search(args.seconds)
    print(f"pyserini batch_search(threads=2): {before:.0f} q/s  (loadavg {loadavg()})", flush=True)

    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data_dir),
        "RAGNAROK_INDEXES": json.dumps({"bench": str(index)}),
        "RAGNAROK_DEFAULT_INDEX": "bench",
    }
    port = free_port()  # 1. start-up work, with no request held
    server, up_s = start_server(env, port)
    try:
        at_healthz = cpu_s(server.pid)
        startup_s, startup_cpu = until_idle(server.pid, args.startup_wait)
        c0, t0 = cpu_s(server.pid), time.monotonic()
        time.sleep(10)
        idle_cpu = (cpu_s(server.pid) - c0) / (time.monotonic() - t0)
        startup_rss = rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(
        f"start-up: /healthz after {up_s:.1f} s ({at_healthz:.1f} CPU s); then {startup_cpu:.1f} CPU s of start-up "
        f"work over {startup_s:.1f} s until idle; idle CPU {idle_cpu:.1%} of a core; RSS {startup_rss:.0f} MB "
        f"(loadavg {loadavg()})",
        flush=True,
    )

    port = free_port()  # 2. the cold row from /healthz, then the warm rows once idle
    server, _ = start_server(env, port)
    rows = []
    try:
        base = f"http://127.0.0.1:{port}"
        c0, t0 = cpu_s(server.pid), time.perf_counter()
        latencies = load(port, queries, args.k, 8, args.seconds)
        wall = time.perf_counter() - t0
        cold = (len(latencies) / wall, pct(latencies, 50), pct(latencies, 99), (cpu_s(server.pid) - c0) / wall)
        print(
            f"cold, 8 clients from /healthz: {cold[0]:.0f} q/s ({cold[0] / before:.2f}x batch_search), p50 "
            f"{cold[1]:.1f} ms, p99 {cold[2]:.1f} ms, server {cold[3]:.2f} cores busy (loadavg {loadavg()})",
            flush=True,
        )
        until_idle(server.pid, args.startup_wait)
        load(port, queries, args.k, 8, 5.0)  # warm-up: JVM compilation, the segment cache (as batch_search's)
        idle = rss_mb(server.pid)
        for clients in (int(c) for c in args.clients.split(",")):
            peak, stop = [idle], threading.Event()

            def sample(peak: list[float] = peak, stop: threading.Event = stop) -> None:
                while not stop.wait(0.05):
                    peak.append(rss_mb(server.pid))

            sampler = threading.Thread(target=sample)
            sampler.start()
            c0, t0, mine = cpu_s(server.pid), time.perf_counter(), time.process_time()
            latencies = load(port, queries, args.k, clients, args.seconds)
            wall = time.perf_counter() - t0
            busy, client_busy = (cpu_s(server.pid) - c0) / wall, (time.process_time() - mine) / wall
            stop.set()
            sampler.join()
            rows.append(
                (clients, len(latencies) / wall, pct(latencies, 50), pct(latencies, 99), busy, client_busy, max(peak))
            )
            print(
                f"{clients:>3} clients: {rows[-1][1]:.0f} q/s ({rows[-1][1] / before:.2f}x batch_search), "
                f"p50 {rows[-1][2]:.1f} ms, p99 {rows[-1][3]:.1f} ms (p99/p50 {rows[-1][3] / rows[-1][2]:.1f}), "
                f"server {busy:.2f} cores busy, client {client_busy:.2f}, peak RSS {max(peak):.0f} MB  "
                f"(loadavg {loadavg()})",
                flush=True,
            )

        statuses = []
        with httpx.Client(base_url=base, timeout=120) as client:
            for _ in range(3):
                statuses.append(
                    client.post("/v1/retrieve", json={"query": queries[0], "k": settings.max_k}).status_code
                )
            statuses.append(
                client.post(
                    "/v1/retrieve",
                    content=b'{"query": "' + b"a" * settings.max_body_bytes + b'"}',
                    headers={"content-type": "application/json"},
                ).status_code
            )
            statuses.append(client.post("/v1/retrieve", json={"query": "a " * settings.max_query_chars}).status_code)
            after = rss_mb(server.pid)
            rag = {}
            for spec in (args.rag_pipeline or [None]) if args.rag else []:
                times, peak = [], rss_mb(server.pid)
                for q in queries[: args.rag]:
                    t = time.perf_counter()
                    r = client.post("/rag", json={"topic": q, "index": "bench"} | ({"pipeline": spec} if spec else {}))
                    times.append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200, r.text[:300]
                    peak = max(peak, rss_mb(server.pid))
                rag[spec or r.headers.get("ragnarok-pipeline", "?")] = (times, peak)
                print(f"/rag {list(rag)[-1]}: p50 {pct(times, 50):.0f} ms (loadavg {loadavg()})", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)

    after_qps = batch_search(args.seconds)  # again, with the server stopped: the machine may have changed
    batch_qps = (before + after_qps) / 2
    print(f"pyserini batch_search(threads=2) after the server runs: {after_qps:.0f} q/s; mean {batch_qps:.0f} q/s")
    print(f"\nRSS: idle {idle:.0f} MB; after oversized requests (statuses {statuses}) {after:.0f} MB")
    for spec, (times, peak) in rag.items():
        print(
            f"/rag {spec}: p50 {pct(times, 50):.0f} ms, p95 {pct(times, 95):.0f} ms over {len(times)} topics, "
            f"server RSS after {peak:.0f} MB at the most"
        )
    print(
        f"\nstart-up work after /healthz (no request held): {startup_cpu:.1f} CPU s over {startup_s:.1f} s; "
        f"idle CPU {idle_cpu:.1%} of a core"
    )
    print(
        f"\n| clients | q/s | x batch_search(threads=2) ({batch_qps:.0f} q/s) | p50 ms | p99 ms | p99/p50 "
        "| server cores busy | client cores busy | peak RSS MB |\n|---|---|---|---|---|---|---|---|---|"
    )
    print(
        f"| 8, cold (from /healthz) | {cold[0]:.0f} | {cold[0] / batch_qps:.2f} | {cold[1]:.1f} | {cold[2]:.1f} "
        f"| {cold[2] / cold[1]:.1f} | {cold[3]:.2f} | | |"
    )
    for clients, qps, p50, p99, busy, client_busy, peak in rows:
        print(
            f"| {clients}, warm | {qps:.0f} | {qps / batch_qps:.2f} | {p50:.1f} | {p99:.1f} | {p99 / p50:.1f} | {busy:.2f} "
            f"| {client_busy:.2f} | {peak:.0f} |"
        )
    print(f"loadavg at end {loadavg()}")


if __name__ == "__main__":
    main()
