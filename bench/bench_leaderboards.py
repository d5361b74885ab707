"""The arena's Leaderboards refresh at a given vote log size (5-6 s at 106 votes).

    python bench/bench_leaderboards.py [--votes 106] [--refreshes 3]

A fresh SQLite vote log with ``--votes`` blinded battles among six pipelines (random pairs and outcomes, answers
of 60 words with style features), then ``Arena.leaderboards()`` timed ``--refreshes`` times with nothing changed
(the first includes fitting; the next ones find the log unchanged), then once more after one new vote.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragnarok.arena.pool import identify  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from webui.arena import Arena  # noqa: E402
from webui.client import RagClient  # noqa: E402

SPECS = [
    "bm25@20 | extractive",
    "bm25+rocchio@20 | extractive",
    "bm25+rm3@20 | extractive",
    "bm25@20 | smollm2",
    "bm25+rocchio@20 | smollm2",
    "bm25+rm3@20 | smollm2",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--votes", type=int, default=106)
    ap.add_argument("--refreshes", type=int, default=3)
    args = ap.parse_args()
    arena = Arena(Settings(data_dir=Path(tempfile.mkdtemp())), RagClient("http://unused"))
    ids = [identify(s) for s in SPECS]
    rng = random.Random(0)
    answer = {
        "topic_id": "t",
        "topic": "q",
        "references": ["a", "b"],
        "response_length": 60,
        "answer": [{"text": "word " * 30, "citations": [0]}, {"text": "more " * 30, "citations": [1]}],
    }

    def vote(i: int) -> None:
        a, b = rng.sample(ids, 2)
        battle = arena.store.create_battle(
            "blinded", "t", "q", a.as_dict(), b.as_dict(), answer, answer, None, None, "s"
        )
        arena.store.vote(battle, rng.choice(["a", "b", "tie", "bothbad"]), "s", f"client:{i}")

    for i in range(args.votes):
        vote(i)
    for n in range(args.refreshes):
        start = time.perf_counter()
        arena.leaderboards()
        print(f"refresh {n + 1} ({args.votes} votes): {time.perf_counter() - start:.3f} s")
    vote(args.votes)
    start = time.perf_counter()
    arena.leaderboards()
    print(f"after one more vote: {time.perf_counter() - start:.3f} s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
