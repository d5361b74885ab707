"""Where ``POST /rag`` spends its CPU: py-spy samples of the server while the demo topics are posted.

    # start `ragnarok serve` (with its dense index), profile it, print the top frames:
    python bench/profile_rag.py --serve [--pipeline offline] [--rounds 1] [--out /tmp/profile] [--svg /tmp/profile/rag.svg]
    # or only time an already running server (no profile):
    python bench/profile_rag.py --base http://127.0.0.1:8000 [--pipeline offline] [--rounds 1]
    # where /v1/retrieve's CPU goes under load: N keep-alive clients for --seconds (BM25, k=100), profiled
    python bench/profile_rag.py --serve --retrieve-clients 8 [--seconds 10] [--gil] [--out /tmp/profile]
    # or only print the tables of an earlier profile:
    python bench/profile_rag.py --report /tmp/profile/rag.collapsed

``--serve`` starts ``ragnarok serve`` (tests/servers.py, as bench/bench_gateway.py) on ``RAGNAROK_DATA_DIR``
(default: a fresh directory, so the demo indexes are built first), waits until the pipeline answers 200
(``offline`` needs the dense index, built in the background), posts 5 warm-up topics, then runs
``py-spy record --pid SERVER --rate 200 --format raw --function --nonblocking`` (and, with ``--svg``, a
second py-spy writing a flame graph) for exactly the timed requests. The raw output is collapsed stacks,
one ``frame;frame;... count`` line each, frame = ``function (file:first line)``; from it the script prints
the top functions by inclusive share (the function is anywhere on the stack) and by self share (it is the
leaf). ``--gil`` samples only the thread holding the GIL (py-spy's ``--gil``): where a loaded server's Python
time goes, which is what serialises its requests. py-spy needs ptrace rights over the server (root, or ``kernel.yama.ptrace_scope=0``); pip install py-spy.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from ragnarok.core.topics import load_topics  # noqa: E402


def post(conn: http.client.HTTPConnection, pipeline: str, topic: str) -> float:
    """One ``POST /rag``; its end-to-end milliseconds (non-200: raises)."""
    start = time.perf_counter()
    conn.request(
        "POST", "/rag", json.dumps({"topic": topic, "pipeline": pipeline}), {"content-type": "application/json"}
    )
    response = conn.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"/rag answered {response.status}: {body[:300]!r}")
    return (time.perf_counter() - start) * 1000


def connect(base: str) -> http.client.HTTPConnection:
    url = urlsplit(base)
    return http.client.HTTPConnection(url.hostname, url.port, timeout=300)


def wait_ready(base: str, pipeline: str, topic: str, timeout_s: float = 900) -> None:
    """Until the pipeline answers 200 (dense pipelines answer 503 while the dense index builds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            post(connect(base), pipeline, topic)
            return
        except (RuntimeError, OSError) as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{pipeline!r} not ready after {timeout_s:.0f} s: {exc}") from exc
            time.sleep(5)


def run_topics(base: str, pipeline: str, topics: list[str], rounds: int, after_warmup=None) -> list[float]:
    """5 warm-up topics, then ``after_warmup()`` (starts the profiler), then ``rounds`` x all topics, timed."""
    conn = connect(base)
    for t in topics[:5]:
        post(conn, pipeline, t)
    if after_warmup:
        after_warmup()
    return [post(conn, pipeline, t) for _ in range(rounds) for t in topics]


def retrieve_load(base: str, topics: list[str], clients: int, seconds: float, after_warmup) -> list[float]:
    """``clients`` keep-alive clients on ``POST /v1/retrieve`` (BM25, k=100): 5 s of warm-up (the JVM
    compiles the search path), ``after_warmup()``, then ``seconds`` timed; their latencies (ms)."""
    from bench_throughput import load  # noqa: PLC0415 - bench/, beside this script

    port = urlsplit(base).port
    load(port, topics, 100, clients, 5.0)
    after_warmup()
    start = time.perf_counter()
    times = load(port, topics, 100, clients, seconds)
    print(f"/v1/retrieve, {clients} clients: {len(times) / (time.perf_counter() - start):.0f} q/s under the profiler")
    return times


def top_frames(collapsed: Path, n: int = 15) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """(total samples, top ``n`` frames by inclusive samples, top ``n`` by self samples) of a collapsed file."""
    total, inclusive, own = 0, Counter(), Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames, k = stack.split(";"), int(count)
        total += k
        for frame in set(frames):  # once per stack, however deep the recursion
            inclusive[frame] += k
        own[frames[-1]] += k
    return total, inclusive.most_common(n), own.most_common(n)


def print_tables(collapsed: Path, n: int = 15) -> None:
    total, inclusive, own = top_frames(collapsed, n)
    print(f"samples: {total} ({collapsed})")
    for title, rows in (("inclusive (total)", inclusive), ("self", own)):
        print(f"\ntop {n} by {title} share")
        print(f"{'%':>6}  {'samples':>7}  function (file:line)")
        for frame, k in rows:
            print(f"{100 * k / total:6.1f}  {k:7d}  {frame}")


def spy(pid: int, fmt: str, out: Path, subprocesses: bool, gil: bool = False) -> subprocess.Popen:
    cmd = [
        shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy")),
        "record",
        "--pid",
        str(pid),
        "--rate",
        "200",
        "--format",
        fmt,
        "--function",
        "--gil" if gil else "--nonblocking",
        "-o",
        str(out),
        *(["--subprocesses"] if subprocesses else []),
    ]
    print("$", " ".join(cmd), file=sys.stderr)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(out.suffix + ".log"), "w"))


def serve_and_profile(args: argparse.Namespace, topics: list[str]) -> list[float]:
    from servers import ragnarok_serve, wait_until_idle  # noqa: PLC0415 - tests/servers.py

    data_dir = os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="profile-")
    args.out.mkdir(parents=True, exist_ok=True)
    started: list[subprocess.Popen] = []
    spies: list[subprocess.Popen] = []
    with ragnarok_serve(
        {**os.environ, "RAGNAROK_DATA_DIR": data_dir},
        output=args.out / "server.log",
        dense=True,
        started=started,
        start_timeout_s=600,
    ) as base:
        pid = started[0].pid
        if not args.retrieve_clients:
            wait_ready(base, args.pipeline, topics[0])
        wait_until_idle(pid)  # start-up work (a dense build, the arena's UI) is not the requests' work
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()

        def start_profiler() -> None:
            spies.append(spy(pid, "raw", args.out / "rag.collapsed", bool(children), args.gil))
            if args.svg:
                spies.append(spy(pid, "flamegraph", args.svg, bool(children), args.gil))
            time.sleep(1)  # attached before the first timed request

        try:
            if args.retrieve_clients:
                times = retrieve_load(base, topics, args.retrieve_clients, args.seconds, start_profiler)
            else:
                times = run_topics(base, args.pipeline, topics, args.rounds, start_profiler)
        finally:
            for p in spies:
                p.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            for p in spies:
                p.wait(timeout=120)
    print(f"server pid {pid}; children: {children or 'none'}; data dir {data_dir}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--serve", action="store_true", help="start ragnarok serve and profile it with py-spy")
    mode.add_argument("--base", help="an already running server's base URL (timing only)")
    mode.add_argument("--report", type=Path, help="only print the tables of this collapsed-stacks file")
    ap.add_argument("--pipeline", default="offline")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--out", type=Path, default=Path("profile-rag"), help="folder for rag.collapsed, server.log")
    ap.add_argument("--svg", type=Path, help="also write a py-spy flame graph here")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument(
        "--retrieve-clients",
        type=int,
        default=0,
        help="profile POST /v1/retrieve under this many clients instead of /rag",
    )
    ap.add_argument("--seconds", type=float, default=10.0, help="with --retrieve-clients: seconds timed")
    ap.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    args = ap.parse_args()
    if args.report:
        print_tables(args.report, args.top)
        return

    topics = [t.text for t in load_topics(args.topics, ROOT / "topics")]
    times = serve_and_profile(args, topics) if args.serve else run_topics(args.base, args.pipeline, topics, args.rounds)
    what = f"/v1/retrieve x {args.retrieve_clients} clients" if args.retrieve_clients else f"pipeline {args.pipeline!r}"
    print(
        f"{what}: {len(times)} requests"
        + ("" if args.retrieve_clients else f" ({len(topics)} topics x {args.rounds})")
        + ", "
        f"p50 {statistics.median(times):.0f} ms, mean {statistics.fmean(times):.0f} ms, "
        f"max {max(times):.0f} ms"
    )
    if args.serve:
        print()
        print_tables(args.out / "rag.collapsed", args.top)


if __name__ == "__main__":
    main()
