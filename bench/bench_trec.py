"""``ragnarok run`` concurrency: 301 topics, a generator that answers in a fixed 200 ms, ``--concurrency 16``.

    python bench/bench_trec.py [--topics ../shared/data/trec-rag/topics.rag24.test.txt] [--concurrency 16]

The generator is a local OpenAI-compatible server in its own process (uvicorn serving tests/fakes.py's
app, model ``fixed-200ms``) that sleeps 200 ms per request. The timed run is the track's AG task: candidates given as Request JSONL (made first,
untimed, by a BM25 R-task run over the demo index), so the wall time is the runner's own scheduling,
HTTP hops, formatting and appending around the 200 ms answers. Goal: wall <= 1.15 x topics x 0.2 / 16 s.
A second, informative row times the whole pipeline (BM25 retrieval + the same generator).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import read_topics  # noqa: E402
from ragnarok.stages.generate.base import GeneratorConfig  # noqa: E402
from ragnarok.track.run import TrackOptions, read_requests, run_track, track_pipeline  # noqa: E402


@contextmanager
def fake_llm_server() -> Iterator[str]:
    """tests/fakes.py's OpenAI-compatible app under uvicorn in a separate process; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "fakes:flaky_openai_app",
            "--factory",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT / "tests",
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                httpx.get(f"{base}/healthz", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=Path, default=ROOT.parent / "shared/data/trec-rag/topics.rag24.test.txt")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each kind (the median is judged)")
    args = ap.parse_args()
    topics = read_topics(args.topics)
    work = Path(tempfile.mkdtemp(prefix="bench-trec-"))
    with fake_llm_server() as url:
        settings = Settings(
            data_dir=work / "data",
            generators=[
                GeneratorConfig(
                    name="fixed200", backend="openai", base_url=f"{url}/v1", model="fixed-200ms", max_concurrency=64
                )
            ],
        )
        ensure_demo_index(settings)
        given = work / "bm25.run"
        asyncio.run(
            run_track(
                track_pipeline("bm25@20", False),
                topics,
                settings,
                TrackOptions(run_id="bm25", output=given, task="r", concurrency=4, progress=False),
            )
        )
        requests = read_requests(given.with_name(given.name + ".requests.jsonl"))

        rows = []
        kinds = (
            ("AG task (given candidates)", "fixed200", requests),
            ("bm25@20 | fixed200", "bm25@20 | fixed200", None),
        )
        for label, spec, given_requests in [k for k in kinds for _ in range(args.repeat)]:
            options = TrackOptions(
                run_id="bench", output=work / f"{len(rows)}.jsonl", concurrency=args.concurrency, progress=False
            )
            start = time.perf_counter()
            summary = asyncio.run(
                run_track(track_pipeline(spec, given_requests is not None), topics, settings, options, given_requests)
            )
            wall = time.perf_counter() - start
            assert summary.written == len(topics) and not summary.failed, summary
            stats = httpx.get(f"{url}/stats").json()
            rows.append((label, wall, stats["max_in_flight"]))

    ideal = len(topics) * 0.2 / args.concurrency
    print(
        f"topics={len(topics)} concurrency={args.concurrency} ideal={ideal:.2f} s "
        f"(topics x 0.2 s / concurrency); goal <= 1.15 x ideal = {1.15 * ideal:.2f} s"
    )
    print(f"{'run':<30} {'wall s':>7} {'x ideal':>8} {'max in flight (so far)':>24}")
    for label, wall, in_flight in rows:
        print(f"{label:<30} {wall:7.2f} {wall / ideal:8.3f} {in_flight:>24}")
    ag = sorted(wall for label, wall, _ in rows if label.startswith("AG"))
    median = ag[len(ag) // 2]
    print(
        f"AG task median {median:.2f} s = {median / ideal:.3f} x ideal: {'met' if median <= 1.15 * ideal else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
