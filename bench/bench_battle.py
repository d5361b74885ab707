"""An arena battle of two offline pipelines: from the battle's start to both answers in and recorded.

    RAGNAROK_DATA_DIR=/tmp/bench-data python bench/bench_battle.py [--a offline]
        [--b 'bm25+rocchio@20 | extractive'] [--topics 50]

The arena (:class:`webui.arena.Arena`, unblinded ``compare``) calls the API in process, as ``ragnarok serve``
runs it, with the vote log on a fresh SQLite file; the demo index and its dense index are built first when
missing. 5 warm-up battles, then one battle per demo topic. Goal: p50 <= 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from api.main import create_app  # noqa: E402
from ragnarok.arena.pool import identify  # noqa: E402
from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from webui.arena import Arena  # noqa: E402
from webui.client import RagClient  # noqa: E402


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def run(arena: Arena, a: str, b: str, topics: list[str]) -> list[float]:
    left, right = identify(a), identify(b)
    for topic in topics[:5]:
        await arena.compare(left, right, topic, "", "bench")
    seconds = []
    for topic in topics:
        start = time.perf_counter()
        view = await arena.compare(left, right, topic, "", "bench")
        seconds.append(time.perf_counter() - start)
        if not view.votable:
            raise RuntimeError(f"battle not votable on {topic!r}: {view.status}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", default="offline")
    ap.add_argument("--b", default="bm25+rocchio@20 | extractive")
    ap.add_argument("--topics", type=int, default=50)
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", ROOT / ".bench-data"))
    votes = Path(tempfile.mkdtemp(prefix="bench-battle-")) / "votes.db"
    settings = Settings(data_dir=data_dir, database_url=f"sqlite:///{votes}", arena_pool=[args.a, args.b])
    ensure_demo_index(settings, dense_model="minilm")
    topics = [t.text for t in load_topics("demo", ROOT / "topics")][: args.topics]
    app = create_app(settings, arena=False)
    arena = Arena(settings, RagClient("http://ragnarok.local", transport=httpx.ASGITransport(app=app), timeout_s=120))
    seconds = asyncio.run(run(arena, args.a, args.b, topics))
    p50, p95 = pct(seconds, 50), pct(seconds, 95)
    print(f"battle {args.a!r} vs {args.b!r}: {len(seconds)} battles, load {os.getloadavg()[0]:.1f}")
    print(f"  seconds p50 {p50:.3f}  p95 {p95:.3f}  (goal p50 <= 0.5: {'met' if p50 <= 0.5 else 'NOT met'})")


if __name__ == "__main__":
    main()
