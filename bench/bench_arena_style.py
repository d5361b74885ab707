"""Arena: what keeps battles fast, and what the style-controlled boards cost.

    python bench/bench_arena_style.py [--battles 100000] [--rounds 100] [--store-battles 5000]

(a) The share of blinded battles that include a ``smollm2`` pipeline in the default pool, from
    ``pick_pair`` + ``speed_weights`` (20,000 draws; budget 30 s; extractive pipelines at a 1 s median) for
    several ``smollm2`` medians: exact for the sampler, not a timing.
(b) ``leaderboard()`` plain and ``leaderboard(style=True)`` over ``--battles`` synthetic battles of 20 systems
    with random answer lengths and citation counts, ``--rounds`` bootstrap rounds each.
(c) ``VoteStore.battles()`` with and without style features on a SQLite log of ``--store-battles`` voted
    battles whose answers are about 2 KB of JSON (best of 3).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from ragnarok.arena.pool import default_specs, identify, make_pool, pick_pair, speed_weights  # noqa: E402
from ragnarok.arena.ratings import Battle, leaderboard  # noqa: E402
from ragnarok.arena.store import VoteStore  # noqa: E402


def shares() -> None:
    print("(a) share of blinded battles with a smollm2 pipeline (budget 30 s)")
    for retrievers in (["bm25", "bm25+rocchio", "bm25+rm3"], ["bm25", "bm25+rocchio", "bm25+rm3", "dense:minilm"]):
        pool = make_pool(default_specs(retrievers, ["extractive", "smollm2"]))
        cells = []
        for median in (None, 45.0, 98.0, 150.0):
            medians = {} if median is None else {p.spec: median if p.generator == "smollm2" else 1.0 for p in pool}
            speed, rng, n = speed_weights(pool, medians, 30.0), random.Random(0), 20_000
            hits = sum(any(p.generator == "smollm2" for p in pick_pair(pool, {}, rng, speed)) for _ in range(n))
            cells.append(f"{'unmeasured' if median is None else f'{median:g} s'}: {hits / n:.1%}")
        print(f"  {len(pool)} pipelines: " + ", ".join(cells))


def boards(n: int, rounds: int) -> None:
    rng = np.random.default_rng(1)
    names = [f"s{i}" for i in range(20)]
    battles = []
    for _ in range(n):
        a, b = rng.choice(20, 2, replace=False)
        style = [(float(rng.integers(20, 300)), float(rng.integers(0, 8))) for _ in range(2)]
        winner = str(rng.choice(["a", "b", "tie"], p=[0.45, 0.45, 0.1]))
        battles.append(Battle(names[a], names[b], winner, style[0], style[1]))
    for style in (False, True):
        start = time.perf_counter()
        leaderboard(battles, rounds=rounds, style=style)
        print(
            f"(b) leaderboard(style={style}) over {n:,} battles, {rounds} rounds: {time.perf_counter() - start:.2f} s"
        )


def store(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = VoteStore(f"sqlite:///{Path(tmp) / 'v.db'}", votes_per_minute=10**9)
        pa, pb = identify("bm25@20 | extractive").as_dict(), identify("bm25+rm3@20 | extractive").as_dict()
        sentence = {
            "text": "gzip.compress: Compress data in one shot and return the compressed string. " * 2,
            "citations": [0, 1],
        }
        answer = {
            "topic_id": "t",
            "topic": "compress a file",
            "references": [f"doc#{i}" for i in range(10)],
            "response_length": 150,
            "answer": [sentence] * 10,
        }
        for k in range(n):
            battle = log.create_battle("blinded", "", "topic", pa, pb, answer, answer, None, None, "s")
            log.vote(battle, "a", "s", f"k{k % 50}")
        for style in (False, True):
            best = min(timeit.repeat(lambda: log.battles(style=style), number=1, repeat=3))  # noqa: B023
            print(f"(c) VoteStore.battles(style={style}) over {n:,} voted battles: {best * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--store-battles", type=int, default=5000)
    args = parser.parse_args()
    print("load average:", Path("/proc/loadavg").read_text().split()[:3])
    shares()
    boards(args.battles, args.rounds)
    store(args.store_battles)


if __name__ == "__main__":
    main()
