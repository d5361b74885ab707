"""The R service's memory from outside, step by step: RSS and its anonymous / file-backed split.

    python bench/bench_memory.py [--data-dir DIR] [--warmup 200] [--mixed 1000] [--clients 4] [--rag-every 50]
                                 [--idle-s 70] [--json FILE] [--server SCRIPT]

Starts ``ragnarok serve --no-dense`` (one worker, its own process; the demo index is built on first use, so
pass the same ``--data-dir`` to every run, or set RAGNAROK_DATA_DIR) and prints the server's RSS at:

* ``healthz``: the first 200 from ``/healthz``;
* ``warm-up``: after ``--warmup`` ``POST /v1/retrieve`` (k = 100, the demo topics) and start-up work done
  (the server's CPU time still for 2 s);
* ``k=max_k``, ``body>max_body_bytes``, ``query>max_query_chars`` (both 413): after each oversized kind,
  three requests of each;
* ``mixed``: after ``--mixed`` mixed requests from ``--clients`` threads: ``/v1/retrieve`` with k from 10
  to 1000, ``/rag`` with ``bm25@20 | extractive`` (every ``--rag-every``-th), ``GET /v1/retrievers``, 404s and 422s;
* ``idle``: ``--idle-s`` seconds later, the server idle.

Each row: VmRSS, its anonymous part (Python's heap, the JVM's heap and code cache, malloc arenas) and its
file-backed part (shared libraries, Lucene's memory-mapped index files; the kernel may drop these), from
``/proc/PID/smaps_rollup``; then the JVM's heap (the anonymous mapping it reserved for ``-Xmx``: the heap's
touched pages), glibc's malloc arenas (their 64 MB reservations) and which heavy libraries the process has mapped (torch, onnxruntime: loaded when a model is).
On a shared machine RSS is what the process holds, not time: it compares across runs, unlike throughput.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_throughput import cpu_s, loadavg  # noqa: E402

from ragnarok.core.java import heap_bytes  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from ragnarok.runtime.netaddr import free_port  # noqa: E402

MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+$")
ARENA_KB = 64 * 1024  # a glibc malloc arena's reservation (64-bit)
HEAVY = ("libtorch_cpu", "onnxruntime", "libllama", "libjvm", "pandas", "pyarrow")  # mapped libraries shown


def rollup(pid: int) -> dict[str, int]:
    """``/proc/PID/smaps_rollup`` in MB: Rss, Anonymous and the file-backed rest."""
    kb = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        kb[name.rstrip(":")] = int(value)
    return {"rss": kb["Rss"] // 1024, "anon": kb["Anonymous"] // 1024, "file": (kb["Rss"] - kb["Anonymous"]) // 1024}


def anon_runs(pid: int) -> tuple[list[tuple[int, int]], set[str]]:
    """Runs of adjacent anonymous mappings (a reservation and its committed parts are separate mappings side
    by side) as (size kB, resident kB), and the :data:`HEAVY` libraries mapped."""
    runs: list[list[int]] = []
    libs: set[str] = set()
    end, anon = -1, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if MAPPING.match(fields[0]):
            start, stop = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5] if len(fields) > 5 else ""
            libs.update(name for name in HEAVY if name in path)
            anon = not path
            if anon and start == end and runs:
                runs[-1][0] += (stop - start) // 1024
            elif anon:
                runs.append([(stop - start) // 1024, 0])
            end = stop if anon else -1
        elif fields[0] == "Rss:" and anon:
            runs[-1][1] += int(fields[1])
    return [(size, rss) for size, rss in runs], libs


def breakdown(pid: int, heap_kb: int) -> dict:
    """The JVM heap's resident MB (the run reserved for ``-Xmx``) and glibc's malloc arenas (64 MB runs: how
    many, resident MB)."""
    runs, libs = anon_runs(pid)
    arenas = [rss for size, rss in runs if size == ARENA_KB]
    return {
        "jvm_heap": sum(rss for size, rss in runs if size == heap_kb) // 1024,
        "arenas": len(arenas),
        "arenas_mb": sum(arenas) // 1024,
        "libs": ",".join(sorted(libs)),
    }


def hwm_mb(pid: int) -> int:
    """The process's peak RSS so far (VmHWM)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) // 1024


def row(pid: int, step: str, heap_kb: int, statuses: str = "") -> dict:
    r = rollup(pid) | {"peak": hwm_mb(pid), "step": step, "statuses": statuses} | breakdown(pid, heap_kb)
    print(
        f"{step:<22} RSS {r['rss']:>5} MB (peak {r['peak']:>5})  anon {r['anon']:>5}  file {r['file']:>4}  "
        f"JVM heap {r['jvm_heap']:>4}  malloc arenas {r['arenas']:>2} ({r['arenas_mb']:>3} MB)  {statuses:<14} "
        f"[{r['libs']}]  (loadavg {loadavg()})",
        flush=True,
    )
    return r


def settle(pid: int, quiet_s: float = 2.0, limit_s: float = 120.0) -> None:
    """Until the server's CPU time stands still for ``quiet_s`` (start-up work done), at most ``limit_s``."""
    deadline, last = time.monotonic() + limit_s, cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = cpu_s(pid)
        if now - last < 0.02 * quiet_s:
            return
        last = now


def mixed(base: str, queries: list[str], n: int, rag_every: int, clients: int) -> str:
    """``n`` mixed requests from ``clients`` threads (keep-alive each); their status counts."""
    counts: Counter[int] = Counter()

    def send(client: httpx.Client, i: int) -> httpx.Response:
        q = queries[i % len(queries)]
        kind = i % 10
        if rag_every and i % rag_every == rag_every - 1:
            return client.post("/rag", json={"topic": q, "pipeline": "bm25@20 | extractive"})
        if kind < 6:
            return client.post("/v1/retrieve", json={"query": q, "k": (10, 100, 1000)[i % 3]})
        if kind == 6:
            return client.get("/v1/retrievers")
        if kind == 7:
            return client.get(f"/v1/no-such-route-{i}")
        if kind == 8:
            return client.post("/v1/retrieve", json={"query": q, "k": 0})
        return client.post("/v1/retrieve", content=b'{"query": ', headers={"content-type": "application/json"})

    def run(offset: int) -> Counter[int]:
        with httpx.Client(base_url=base, timeout=300) as client:
            return Counter(send(client, i).status_code for i in range(offset, n, clients))

    with ThreadPoolExecutor(clients) as pool:
        for part in pool.map(run, range(clients)):
            counts.update(part)
    return " ".join(f"{code}x{count}" for code, count in sorted(counts.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, help="RAGNAROK_DATA_DIR (default: $RAGNAROK_DATA_DIR or a new one)")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--mixed", type=int, default=1000)
    ap.add_argument("--rag-every", type=int, default=50, help="every n-th mixed request is a /rag (0: none)")
    ap.add_argument(
        "--idle-s",
        type=float,
        default=70.0,
        help="idle seconds before the last row (the JVM "
        "returns heap it does not use after a periodic GC, after 60 s idle)",
    )
    ap.add_argument("--clients", type=int, default=4, help="client threads sending the mixed requests")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument(
        "--server",
        default="-m ragnarok.cli",
        help="what runs `serve` after the Python interpreter "
        "(default: -m ragnarok.cli; a script path to measure a variant)",
    )
    args = ap.parse_args()

    data_dir = args.data_dir or Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-mem-"))
    settings = Settings(data_dir=data_dir)
    queries = [t.text for t in load_topics("demo", ROOT / "topics")]
    heap_kb = heap_bytes(settings.jvm_heap) // 1024 if settings.jvm_heap else 0
    port = free_port()
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    print(f"data_dir={data_dir} cpus={os.cpu_count()} loadavg at start {loadavg()}", flush=True)
    server = subprocess.Popen(
        [sys.executable, *args.server.split(), "serve", "--no-dense", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            for _ in range(6000):  # the demo index is built first on a fresh data directory
                try:
                    if client.get("/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
                if server.poll() is not None:
                    raise SystemExit(f"the server exited with {server.returncode}")
            rows.append(row(server.pid, "healthz", heap_kb))
            for i in range(args.warmup):
                client.post("/v1/retrieve", json={"query": queries[i % len(queries)], "k": 100}).raise_for_status()
            settle(server.pid)
            rows.append(row(server.pid, "warm-up", heap_kb))
            oversized = {
                "k=max_k": lambda: client.post("/v1/retrieve", json={"query": queries[0], "k": settings.max_k}),
                "body>max_body_bytes": lambda: client.post(
                    "/v1/retrieve",
                    content=b'{"query": "' + b"a" * settings.max_body_bytes + b'"}',
                    headers={"content-type": "application/json"},
                ),
                "query>max_query_chars": lambda: client.post(
                    "/v1/retrieve", json={"query": "a " * settings.max_query_chars}
                ),
            }
            for step, send in oversized.items():
                statuses = " ".join(str(send().status_code) for _ in range(3))
                rows.append(row(server.pid, step, heap_kb, statuses))
            statuses = mixed(str(client.base_url), queries, args.mixed, args.rag_every, args.clients)
            rows.append(row(server.pid, f"{args.mixed} mixed", heap_kb, statuses))
            settle(server.pid)
            time.sleep(args.idle_s)
            rows.append(row(server.pid, f"idle {args.idle_s:.0f} s after", heap_kb))
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(f"loadavg at end {loadavg()}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
