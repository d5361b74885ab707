"""What metrics, request ids and access lines cost ``POST /v1/retrieve`` at 8 clients, in one run.

    python bench/bench_observability.py [--index DIR] [--clients 8] [--seconds 10] [--rounds 6]

Three ``ragnarok serve --no-dense`` processes on the same index, started together and warmed up alike:

* ``off``: ``RAGNAROK_METRICS=0 RAGNAROK_REQUEST_IDS=0 RAGNAROK_LOG_LEVEL=warning`` (none of it);
* ``metrics+ids``: as shipped: metrics and request ids on, no access lines (``RAGNAROK_LOG_LEVEL=warning``);
* ``+access lines``: ``RAGNAROK_LOG_LEVEL=info`` too: one access line per request (written to a file).

The 8-client load (bench_throughput.py's keep-alive ``http.client`` clients, k = 100) goes to one server at a
time: ``--warmup`` seconds each first, then ``--rounds`` rounds of ``--seconds`` each, the order rotated every
round, so that the machine's drift falls on every variant alike; per variant, the median of its rounds' q/s
and the median of its per-round ratio to ``off`` (the rounds' neighbours in time). Before that, the CPU the
middlewares add per request is measured in process (``GET /healthz`` through the ASGI stack, 20,000 calls
each, no network): the part of the overhead that does not depend on the load's noise.
"""

from __future__ import annotations

import argparse
import asyncio
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
sys.path.insert(0, str(ROOT / "bench"))

from bench_throughput import cpu_s, load, loadavg  # noqa: E402
from servers import free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402

VARIANTS = {
    "off": {"RAGNAROK_METRICS": "0", "RAGNAROK_REQUEST_IDS": "0", "RAGNAROK_LOG_LEVEL": "warning"},
    "metrics+ids": {"RAGNAROK_METRICS": "1", "RAGNAROK_REQUEST_IDS": "1", "RAGNAROK_LOG_LEVEL": "warning"},
    "+access lines": {"RAGNAROK_METRICS": "1", "RAGNAROK_REQUEST_IDS": "1", "RAGNAROK_LOG_LEVEL": "info"},
}


def in_process_us(data_dir: Path, calls: int = 20_000) -> dict[str, float]:
    """Microseconds of CPU per ``GET /healthz`` through the whole ASGI stack, per variant (in this process;
    access lines go to a file)."""
    import logging  # noqa: PLC0415

    from api.main import create_app  # noqa: PLC0415
    from ragnarok.runtime import logs  # noqa: PLC0415

    out: dict[str, float] = {}
    sink = open(tempfile.mktemp(prefix="bench-obs-log-"), "w")  # noqa: SIM115
    for name, env in VARIANTS.items():
        settings = Settings(
            data_dir=data_dir, metrics=env["RAGNAROK_METRICS"] == "1", request_ids=env["RAGNAROK_REQUEST_IDS"] == "1"
        )
        handler = logs.configure("text", env["RAGNAROK_LOG_LEVEL"], sink)
        app = create_app(settings, arena=False)

        async def run(app=app) -> float:
            scope = {
                "type": "http",
                "method": "GET",
                "path": "/healthz",
                "raw_path": b"/healthz",
                "headers": [],
                "query_string": b"",
                "http_version": "1.1",
                "scheme": "http",
                "root_path": "",
                "client": ("127.0.0.1", 5),
                "server": ("127.0.0.1", 8000),
            }

            async def receive() -> dict:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict) -> None:
                pass

            for _ in range(500):  # warm-up
                await app(dict(scope), receive, send)
            start = time.process_time()
            for _ in range(calls):
                await app(dict(scope), receive, send)
            return (time.process_time() - start) / calls * 1e6

        out[name] = min(asyncio.run(run()) for _ in range(3))
        logs.unconfigure(handler)
    logging.getLogger().setLevel(logging.WARNING)
    sink.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=float, default=15.0, help="seconds of load per server before timing")
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-obs-"))
    index = args.index or ensure_demo_index(Settings(data_dir=data_dir))
    queries = [t.text for t in load_topics(args.topics, ROOT / "topics")]
    print(
        f"index={index} queries={len(queries)} k={args.k} clients={args.clients} cpus={os.cpu_count()} "
        f"loadavg at start {loadavg()}",
        flush=True,
    )

    micro = in_process_us(data_dir)
    print(
        "in process, CPU per GET /healthz through the ASGI stack: "
        + ", ".join(f"{name} {us:.1f} us" for name, us in micro.items()),
        flush=True,
    )

    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    logs_dir = Path(tempfile.mkdtemp(prefix="bench-obs-logs-"))
    try:
        for name, extra in VARIANTS.items():
            port = free_port()
            env = {
                **os.environ,
                "RAGNAROK_DATA_DIR": str(data_dir),
                **extra,
                "RAGNAROK_INDEXES": json.dumps({"bench": str(index)}),
                "RAGNAROK_DEFAULT_INDEX": "bench",
            }
            log = open(logs_dir / f"{name}.log", "wb")  # noqa: SIM115 - the server's, closed with it
            servers[name] = (
                subprocess.Popen(
                    [sys.executable, "-m", "ragnarok.cli", "serve", "--no-dense", "--port", str(port)],
                    env=env,
                    stdout=log,
                    stderr=log,
                ),
                port,
            )
        for name, (server, port) in servers.items():
            for _ in range(1200):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
        for name, (server, port) in servers.items():  # warm-up: JVM compilation, the segment cache
            load(port, queries, args.k, args.clients, args.warmup)
        names = list(VARIANTS)
        qps: dict[str, list[float]] = {name: [] for name in names}
        busy: dict[str, list[float]] = {name: [] for name in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                server, port = servers[name]
                c0, t0 = cpu_s(server.pid), time.perf_counter()
                latencies = load(port, queries, args.k, args.clients, args.seconds)
                wall = time.perf_counter() - t0
                qps[name].append(len(latencies) / wall)
                busy[name].append((cpu_s(server.pid) - c0) / len(latencies) * 1000)
            print(
                f"round {r + 1}: " + ", ".join(f"{n} {qps[n][-1]:.0f} q/s" for n in names) + f"  (loadavg {loadavg()})",
                flush=True,
            )
    finally:
        for server, _ in servers.values():
            server.terminate()
        for server, _ in servers.values():
            server.wait(timeout=60)
    access_lines = sum(1 for _ in open(logs_dir / "+access lines.log", "rb"))
    print(f"\nthe +access lines server wrote {access_lines:,} log lines (one access line per request)")
    print(
        f"\n| variant | median q/s ({args.rounds} rounds x {args.seconds:g} s, {args.clients} clients) "
        "| q/s vs off, median of the rounds' ratios | server CPU ms per request (median) "
        "| CPU per request in process |\n|---|---|---|---|---|"
    )
    for name in names:
        ratio = statistics.median(q / off for q, off in zip(qps[name], qps["off"]))
        print(
            f"| {name} | {statistics.median(qps[name]):.0f} (min {min(qps[name]):.0f}, max {max(qps[name]):.0f}) "
            f"| {(ratio - 1) * 100:+.1f} % | {statistics.median(busy[name]):.2f} | {micro[name]:.1f} us |"
        )
    print(f"loadavg at end {loadavg()}")


if __name__ == "__main__":
    main()
