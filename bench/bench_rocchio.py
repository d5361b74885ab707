"""BM25+Rocchio in process: Anserini's own search against ``RocchioSearch`` (the same hits, its first round
only as deep as the feedback documents), with BM25 at k = 100 and k = 10 for scale, over the demo topics.

    RAGNAROK_DATA_DIR=/tmp/bench-data python bench/bench_rocchio.py [--rounds 8]

The demo index is built in RAGNAROK_DATA_DIR first when missing. The four searches take turns, a round of all
topics each; printed: each one's median ms per query over the rounds after the first two, and the ratio of
``RocchioSearch`` to Anserini's Rocchio (lower is better), measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from ragnarok.collection.demo_index import ensure_demo_index
from ragnarok.core.settings import Settings
from ragnarok.core.topics import load_topics
from ragnarok.stages.retrieve.anserini import LuceneSearcher, search_hits

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    settings = Settings(data_dir=Path(os.environ.get("RAGNAROK_DATA_DIR", ROOT / ".bench-data")))
    ensure_demo_index(settings)
    index = str(settings.data_dir / "indexes" / "demo")
    bm25, rocchio = LuceneSearcher(index), LuceneSearcher(index)
    bm25.set_bm25(0.9, 0.4)
    rocchio.set_bm25(0.9, 0.4)
    rocchio.set_rocchio()
    topics = [t.text for t in load_topics("demo", ROOT / "topics")]
    searches = {
        "BM25, k 100": lambda q: search_hits(bm25.object, q, 100),
        "BM25, k 10": lambda q: search_hits(bm25.object, q, 10),
        "Anserini's Rocchio, k 100": lambda q: search_hits(rocchio.object, q, 100),
        "RocchioSearch, k 100": lambda q: rocchio.hits(q, 100),
    }
    times: dict[str, list[float]] = {name: [] for name in searches}
    for _ in range(args.rounds):
        for name, search in searches.items():
            start = time.perf_counter()
            for topic in topics:
                search(topic)
            times[name].append((time.perf_counter() - start) / len(topics) * 1000)
    median = {name: statistics.median(values[2:] or values) for name, values in times.items()}
    print(f"{len(topics)} demo topics x {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    for name, ms in median.items():
        print(f"  {name:<27} {ms:6.2f} ms a query")
    ratio = median["RocchioSearch, k 100"] / median["Anserini's Rocchio, k 100"]
    print(f"  RocchioSearch / Anserini's Rocchio = {ratio:.2f}")


if __name__ == "__main__":
    main()
