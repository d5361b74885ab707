"""Dense encoder backends (PyTorch vs ONNX) on one Lucene index, in one run: speed and ranking quality.

    python bench/bench_encoders.py [--index LUCENE_DIR] [--topics demo] [--qrels topics/qrels.demo.txt]
                                   [--model minilm] [--limit N]

* segments/s: every segment of the index (or the first ``--limit``) encoded by each backend in a process of
  its own (one backend per process, as in the service), each twice in mirrored order (torch, onnx, onnx,
  torch) so that they share the machine's noise; as the dense build does (``Encoder.encode``, batches of 16,
  longest first);
* query encoding p50/p95 (ms), one query at a time;
* top-10 overlap of each backend's flat index against PyTorch's, nDCG@10 of each with ``--qrels``;
* the largest difference between the two backends' vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.evaluation import evaluate, read_qrels  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from ragnarok.stages.retrieve.dense import Encoder  # noqa: E402
from ragnarok.stages.retrieve.dense_build import segments_from_lucene  # noqa: E402

BACKENDS = ("torch", "onnx", "onnx-int8")


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def worker(backend: str, model: str, work: Path) -> None:
    """One backend in a process of its own (no JVM, no other backend): segments, then queries one by one."""
    data = json.loads((work / "texts.json").read_text())
    encoder = Encoder(model, backend=backend)
    encoder.encode(["warm up"], query=True)
    t = time.perf_counter()
    np.save(work / f"{backend}.npy", encoder.encode(data["texts"]))
    elapsed = time.perf_counter() - t
    query_ms, queries = [], []
    for text in data["queries"]:
        t = time.perf_counter()
        queries.append(encoder.encode([text], query=True)[0])
        query_ms.append((time.perf_counter() - t) * 1000)
    np.save(work / f"{backend}-queries.npy", np.array(queries))
    print(json.dumps({"seconds": elapsed, "query_ms": query_ms}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, help="Lucene index directory (default: the demo index)")
    ap.add_argument("--topics", default="demo", help="a topic set name in topics/ or a topic file")
    ap.add_argument("--qrels", type=Path, help="qrels for nDCG@10 (default: topics/qrels.demo.txt for demo)")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--limit", type=int, default=0, help="encode only the first N segments (0: all)")
    ap.add_argument(
        "--passes", type=int, choices=(1, 2), default=2, help="2: each backend twice, in mirrored order; 1: once each"
    )
    ap.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.model, args.work)
        return

    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR") or tempfile.mkdtemp(prefix="bench-enc-"))
    lucene = args.index or ensure_demo_index(Settings(data_dir=data_dir))
    qrels_path = args.qrels or (ROOT / "topics" / "qrels.demo.txt" if args.topics == "demo" else None)
    topics = load_topics(args.topics, ROOT / "topics")
    segments = list(segments_from_lucene(lucene))
    if args.limit:
        segments = segments[: args.limit]
    docids, texts = [d for d, _ in segments], [t for _, t in segments]

    work = Path(tempfile.mkdtemp(prefix="bench-enc-work-"))
    (work / "texts.json").write_text(json.dumps({"texts": texts, "queries": [t.text for t in topics]}))
    vectors, seconds, qvecs, query_ms = {}, dict.fromkeys(BACKENDS, 0.0), {}, {n: [] for n in BACKENDS}
    order = [*BACKENDS, *reversed(BACKENDS)] if args.passes == 2 else list(BACKENDS)
    for name in order:  # each backend in its own process, twice in mirrored order by default
        out = (
            subprocess.run(
                [sys.executable, __file__, "--worker", name, "--model", args.model, "--work", str(work)],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()
        )
        result = json.loads(out[-1])
        seconds[name] += result["seconds"] / args.passes
        query_ms[name] += result["query_ms"]
        vectors[name], qvecs[name] = np.load(work / f"{name}.npy"), np.load(work / f"{name}-queries.npy")
        print(f"{name}: {len(texts) / result['seconds']:.1f} segments/s (loadavg {loadavg()})", flush=True)

    runs, tops = {}, {}
    for name in BACKENDS:
        index = faiss.IndexFlatIP(vectors[name].shape[1])
        index.add(vectors[name])
        scores, ids = index.search(qvecs[name], 100)
        runs[name] = {
            str(t.qid): {docids[i]: float(s) for s, i in zip(scores[r], ids[r]) if i >= 0} for r, t in enumerate(topics)
        }
        tops[name] = [[docids[i] for i in ids[r][:10]] for r in range(len(topics))]
    qrels = read_qrels(qrels_path) if qrels_path else None

    print(
        f"\nindex={lucene} segments={len(texts)} model={args.model} topics={args.topics} ({len(topics)}) "
        f"cpus={os.cpu_count()} loadavg={open('/proc/loadavg').read().split()[:3]}"
    )
    for name in BACKENDS[1:]:
        cosine = (vectors[name] * vectors["torch"]).sum(axis=1)
        print(
            f"{name} vs torch over all vectors: max |difference| {np.abs(vectors[name] - vectors['torch']).max():.2e}"
            f", cosine min {cosine.min():.4f} mean {cosine.mean():.5f}"
        )
    print(
        f"{'backend':<8} {'seg/s':>8} {'x torch':>8} {'query p50':>10} {'query p95':>10} {'top10 overlap':>14}"
        f" {'nDCG@10':>8}"
    )
    for name in BACKENDS:
        overlap = statistics.mean(len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(tops[name], tops["torch"]))
        ndcg = evaluate(qrels, runs[name], ("nDCG@10",))["nDCG@10"] if qrels else float("nan")
        print(
            f"{name:<8} {len(texts) / seconds[name]:8.1f} {seconds['torch'] / seconds[name]:8.2f} "
            f"{pct(query_ms[name], 50):10.2f} {pct(query_ms[name], 95):10.2f} {overlap:14.3f} {ndcg:8.4f}"
        )


if __name__ == "__main__":
    main()
