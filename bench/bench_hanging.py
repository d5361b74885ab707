"""One hanging LLM backend must not starve the others or liveness: the 44-hanging-clients load.

    python bench/bench_hanging.py [--seconds 10] [--hanging 44] [--clients 4] [--timeout 5] [--max-concurrency 4]

``ragnarok serve --no-dense`` runs in its own process with one more generator, ``hung``: an OpenAI-compatible
backend that never answers (tests/fakes.py, served from this process), ``--max-concurrency`` slots (4; a run with
64 was measured too: more slots than anyio's 40 default worker threads), timeout ``--timeout``
s, no retries. This process measures extractive ``/rag`` throughput (``bm25@100 | extractive``, ``--clients``
clients in a loop over the demo topics) for ``--seconds`` with no other load, then again while ``--hanging``
clients each keep one ``/rag`` to ``hung`` in flight (``bm25@20 | hung``: each answers 504 after the timeout or
the slot wait, and is sent again at once). ``/healthz`` is polled every 100 ms throughout.

Goals: loaded / unloaded throughput >= 0.5 and /healthz max < 1 s. Everything is on 127.0.0.1; it stops by
itself (the server is terminated, the fake backend stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakes import flaky_openai_app  # noqa: E402
from servers import ragnarok_serve, serve_app  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402

EXTRACTIVE = "bm25@100 | extractive"
HUNG = "bm25@20 | hung"


def server_env(data_dir: Path, backend: str, timeout_s: float, max_concurrency: int = 4) -> dict[str, str]:
    """The server's environment: the demo data and one generator, ``hung``, on the hanging fake."""
    generators = [
        {
            "name": "hung",
            "backend": "openai",
            "base_url": f"{backend}/v1",
            "model": "hang",
            "max_concurrency": max_concurrency,
            "timeout_s": timeout_s,
            "max_retries": 0,
        }
    ]
    return {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir), "RAGNAROK_GENERATORS": json.dumps(generators)}


async def extractive(client: httpx.AsyncClient, topics: list[str], seconds: float, clients: int) -> tuple[int, Counter]:
    """Completed extractive /rag calls in ``seconds`` by ``clients`` clients, and their statuses."""
    end, done, statuses, cycle = time.monotonic() + seconds, 0, Counter(), itertools.cycle(topics)

    async def one_client() -> None:
        nonlocal done
        while time.monotonic() < end:
            r = await client.post("/rag", json={"topic": next(cycle), "pipeline": EXTRACTIVE})
            statuses[r.status_code] += 1
            done += r.status_code == 200

    await asyncio.gather(*(one_client() for _ in range(clients)))
    return done, statuses


async def health(client: httpx.AsyncClient, stop: asyncio.Event, latencies: list[float]) -> None:
    while not stop.is_set():
        start = time.monotonic()
        await client.get("/healthz")
        latencies.append(time.monotonic() - start)
        await asyncio.sleep(0.1)


async def hanging(client: httpx.AsyncClient, stop: asyncio.Event, statuses: Counter, topic: str) -> None:
    while not stop.is_set():
        r = await client.post("/rag", json={"topic": topic, "pipeline": HUNG})
        statuses[r.status_code] += 1


async def run(base: str, topics: list[str], args: argparse.Namespace) -> dict:
    limits = httpx.Limits(max_connections=args.hanging + args.clients + 10)
    async with (
        httpx.AsyncClient(base_url=base, timeout=600, limits=limits) as client,
        httpx.AsyncClient(base_url=base, timeout=600) as prober,
    ):
        await extractive(client, topics, 3, args.clients)  # warm-up: JVM compilation, first-use loads
        stop, idle_health = asyncio.Event(), []
        poller = asyncio.create_task(health(prober, stop, idle_health))
        unloaded, unloaded_statuses = await extractive(client, topics, args.seconds, args.clients)
        stop.set()
        await poller

        stop, hung_statuses, loaded_health = asyncio.Event(), Counter(), []
        load = [
            asyncio.create_task(hanging(client, stop, hung_statuses, topics[i % len(topics)]))
            for i in range(args.hanging)
        ]
        await asyncio.sleep(1.0)  # every hanging client is in
        poller_stop = asyncio.Event()
        poller = asyncio.create_task(health(prober, poller_stop, loaded_health))
        loaded, loaded_statuses = await extractive(client, topics, args.seconds, args.clients)
        poller_stop.set()
        stop.set()
        await poller
        await asyncio.gather(*load)  # each ends after its call in flight (the timeout at most)
    return {
        "unloaded": unloaded / args.seconds,
        "loaded": loaded / args.seconds,
        "statuses": (unloaded_statuses, loaded_statuses),
        "hung": hung_statuses,
        "health": (idle_health, loaded_health),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="each measurement's length")
    ap.add_argument("--hanging", type=int, default=44, help="clients calling the hanging generator")
    ap.add_argument("--clients", type=int, default=4, help="extractive clients")
    ap.add_argument("--timeout", type=float, default=5.0, help="the hanging generator's timeout_s")
    ap.add_argument("--max-concurrency", type=int, default=4, help="the hanging generator's slots")
    args = ap.parse_args()

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-")))
    ensure_demo_index(Settings(data_dir=data_dir))
    topics = [t.text for t in load_topics("demo", ROOT / "topics")]
    with (
        serve_app(flaky_openai_app()) as backend,
        ragnarok_serve(server_env(data_dir, backend, args.timeout, args.max_concurrency)) as base,
    ):
        out = asyncio.run(run(base, topics, args))

    idle, loaded = out["health"]
    ratio = out["loaded"] / out["unloaded"] if out["unloaded"] else 0.0
    print(f"extractive /rag ({EXTRACTIVE}, {args.clients} clients, {args.seconds:g} s each):")
    print(
        f"  unloaded {out['unloaded']:.1f} req/s {dict(out['statuses'][0])}; with {args.hanging} clients on a "
        f"hanging generator (max_concurrency {args.max_concurrency}, timeout {args.timeout:g} s) {out['loaded']:.1f} req/s "
        f"{dict(out['statuses'][1])}"
    )
    print(f"  ratio {ratio:.2f}; goal >= 0.5: {'met' if ratio >= 0.5 else 'NOT met'}")
    print(
        f"/healthz: unloaded p50 {statistics.median(idle) * 1000:.1f} ms, max {max(idle) * 1000:.1f} ms; loaded "
        f"p50 {statistics.median(loaded) * 1000:.1f} ms, max {max(loaded) * 1000:.1f} ms "
        f"({len(loaded)} polls); goal max < 1 s: {'met' if max(loaded) < 1 else 'NOT met'}"
    )
    print(f"hanging /rag answers: {dict(out['hung'])}")


if __name__ == "__main__":
    main()
