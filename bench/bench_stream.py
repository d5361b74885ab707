"""Time to first token of streamed ``/rag`` answers, next to the whole answer's latency.

    python bench/bench_stream.py [--limit 50] [--pipeline 'bm25@20 | smollm2' --pipeline offline]

``ragnarok serve`` runs in its own process on the demo index (its dense MiniLM index built first, so that
``offline`` runs);
this process posts each demo topic to ``/rag`` with ``"stream": true``, one at a time, and reads the events as
they arrive. Per pipeline: p50 / p95 of the time to the first ``delta`` event (the first words on screen), to
the first ``sentence`` event, and to ``done`` (the whole answer), and of the non-streamed ``/rag`` latency of
the same topics, asked right after each streamed one. A warm-up question per pipeline is not timed. The load
average is printed before and after each pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
from httpx_sse import connect_sse

ROOT = Path.cwd() if (Path.cwd() / "ragnarok").is_dir() else Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_answers import pct  # noqa: E402
from servers import ragnarok_serve  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402

PIPELINES = ["bm25@20 | smollm2", "offline"]


def streamed(client: httpx.Client, url: str, pipeline: str, topic: str) -> dict[str, float]:
    """Seconds to the first delta, the first sentence and done."""
    start, seen = time.perf_counter(), {}
    body = {"topic": topic, "pipeline": pipeline, "stream": True}
    with connect_sse(client, "POST", url + "/rag", json=body) as source:
        if source.response.status_code != 200:
            raise RuntimeError(f"/rag answered {source.response.status_code}: {source.response.read()[:300]!r}")
        for event in source.iter_sse():
            seen.setdefault(event.event, time.perf_counter() - start)
            if event.event == "error":
                raise RuntimeError(f"{pipeline}: {event.data}")
    return {"first_token": seen["delta"], "first_sentence": seen.get("sentence", seen["done"]), "done": seen["done"]}


def plain(client: httpx.Client, url: str, pipeline: str, topic: str) -> float:
    start = time.perf_counter()
    response = client.post(url + "/rag", json={"topic": topic, "pipeline": pipeline})
    response.raise_for_status()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--pipeline", action="append")
    ap.add_argument("--no-plain", action="store_true", help="skip the non-streamed requests (half the time)")
    args = ap.parse_args()
    pipelines = args.pipeline or PIPELINES
    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-stream-")))
    ensure_demo_index(Settings(data_dir=data_dir), dense_model="minilm")  # `offline` needs it (built once)
    topics = [t.text for t in load_topics("demo", ROOT / "topics")][: args.limit]
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    rows, loads = [], []
    with (
        ragnarok_serve(env, output=Path(tempfile.gettempdir()) / "bench-stream-serve.log", cwd=ROOT) as url,
        httpx.Client(timeout=600) as client,
    ):
        for pipeline in pipelines:
            streamed(client, url, pipeline, "warm up the model")
            loads.append(Path("/proc/loadavg").read_text().split()[0])
            samples, whole = [], []
            for i, topic in enumerate(topics, 1):
                samples.append(streamed(client, url, pipeline, topic))
                if not args.no_plain:
                    whole.append(plain(client, url, pipeline, topic))
                print(
                    f"{pipeline}: {i}/{len(topics)} {json.dumps(samples[-1])} plain {whole[-1:]}",
                    file=sys.stderr,
                    flush=True,
                )
            loads.append(Path("/proc/loadavg").read_text().split()[0])
            rows.append((pipeline, samples, whole))
    print(f"topics={len(topics)}; 1-min load average before/after each pipeline: {loads}")
    print(
        "| pipeline | first token p50 s | p95 s | first sentence p50 s | streamed done p50 s | p95 s | "
        "non-streamed p50 s | p95 s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for pipeline, samples, whole in rows:

        def col(key: str, q: int) -> str:
            return f"{pct([s[key] for s in samples], q):.3f}"

        print(
            f"| `{pipeline}` | {col('first_token', 50)} | {col('first_token', 95)} | {col('first_sentence', 50)} | "
            f"{col('done', 50)} | {col('done', 95)} | "
            + (f"{pct(whole, 50):.3f} | {pct(whole, 95):.3f} |" if whole else "– | – |")
        )


if __name__ == "__main__":
    main()
