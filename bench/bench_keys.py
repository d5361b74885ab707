"""What checking an API key costs per request, measured in one run (goal: <= 0.2 ms p50).

    python bench/bench_keys.py [--requests 3000] [--database-url URL]

The same app is built twice, with ``RAGNAROK_AUTH=off`` and ``keys`` (a key with every limit that is checked
per request: scopes, a generator list, requests per minute, parallel requests, a budget), and called in this
process through ASGI (no sockets, so the figure is the middleware's own work, not the network's): GET
/v1/pipelines, a cheap route, alternating between the two apps so that both see the same machine. Printed: the
p50/p95 of each, their difference (the cost of the key check), and the p50 of a key looked up in the database
(a cache miss: the first request of a key, or the first after ``auth_cache_s``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from api.main import create_app  # noqa: E402
from ragnarok.auth.store import AuthStore  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def call(app, headers: list[tuple[bytes, bytes]]) -> float:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/v1/pipelines",
        "raw_path": b"/v1/pipelines",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    status = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    start = time.perf_counter()
    await app(scope, receive, send)
    elapsed = (time.perf_counter() - start) * 1000
    assert status == [200], status
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--database-url", default=None, help="Default: a fresh SQLite file.")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    url = args.database_url or f"sqlite:///{tmp / 'service.db'}"
    off = create_app(Settings(data_dir=tmp, database_url=url), arena=False)
    keyed_settings = Settings(data_dir=tmp, database_url=url, auth="keys", auth_cache_s=60)
    keyed = create_app(keyed_settings, arena=False)
    store = AuthStore.for_settings(keyed_settings)
    _, secret = store.create(
        "bench", ["retrieve", "generate"], generators=["extractive"], rpm=10**9, parallel=64, budget_calls=10**9
    )
    auth = [(b"authorization", f"Bearer {secret}".encode())]
    for _ in range(200):  # warm both
        await call(off, [])
        await call(keyed, auth)
    times_off, times_keys = [], []
    for _ in range(args.requests):
        times_off.append(await call(off, []))
        times_keys.append(await call(keyed, auth))
    misses = []
    for i in range(min(300, args.requests // 10)):
        _, fresh = store.create(f"miss-{i}", ["retrieve"])
        start = time.perf_counter()
        store.lookup(fresh)
        misses.append((time.perf_counter() - start) * 1000)
    p50_off, p50_keys = statistics.median(times_off), statistics.median(times_keys)
    print(f"requests: {args.requests} per app, GET /v1/pipelines through ASGI, database {url.split(':')[0]}")
    print(f"auth off : p50 {p50_off:.3f} ms  p95 {pct(times_off, 95):.3f} ms")
    print(f"auth keys: p50 {p50_keys:.3f} ms  p95 {pct(times_keys, 95):.3f} ms")
    print(
        f"key check (keys - off): p50 {p50_keys - p50_off:.3f} ms  (goal <= 0.2 ms); "
        f"ratio keys/off {p50_keys / p50_off:.2f}"
    )
    print(
        f"key looked up in the database (cache miss): p50 {statistics.median(misses):.3f} ms "
        f"p95 {pct(misses, 95):.3f} ms over {len(misses)}"
    )


if __name__ == "__main__":
    asyncio.run(main())
