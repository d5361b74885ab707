"""Answer quality and speed of the generators on the demo topics, through ``POST /rag``.

    python bench/bench_answers.py [--topics demo] [--limit 50] [--pipeline 'bm25@20 | smollm2' ...] [--json F]

``ragnarok serve --no-dense`` runs in its own process (its log in ``/tmp/bench-answers-serve.log``); this
process posts each topic to ``/rag`` (with ``trace`` and the cited ``segments``), one at a time, and reports per
pipeline:

* p50 / p95 of the end-to-end ``/rag`` latency (ms), and the generator stage's own time;
* the share of answers with at least one citation;
* the share of answer sentences that repeat an earlier sentence of the same answer (the same words, lower-cased,
  punctuation and citation markers aside, or a word Jaccard of at least 0.8);
* words per answer, sentences per answer, citations per sentence;
* citation support: every (sentence, cited segment) pair labelled by the support check of judging
  (:mod:`ragnarok.judge.support`) with the PROXY judge (token overlap + MiniLM, no LLM): the share labelled
  full or partial support, and the support precision (full 1, partial 0.5, none 0).

A warm-up question first for each pipeline (model loads) is not timed (``--no-warmup``: none). To measure an older version,
run this file from a checkout of it (``git archive HEAD | tar -x -C DIR``; the server runs from the working
directory).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path.cwd() if (Path.cwd() / "ragnarok").is_dir() else Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers import ragnarok_serve  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402

PIPELINES = ["bm25@20 | smollm2", "bm25@20 | extractive"]
_WORDS = re.compile(r"[a-z0-9]+")


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def repeated(sentences: list[str]) -> int:
    """Sentences that repeat an earlier one of the same answer (same words, or word Jaccard >= 0.8)."""
    seen: list[set[str]] = []
    keys: set[tuple[str, ...]] = set()
    count = 0
    for s in sentences:
        words = _WORDS.findall(s.lower())
        key, bag = tuple(words), set(words)
        if not words:
            continue
        if key in keys or any(len(bag & b) / len(bag | b) >= 0.8 for b in seen if bag | b):
            count += 1
        keys.add(key)
        seen.append(bag)
    return count


def ask(conn: http.client.HTTPConnection, pipeline: str, topic: str) -> tuple[float, dict[str, Any]]:
    body = json.dumps({"topic": topic, "pipeline": pipeline, "trace": True, "segments": True})
    start = time.perf_counter()
    conn.request("POST", "/rag", body, {"content-type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read())
    ms = (time.perf_counter() - start) * 1000
    if response.status != 200:
        raise RuntimeError(f"/rag answered {response.status} for {topic!r}: {data}")
    return ms, data


def summarise(pipeline: str, samples: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    from ragnarok.judge.proxy import ProxyJudge  # noqa: PLC0415 - loads MiniLM
    from ragnarok.judge.support import support_scores  # noqa: PLC0415

    judge = ProxyJudge()
    latencies = [ms for ms, _ in samples]
    gen_ms = [d["trace"][-1].get("service_ms") or d["trace"][-1]["latency_ms"] for _, d in samples]
    n_sent = n_rep = n_cit = cited_answers = 0
    words: list[int] = []
    labels_all: list[list[str | None]] = []
    notes: dict[str, int] = {}
    for _, data in samples:
        sentences = [s["text"] for s in data["answer"]]
        n_sent += len(sentences)
        n_rep += repeated(sentences)
        words.append(data["response_length"])
        cites = sum(len(s["citations"]) for s in data["answer"])
        n_cit += cites
        cited_answers += cites > 0
        segs = data.get("segments") or {}
        for s in data["answer"]:
            labels_all.append(
                [
                    judge.support(s["text"], (segs.get(data["references"][c]) or {}).get("segment") or "")
                    for c in s["citations"]
                ]
            )
        detail = data["trace"][-1].get("detail") or {}
        for key, value in detail.items():
            if isinstance(value, bool):
                notes[key] = notes.get(key, 0) + int(value)
            elif isinstance(value, int):
                notes[key] = notes.get(key, 0) + value
    flat = [label for sentence in labels_all for label in sentence]
    supported = sum(label in ("full_support", "partial_support") for label in flat)
    return {
        "pipeline": pipeline,
        "answers": len(samples),
        "p50_ms": pct(latencies, 50),
        "p95_ms": pct(latencies, 95),
        "generator_p50_ms": pct(gen_ms, 50),
        "cited_answers": cited_answers / len(samples),
        "repeated_sentences": n_rep / max(1, n_sent),
        "words_mean": statistics.fmean(words),
        "sentences_mean": n_sent / len(samples),
        "citations_per_sentence": n_cit / max(1, n_sent),
        "citations_supported": supported / len(flat) if flat else 0.0,
        "support_precision": support_scores(labels_all)["support_precision"] if labels_all else 0.0,
        "trace_totals": notes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", default="demo")
    ap.add_argument("--limit", type=int, default=50, help="the first N topics")
    ap.add_argument("--pipeline", action="append", help=f"pipelines (default: {PIPELINES})")
    ap.add_argument("--json", type=Path, help="also write the rows and every answer here")
    ap.add_argument("--timeout", type=float, default=600, help="seconds the client waits for one answer")
    ap.add_argument("--no-warmup", action="store_true", help="time the first answer too (model load included)")
    ap.add_argument(
        "--generator-timeout",
        type=float,
        help="every generator's timeout_s (a busy machine: the "
        "embedded model's default 60 s may not be enough to measure it)",
    )
    args = ap.parse_args()
    pipelines = args.pipeline or PIPELINES

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-answers-")))
    ensure_demo_index(Settings(data_dir=data_dir))
    topics = [t.text for t in load_topics(args.topics, ROOT / "topics")][: args.limit]
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    if args.generator_timeout:
        configs = [
            c.model_copy(update={"timeout_s": args.generator_timeout}).model_dump(mode="json")
            for c in Settings().generator_configs().values()
        ]
        env["RAGNAROK_GENERATORS"] = json.dumps(configs)
    loads: list[str] = [Path("/proc/loadavg").read_text().strip()]
    raw: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    with ragnarok_serve(env, output=Path(tempfile.gettempdir()) / "bench-answers-serve.log", cwd=ROOT) as base:
        conn = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]), timeout=args.timeout)
        for pipeline in pipelines:
            if not args.no_warmup:
                ask(conn, pipeline, "warm up the model")
            raw[pipeline] = []
            for i, topic in enumerate(topics, 1):
                raw[pipeline].append(ask(conn, pipeline, topic))
                ms, data = raw[pipeline][-1]
                print(
                    f"{pipeline}: {i}/{len(topics)} {ms:.0f} ms {json.dumps(data['answer'])} "
                    f"{json.dumps(data['trace'][-1].get('detail'))}",
                    file=sys.stderr,
                    flush=True,
                )
            loads.append(Path("/proc/loadavg").read_text().strip())
    rows = [summarise(p, raw[p]) for p in pipelines]
    print(f"topics={len(topics)} load average before/after each pipeline: {' | '.join(loads)}")
    print(
        "| pipeline | answers | p50 ms | p95 ms | generator p50 ms | >=1 citation | repeated sentences | words | "
        "sentences | citations/sentence | citations supported (proxy) | support precision (proxy) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| `{r['pipeline']}` | {r['answers']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
            f"{r['generator_p50_ms']:.0f} | {r['cited_answers']:.0%} | {r['repeated_sentences']:.1%} | "
            f"{r['words_mean']:.0f} | {r['sentences_mean']:.1f} | {r['citations_per_sentence']:.2f} | "
            f"{r['citations_supported']:.0%} | {r['support_precision']:.2f} |"
        )
        if r["trace_totals"]:
            print(f"  trace totals for `{r['pipeline']}`: {r['trace_totals']}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"loadavg": loads, "rows": rows, "answers": {p: [d for _, d in raw[p]] for p in pipelines}}, indent=1
            )
        )


if __name__ == "__main__":
    main()
