"""Per-stage latency of the query and passage stages, from the pipeline's own trace.

    python bench/bench_modules.py [--topics 20] [--rounds 2] [--llm | --llm-only] [--only TEXT] [--data-dir DIR]

Runs each pipeline over the first N demo topics in process (the same gateway code as ``POST /rag`` and
``ragnarok search``: the stages' HTTP hops to R and AG go through ``httpx.ASGITransport``), after one
warm-up round (JVM, MiniLM, SmolLM2 loaded), and prints, per stage, the p50 and p95 of ``latency_ms`` as
the trace reports it. With ``--llm`` the query stages and the LLM compressor run on the embedded
SmolLM2-135M (the compressor in its three modes: select, refine, tree_summarize); their first round writes
(``cold``), the next rounds read the cache (``cached``). ``--only TEXT`` keeps the pipelines containing TEXT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragnarok.collection.demo_index import ensure_demo_index
from ragnarok.core.settings import Settings
from ragnarok.core.spec import parse
from ragnarok.core.topics import load_topics
from ragnarok.service.batch import local_services
from ragnarok.service.gateway import PipelineRunner

PASSAGE = [
    "bm25@100 | collapse@20",
    "bm25@100 | neighbours:1@20",
    "bm25@100 | automerge@20",
    "bm25@100 | cutoff:0.3@20",
    "bm25@100 | percentile:50@20",
    "bm25@30 | simcutoff:0.3@20",  # MiniLM encodes every candidate
    "bm25@100 | compress@20",
    "bm25@100 | reorder@20",
]
LLM = [
    "hyde:smollm2 > bm25@100",
    "multiquery:smollm2:3 > bm25@100",
    "bm25@20 | llmcompress:smollm2@5",
    "bm25@20 | llmcompress:smollm2:refine@5",
    "bm25@20 | llmcompress:smollm2:tree_summarize@5",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def bench(specs: list[str], topics: list, rounds: int, settings: Settings) -> list[dict]:
    services, _app = local_services(settings)
    runner = PipelineRunner(services)
    rows = []
    for spec in specs:
        pipeline = parse(spec)
        await runner.run(pipeline, _q(topics[-1]))  # warm-up (a topic outside the measured ones only if N < all)
        per_round: list[dict[str, list[float]]] = []
        for _ in range(rounds):
            stages: dict[str, list[float]] = {}
            for topic in topics:
                run = await runner.run(pipeline, _q(topic))
                for trace in run.traces:
                    stages.setdefault(trace.stage, []).append(trace.latency_ms)
            per_round.append(stages)
        for i, stages in enumerate(per_round):
            for stage, values in stages.items():
                print(
                    json.dumps({"pipeline": spec, "stage": stage, "p50_ms": round(statistics.median(values), 2)}),
                    file=sys.stderr,
                    flush=True,
                )
                label = "cold" if i == 0 and "smollm2" in spec else ("cached" if "smollm2" in spec else "")
                rows.append(
                    {
                        "pipeline": spec,
                        "stage": stage,
                        "round": label or f"r{i + 1}",
                        "p50_ms": round(statistics.median(values), 2),
                        "p95_ms": round(pct(values, 0.95), 2),
                        "n": len(values),
                    }
                )
    return rows


def _q(topic):
    from ragnarok.core.types import Query

    return Query(text=topic.text, qid=topic.qid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--llm", action="store_true", help="also the SmolLM2 query stages and LLM compressor")
    parser.add_argument("--data-dir", default=os.environ.get("RAGNAROK_DATA_DIR"))
    parser.add_argument("--llm-only", action="store_true", help="only the SmolLM2 pipelines (implies --llm)")
    parser.add_argument("--json", action="store_true", help="one JSON row per line")
    parser.add_argument("--only", default="", help="only the pipelines whose spec contains this text")
    args = parser.parse_args()
    settings = Settings(**({"data_dir": args.data_dir} if args.data_dir else {}))
    ensure_demo_index(settings)
    topics = load_topics(ROOT / "topics" / "demo.tsv")[: args.topics]
    args.llm = args.llm or args.llm_only
    if args.llm:
        # the first round of each query stage pays for generation; with one round there is no cached figure
        args.rounds = max(2, args.rounds)
    specs = [s for s in ([] if args.llm_only else PASSAGE) + (LLM if args.llm else []) if args.only in s]
    rows = asyncio.run(bench(specs, topics, args.rounds, settings))
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{'pipeline':38} {'stage':24} {'round':7} {'p50 ms':>9} {'p95 ms':>9}")
    for r in rows:
        print(f"{r['pipeline'][:38]:38} {r['stage'][:24]:24} {r['round']:7} {r['p50_ms']:9.2f} {r['p95_ms']:9.2f}")


if __name__ == "__main__":
    main()
