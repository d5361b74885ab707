"""How every cost grows with the collection: V2.1-style collections of each size, built, served and queried.

    python bench/bench_scale.py --sizes 10000,100000[,1000000] [--quick] [--seed N] --json OUT
        [--plot OUT.png] [--work DIR] [--keep] [--threads T] [--queries N] [--rag-queries N] [--data-dir DIR]
        [--minilm-up-to N] [--real-sample N]

Per size, in one run (bench/scale_corpus.py makes the collection, bench/scale_measure.py measures):

1. a V2.1-style segmented collection of that many segments (real docid shape, overlapping 10-sentence windows,
   Zipfian vocabulary sampled from the text shipped here; deterministic with ``--seed``), one JSONL file that
   carries both V2.1's fields and JsonCollection's ``id``/``contents``;
2. ``ragnarok index`` on it (V2.1 segments indexed as they are where ragnarok can, else ``--collection
   JsonCollection``: ``index_command`` says which; ``index_segments_per_s``, ``build_peak_rss_mb``: the summed
   RSS of the build's process tree, JVM included) and pyserini's indexer on the same file, same threads
   (``pyserini_segments_per_s``; its index is then removed);
3. vectors: real MiniLM vectors at 10k, and at 100k unless ``--quick`` (``--minilm-up-to N``); past that
   synthetic ones made from real MiniLM vectors of real text (the demo index's 6,282, built in the data dir if
   missing: :func:`scale_measure.demo_bases`; mixtures of two plus noise, normalised):
   ``"vectors": "minilm"|"synthetic"`` says which, ``minilm_segments_per_s`` how fast MiniLM encoded here;
4. the dense index, default kind (``write_dense_index(..., kind="auto")``), where ``ragnarok serve`` finds it
   for the index (``<lucene>.dense/minilm``); at the smallest size also ``shards_identical``: exact search over
   4 shards ranks the real topics as one exact index does;
5. ``ragnarok serve`` (its own process, a free loopback port, the index configured as ``RAGNAROK_INDEXES`` and
   the default index), after its start-up work: ``POST /v1/retrieve`` k=100 with each of the 301 TREC RAG 2024
   topics once after 20 warm-up queries (TREC-RAGgy dev topics: no cache holds a timed query), BM25 (``bm25_p50_ms``/``bm25_p95_ms``) then ``dense:minilm``
   (``dense_p50_ms``; ``dense_recall_at_100``: its top 100 against exact search on the same vectors with
   faiss IndexFlatIP in this process, for 100 in-domain queries, a sentence of each of 100 segments
   (:func:`scale_measure.collection_queries`), and ``dense_recall_at_100_trec`` for the TREC topics, which are
   far from every segment of a synthetic collection: HNSW's recall on such out-of-domain queries is lower); ``POST /rag`` without a pipeline (the ``offline`` preset) on
   ``--rag-queries`` topics (``rag_offline_p50_ms``; ``rag_pipeline`` names what ran); then
   ``service_rss_mb``: the server's process tree;
6. ``disk_mb`` of each index (lucene, pyserini, dense, sentences: the dense index's sentence store, if any).

The JSON: ``{"sizes": {"10000": {...}, ...}, "shards_identical": ..., "machine": {...}, "ratios": {...},
"goals": [...]}`` (written after each size, so a run cut short keeps what it measured); the goals this run's
sizes allow are printed with PASS/FAIL. Free disk is checked first against an estimate; the work directory is
removed at the end unless ``--keep``; Ctrl-C or SIGTERM stops the servers it started.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))

import scale_measure as sm  # noqa: E402
from scale_corpus import Vocabulary, load_queries, real_passages, write_collection  # noqa: E402
from servers import ragnarok_serve, wait_until_idle  # noqa: E402

MINILM_UP_TO = 100_000  # real vectors up to this size (10k only with --quick)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="segments per collection, comma-separated")
    ap.add_argument("--quick", action="store_true", help="real MiniLM vectors at 10k only (synthetic past it)")
    ap.add_argument(
        "--minilm-up-to",
        type=int,
        help="real MiniLM vectors for sizes up to this many segments "
        f"(default {MINILM_UP_TO:,}; 10,000 with --quick; 0: synthetic vectors everywhere)",
    )
    ap.add_argument(
        "--real-sample",
        type=int,
        default=10_000,
        help="recall's in-domain queries (sizes with real "
        "MiniLM vectors) are sentences of segments drawn from the collection's first N",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, required=True, help="where to write the results")
    ap.add_argument("--plot", type=Path, help="a PNG of latency and memory against collection size")
    ap.add_argument(
        "--work", type=Path, help="where the run's work directory is made (default: the system's temporary directory)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the run's work directory (every size's files)")
    ap.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 16), help="indexing threads")
    ap.add_argument("--queries", type=int, default=None, help="search with the first N topics (default: all 301)")
    ap.add_argument("--rag-queries", type=int, default=100, help="topics posted to /rag per size")
    ap.add_argument(
        "--data-dir",
        type=Path,
        help="the server's RAGNAROK_DATA_DIR (default: in the work "
        "directory; give one to reuse its demo index, which the server builds on first start)",
    )
    args = ap.parse_args(argv)
    try:
        args.sizes = sorted({int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        ap.error(f"--sizes takes segment counts separated by commas, got {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 100:
        ap.error("--sizes: each size at least 100 segments")
    if args.minilm_up_to is None:
        args.minilm_up_to = 10_000 if args.quick else MINILM_UP_TO
    if args.real_sample < 100:
        ap.error("--real-sample: at least 100 segments")
    return args


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: the servers and the work directory are cleaned up


def _on_signals() -> None:
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _on_signals()
    try:
        need = sm.check_disk(args.work or Path(tempfile.gettempdir()), args.sizes, args.keep)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.work))  # only what this run made is removed
    print(f"# {sm.machine()}; work {work} (~{need / 1e9:.1f} GB needed)", flush=True)
    result: dict[str, Any] = {
        "sizes": {},
        "shards_identical": None,
        "machine": sm.machine(),
        "seed": args.seed,
        "threads": args.threads,
        "queries": "TREC RAG 2024 test topics",
    }
    try:
        run(args, work, result)
    except KeyboardInterrupt:
        print("interrupted: servers stopped", file=sys.stderr)
        return 130
    except Exception:
        if (log := work / "serve.log").exists():  # the server's own words, before the work directory goes
            print(
                "the server's last lines:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:]),
                file=sys.stderr,
            )
        raise
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def run(args: argparse.Namespace, work: Path, result: dict[str, Any]) -> None:
    queries = load_queries()[: args.queries]
    args.warmup = load_queries(name="topics.rag24.raggy-dev.txt")[:20]
    vocab = Vocabulary.from_text(real_passages())
    for size in args.sizes:
        measures = measure_size(args, work, size, vocab, queries, result)
        result["sizes"][str(size)] = measures
        result["machine"]["load_1m_end"] = round(os.getloadavg()[0], 2)
        result["ratios"], checks = sm.goals(result["sizes"])
        result["goals"] = [{"goal": g, "value": v, "bound": b, "pass": p} for g, v, b, p in checks]
        args.json.write_text(json.dumps(result, indent=1))
        print(json.dumps({str(size): measures}), flush=True)
    for goal, value, bound, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {goal} = {value} ({bound})")
    if result["shards_identical"] is not None:
        print(f"{'PASS' if result['shards_identical'] else 'FAIL'}  shards_identical")
    if args.plot:
        plot(result["sizes"], args.plot)


def measure_size(
    args: argparse.Namespace, work: Path, size: int, vocab: Vocabulary, queries: list[str], result: dict[str, Any]
) -> dict[str, Any]:
    here = work / str(size)
    (here / "collection").mkdir(parents=True, exist_ok=True)
    phases: dict[str, float] = {}
    m: dict[str, Any] = {"segments": size, "phases_s": phases}

    def phase(name: str, start: float) -> None:
        phases[name] = round(time.perf_counter() - start, 1)
        print(f"  {size:>9,}  {name:<16} {phases[name]:8.1f} s  (load {os.getloadavg()[0]:.1f})", flush=True)

    t = time.perf_counter()
    collection = here / "collection" / "segments.jsonl"
    m["collection"] = write_collection(collection, size, args.seed, vocab)
    m["disk_mb"] = {"collection": round(sm.disk_mb(collection), 1)}
    phase("generate", t)

    lucene = here / "lucene"
    t = time.perf_counter()
    built = sm.ragnarok_index(collection, lucene, args.threads)
    phase("ragnarok index", t)
    m.update(
        index_segments_per_s=round(size / built["s"], 1),
        build_peak_rss_mb=round(built["peak_rss_mb"], 1),
        index_cpu_s=round(built["cpu_s"], 1),
        index_command=built["command"],
    )
    m["disk_mb"]["lucene"] = round(sm.disk_mb(lucene), 1)
    t = time.perf_counter()
    theirs = sm.pyserini_index(collection.parent, here / "pyserini", args.threads)
    phase("pyserini index", t)
    m.update(
        pyserini_segments_per_s=round(size / theirs["s"], 1),
        pyserini_peak_rss_mb=round(theirs["peak_rss_mb"], 1),
        pyserini_cpu_s=round(theirs["cpu_s"], 1),
    )
    m["disk_mb"]["pyserini"] = round(sm.disk_mb(here / "pyserini"), 1)
    shutil.rmtree(here / "pyserini", ignore_errors=True)

    t = time.perf_counter()
    minilm = size <= args.minilm_up_to
    if minilm:
        vectors = sm.minilm_vectors(collection, here / "vectors.npy", size)
        m["minilm_segments_per_s"] = round(size / (time.perf_counter() - t), 1)
    else:  # made from real MiniLM vectors of real text (sm.demo_bases says why not of this collection's)
        bases, args.base_queries = sm.demo_bases(args.data_dir or work / "data", seed=args.seed)
        vectors = sm.synthetic_vectors(bases, here / "vectors.npy", size, args.seed)
    m["vectors"] = "minilm" if minilm else "synthetic"
    phase("vectors", t)
    docids = sm.docids_of(collection)
    dense = Path(f"{lucene}.dense") / sm.MODEL
    try:
        t = time.perf_counter()
        sm.write_dense(vectors, docids, dense, lucene)
        phase("dense build", t)
        m["dense_kind"] = json.loads((dense / "meta.json").read_text()).get("kind")
        m["disk_mb"]["dense"] = round(sm.disk_mb(dense) - sm.disk_mb(dense / "sentences"), 1)
        m["disk_mb"]["sentences"] = round(sm.disk_mb(dense / "sentences"), 1)
    except Exception as exc:  # noqa: BLE001 - the bench goes on with BM25 and says why dense is missing
        m["dense_error"] = f"{type(exc).__name__}: {exc}"
        print(f"  dense index not built: {m['dense_error']}", file=sys.stderr, flush=True)
    if result["shards_identical"] is None and "dense_error" not in m:
        t = time.perf_counter()
        try:
            result["shards_identical"] = sm.shards_identical(vectors, docids, lucene, here, queries)
        except Exception as exc:  # noqa: BLE001
            result["shards_error"] = f"{type(exc).__name__}: {exc}"
            print(f"  shards_identical not measured: {result['shards_error']}", file=sys.stderr, flush=True)
        _on_signals()  # the JVM that check started replaced the handlers: Ctrl-C and SIGTERM clean up again
        phase("shards check", t)

    m["recall_queries"] = (
        sm.collection_queries(collection, min(size, args.real_sample), seed=args.seed) if minilm else args.base_queries
    )
    serve_and_query(args, work, m, lucene, queries, vectors, docids, phase)
    m["recall_queries"] = len(m["recall_queries"])
    if not args.keep:
        shutil.rmtree(here, ignore_errors=True)
    return m


def serve_and_query(
    args: argparse.Namespace,
    work: Path,
    m: dict[str, Any],
    lucene: Path,
    queries: list[str],
    vectors: np.ndarray,
    docids: list[str],
    phase: Any,
) -> None:
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(args.data_dir or work / "data"),
        "RAGNAROK_INDEXES": json.dumps({"bench": str(lucene)}),
        "RAGNAROK_DEFAULT_INDEX": "bench",
    }
    started: list = []
    t = time.perf_counter()
    with ragnarok_serve(env, output=work / "serve.log", start_timeout_s=900, started=started) as base:
        pid = started[0].pid
        client = sm.Client(int(base.rsplit(":", 1)[1]))
        wait_until_idle(pid)
        phase("serve start", t)

        t = time.perf_counter()
        times, _ = sm.timed_queries(
            lambda q: client.post("/v1/retrieve", {"query": q, "k": sm.K, "retriever": "bm25"}), queries, args.warmup
        )
        m.update(bm25_p50_ms=round(sm.pct(times, 50), 2), bm25_p95_ms=round(sm.pct(times, 95), 2))
        phase("bm25 queries", t)
        if "dense_error" not in m:
            t = time.perf_counter()
            times, answers = sm.timed_queries(
                lambda q: client.post("/v1/retrieve", {"query": q, "k": sm.K, "retriever": f"dense:{sm.MODEL}"}),
                queries,
                args.warmup,
            )
            m.update(dense_p50_ms=round(sm.pct(times, 50), 2), dense_p95_ms=round(sm.pct(times, 95), 2))
            m["dense_recall_at_100_trec"] = round(recall(answers, queries, vectors, docids), 4)
            near = m["recall_queries"]  # sentences of the collection: queries near their documents
            _, answers = sm.timed_queries(
                lambda q: client.post("/v1/retrieve", {"query": q, "k": sm.K, "retriever": f"dense:{sm.MODEL}"}),
                near,
                [],
            )
            m["dense_recall_at_100"] = round(recall(answers, near, vectors, docids), 4)
            phase("dense queries", t)
        t = time.perf_counter()
        topics = queries[: args.rag_queries]
        times, answers = sm.timed_queries(lambda q: client.post("/rag", {"topic": q}), topics, args.warmup[:5])
        m["rag_offline_p50_ms"] = round(sm.pct(times, 50), 2)
        m["rag_offline_p95_ms"] = round(sm.pct(times, 95), 2)
        pipelines = {({k.lower(): v for k, v in h.items()}).get("ragnarok-pipeline") for _, _, h in answers}
        m["rag_pipeline"] = ",".join(sorted(map(str, pipelines)))
        phase("rag queries", t)
        m["service_rss_mb"] = round(sm.tree_rss_mb(pid), 1)
        m["service_rss_anon_mb"] = round(sm.tree_rss_mb(pid, "RssAnon"), 1)  # the rest: mapped index files
        m["service_rss_file_mb"] = round(sm.tree_rss_mb(pid, "RssFile"), 1)


def recall(answers: list, queries: list[str], vectors: np.ndarray, docids: list[str]) -> float:
    """Mean overlap of the service's dense top 100 with exact search on the same vectors."""
    from ragnarok.stages.retrieve.dense import shared_encoder  # noqa: PLC0415

    exact = sm.exact_top(vectors, shared_encoder(sm.MODEL).encode(queries, query=True))
    found = [{c["docid"] for c in body["candidates"]} for _, body, _ in answers]
    return float(np.mean([len(f & {docids[i] for i in row if i >= 0}) / sm.K for f, row in zip(found, exact)]))


def plot(sizes: dict[str, dict[str, Any]], out: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    xs = sorted(int(s) for s in sizes)
    fig, (lat, mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label in (
        ("bm25_p50_ms", "BM25 p50"),
        ("bm25_p95_ms", "BM25 p95"),
        ("dense_p50_ms", "dense p50"),
        ("rag_offline_p50_ms", "/rag offline p50"),
    ):
        points = [(x, sizes[str(x)][key]) for x in xs if sizes[str(x)].get(key) is not None]
        if points:
            lat.plot(*zip(*points), marker="o", label=label)
    for key, label in (
        ("service_rss_mb", "service RSS"),
        ("build_peak_rss_mb", "Lucene build peak RSS"),
        ("pyserini_peak_rss_mb", "pyserini build peak RSS"),
    ):
        points = [(x, sizes[str(x)][key]) for x in xs if sizes[str(x)].get(key) is not None]
        if points:
            mem.plot(*zip(*points), marker="o", label=label)
    for ax, ylabel in ((lat, "milliseconds per query"), (mem, "MiB")):
        ax.set_xscale("log")
        ax.set_xlabel("segments")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    lat.set_yscale("log")  # BM25's milliseconds beside /rag's hundreds
    lat.set_title("latency")
    mem.set_title("memory")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
