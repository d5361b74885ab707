"""`deploy/cluster`: what nginx costs `POST /v1/retrieve`, how long a `kill -9` hurts, what an instance weighs.

    python bench/bench_cluster.py [--instances 3] [--requests 400] [--clients 8,32] [--data-dir DIR]

* `deploy/cluster up --instances N --no-dense` (auth off, loopback) on a fresh cluster directory under /tmp, the
  demo index in ``--data-dir`` (default RAGNAROK_DATA_DIR; built on first use);
* ``POST /v1/retrieve`` (BM25, k=10, the demo topics in turn) at each ``--clients`` (asyncio + httpx keep-alive
  clients), ``--requests`` after a warm-up, through the proxy and straight to one instance, alternated twice:
  p50/p99 of each, and PASS/FAIL of the goal p50(proxy) <= 1.2 x p50(direct) + 1 ms;
* recovery: 8 clients through the proxy, one instance killed with SIGKILL: the requests that failed, the time
  from the kill to the end of the last failed or slow (over 10 x the p50 before) request;
* each instance's RSS (its process and children) at idle after start-up and after the load.

Print the load average with the figures: on a shared machine only the ratios of one run compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
QUERIES = [
    "gzip compress",
    "json parse",
    "thread pool",
    "regular expression",
    "http server",
    "sqlite cursor",
    "datetime timezone",
    "random choice",
    "socket timeout",
    "csv writer",
]


def rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its descendants (MB)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total / 1024


async def retrieve(http: httpx.AsyncClient, url: str, n: int) -> tuple[float, float, int | str]:
    """One POST /v1/retrieve: (sent, ended, status or the error's name)."""
    sent = time.perf_counter()
    try:
        status: int | str = (
            await http.post(url + "/v1/retrieve", json={"query": QUERIES[n % len(QUERIES)], "k": 10})
        ).status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return sent, time.perf_counter(), status


async def load(url: str, clients: int, requests: int) -> list[tuple[float, float, int | str]]:
    """``requests`` POST /v1/retrieve over ``clients`` keep-alive connections: (sent, seconds, status)."""
    out: list[tuple[float, float, int | str]] = []
    left = iter(range(requests))

    async def client(http: httpx.AsyncClient) -> None:
        for i in left:
            sent, ended, status = await retrieve(http, url, i)
            out.append((sent, ended - sent, status))

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def latency(url: str, clients: int, requests: int) -> tuple[float, float]:
    runs = asyncio.run(load(url, clients, requests))
    bad = [s for *_, s in runs if s != 200]
    assert not bad, f"{len(bad)} failed: {bad[:3]}"
    seconds = [s for _, s, _ in runs]
    return pct(seconds, 50) * 1000, pct(seconds, 99) * 1000


async def recovery(url: str, pid: int, p50_s: float) -> dict:
    stop, records = asyncio.Event(), []

    async def client(http: httpx.AsyncClient, n: int) -> None:
        while not stop.is_set():
            records.append(await retrieve(http, url, n))

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=8)) as http:
        tasks = [asyncio.create_task(client(http, n)) for n in range(8)]
        await asyncio.sleep(3)
        os.kill(pid, signal.SIGKILL)
        killed = time.perf_counter()
        await asyncio.sleep(5)
        stop.set()
        await asyncio.gather(*tasks)
    hurt = [(s, e, st) for s, e, st in records if e > killed and (st != 200 or e - s > 10 * p50_s)]
    return {
        "failed": sum(1 for *_, st in records if st != 200),
        "failed_sent_after_kill": sum(1 for s, _, st in records if s > killed and st != 200),
        "answered_after_kill": sum(1 for s, _, st in records if s > killed and st == 200),
        "recovered_ms": round(((max(e for _, e, _ in hurt) - killed) if hurt else 0.0) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ragnarok-bench-cluster-", dir="/tmp"))
    root.chmod(0o755)  # PostgreSQL runs as its own user when this runs as root
    env = {**os.environ, "RAGNAROK_AUTH": "off", "PYTHONPATH": str(ROOT)}
    env.pop("RAGNAROK_DATABASE_URL", None)
    if args.data_dir:
        env["RAGNAROK_DATA_DIR"] = str(args.data_dir)
    script = [str(ROOT / "deploy" / "cluster")]
    data = root / "cluster"
    from ragnarok.runtime.netaddr import free_port  # noqa: PLC0415

    started = time.perf_counter()
    up = subprocess.run(
        [
            *script,
            "up",
            "--instances",
            str(args.instances),
            "--port",
            str(free_port()),
            "--data-dir",
            str(data),
            "--no-dense",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    try:
        assert up.returncode == 0, up.stderr
        up_s = time.perf_counter() - started
        lines = dict(line.split("=", 1) for line in up.stdout.splitlines() if "=" in line)
        state = json.loads((data / "cluster.json").read_text())
        proxy, direct = lines["URL"], f"http://127.0.0.1:{state['ports'][0]}"
        for url in (proxy, direct):
            asyncio.run(load(url, 8, 100))  # warm-up: every instance's JVM and caches
        idle = [round(rss_mb(p)) for p in state["pids"]]
        load_avg = tuple(round(x, 1) for x in os.getloadavg())
        print(f"load average {load_avg}; {args.instances} instances up in {up_s:.1f} s; RSS idle MB {idle}")
        p50_before = 0.0
        for clients in (int(c) for c in args.clients.split(",")):
            figures = {"proxy": [], "direct": []}
            for _ in range(2):  # alternated: the machine's load drifts
                for name, url in (("proxy", proxy), ("direct", direct)):
                    figures[name].append(latency(url, clients, args.requests))
            (pp50, pp99), (dp50, dp99) = (min(figures[n]) for n in ("proxy", "direct"))
            verdict = "PASS" if pp50 <= 1.2 * dp50 + 1 else "FAIL"
            print(
                f"{clients:>2} clients: proxy p50 {pp50:.1f} ms p99 {pp99:.1f} ms | direct p50 {dp50:.1f} ms "
                f"p99 {dp99:.1f} ms | goal p50 <= 1.2 x direct + 1 ms: {verdict}"
            )
            p50_before = p50_before or pp50 / 1000
        after = [round(rss_mb(p)) for p in state["pids"]]
        print(f"RSS after load MB {after}")
        print("kill -9 of instance 2 under 8 clients:", asyncio.run(recovery(proxy, state["pids"][1], p50_before)))
    finally:
        subprocess.run([*script, "down", "--data-dir", str(data)], env=env, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
