"""Stress: the ONNX query encoder beside PyTorch models and the JVM, in ONE process.

    python bench/stress_onnx_torch.py [--seconds 120] [--threads 4] [--roles onnx,torch,lucene,rerank]
                                      [--order jvm,torch,onnx,rerank] [--onnx-backend onnx] [--fresh-export]
                                      [--index LUCENE_DIR] [--timing 50] [--lucene-docs locked]

One process loads, in ``--order``: the JVM with a LuceneSearcher over a small Lucene index (built in a temp dir
from a few documents unless ``--index``), the packaged MiniLM on PyTorch (sentence-transformers), the same
MiniLM on ONNX (``--onnx-backend``), and a PyTorch cross-encoder used as a reranker (a full-size MiniLM-shaped
BertForSequenceClassification with random weights, built offline by ragnarok.stages.rerank.tiny). Reference outputs
are computed once; then ``--threads`` threads, each with a role from ``--roles`` (cycled), run for ``--seconds``:

* ``onnx``: one query at a time on the ONNX encoder, each vector checked against PyTorch's (max abs <= --tol);
* ``torch``: a batch of 16 query/document texts on the PyTorch encoder, checked against the reference;
* ``lucene``: a BM25 search, the hits checked against the reference hits, and the first hit's stored document
  read back (``--lucene-docs``: one thread at a time by default; pyjnius is not safe for calls on two objects
  of one class from two threads at once, kivy/pyjnius#563: it then calls a method on the wrong object);
* ``rerank``: the cross-encoder scores the 10 (query, document) pairs, checked against the reference scores;
* ``faiss``: an ONNX query vector searched in a flat FAISS index of 20,000 random vectors (``--order`` must
  name ``faiss``), the top 10 checked against the reference;
* ``turn``: all of the above in turn in one thread (the order of the 2026-11-24 report).

Every exception is recorded with its type, message and traceback. faulthandler is on, so a native crash
prints the Python stacks before the process dies. The last line of stdout is a JSON summary; exit status 0
only when no error and no mismatch was seen. ``--timing N`` first measures N single-query encodes per backend,
alternating, on the otherwise idle process (p50/p95 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

DOCS = [
    ("bread", "Baking bread", "Mix flour, water, yeast and salt, knead the dough and bake it in a hot oven."),
    ("jupiter", "Jupiter", "Jupiter is the largest planet of the solar system, a gas giant with dozens of moons."),
    ("argparse", "argparse", "The argparse module makes it easy to write user-friendly command-line interfaces."),
    ("football", "Football", "A football match has two teams of eleven players who try to kick the ball into a goal."),
    ("violin", "Violin", "The violin is a bowed string instrument with four strings tuned in perfect fifths."),
    ("gzip", "gzip", "The gzip module provides a simple interface to compress and decompress files like GNU gzip."),
    ("sqlite", "sqlite3", "sqlite3 gives a DB-API interface to SQLite databases: connect, cursor, execute."),
    ("everest", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("sleep", "Sleep", "Adults need seven to nine hours of sleep each night to stay healthy."),
    ("bitcoin", "Bitcoin", "Bitcoin is a decentralised digital currency recorded on a public blockchain ledger."),
]
QUERIES = [
    "which planet is the biggest",
    "how many hours should a grown-up rest at night",
    "parse options given on the terminal in Python",
    "what is the tallest peak in the world",
    "how do crypto coins work",
    "compress a file",
    "bake a loaf",
    "string instrument",
    "x",
    "how do I open a database connection and run a query with sqlite3 in python",
    "The gzip module provides a simple interface. " * 60,  # > 256 tokens: truncated
]


def _load_queries() -> list[str]:
    try:
        from ragnarok.core.topics import load_topics

        return QUERIES + [t.text for t in load_topics("demo", ROOT / "topics")]
    except Exception:  # noqa: BLE001 - the fixed queries are enough
        return QUERIES


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.errors: list[dict[str, str]] = []
        self.mismatches: list[dict[str, object]] = []
        self.max_diff: dict[str, float] = {}
        self.ms: dict[str, list[float]] = {}

    def call(self, role: str, ms: float) -> None:
        with self.lock:
            self.calls[role] = self.calls.get(role, 0) + 1
            self.ms.setdefault(role, []).append(ms)

    def diff(self, role: str, value: float) -> None:
        with self.lock:
            self.max_diff[role] = max(self.max_diff.get(role, 0.0), float(value))

    def error(self, role: str, exc: BaseException) -> None:
        entry = {
            "role": role,
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc),
            "traceback": traceback.format_exc(),
        }
        print(
            f"ERROR in {role}: {entry['type']}: {entry['message']}\n{entry['traceback']}", file=sys.stderr, flush=True
        )
        with self.lock:
            self.errors.append(entry)

    def mismatch(self, role: str, what: str) -> None:
        print(f"MISMATCH in {role}: {what}", file=sys.stderr, flush=True)
        with self.lock:
            self.mismatches.append({"role": role, "what": what})


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def build_index(root: Path) -> Path:
    from ragnarok.collection.lucene_index import index_documents

    docs = [{"docid": d, "title": t, "body": b, "url": f"https://example.org/{d}", "headings": ""} for d, t, b in DOCS]
    index_documents(iter(docs), root / "idx")
    return root / "idx"


def main() -> int:  # noqa: C901, PLR0915 - one script, read top to bottom
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument(
        "--roles",
        default="onnx,torch,lucene,rerank",
        help="comma-separated roles given to the threads in turn: onnx, torch, lucene, rerank, faiss, turn",
    )
    ap.add_argument(
        "--order",
        default="jvm,torch,onnx,rerank",
        help="load order of jvm, torch, onnx, rerank, faiss (leave one out to not load it)",
    )
    ap.add_argument(
        "--onnx-backend", default="onnx", help="the ONNX backend under test (onnx-int8 fails --tol by design)"
    )
    ap.add_argument(
        "--fresh-export",
        action="store_true",
        help="export the ONNX model in this process (an empty cache dir) instead of reusing one",
    )
    ap.add_argument("--index", type=Path, help="a Lucene index (default: a 10-document one built in a temp dir)")
    ap.add_argument("--timing", type=int, default=0, help="single-query encodes per backend timed first")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--lucene-docs",
        choices=("locked", "concurrent", "off"),
        default="locked",
        help="how lucene threads read back a hit's stored document: one thread at a time (default), "
        "from every thread at once (pyjnius then mixes up objects, kivy/pyjnius#563), or not",
    )
    ap.add_argument("--fixed-queries", action="store_true", help="only the 11 fixed queries, not the demo topics")
    args = ap.parse_args()

    faulthandler.enable()
    tmp = Path(tempfile.mkdtemp(prefix="stress-onnx-"))
    cache_dir = tmp / "cache" if args.fresh_export else None
    from ragnarok.core.settings import get_settings
    from ragnarok.stages.retrieve.dense import Encoder, resolve_model

    if cache_dir is None:
        cache_dir = get_settings().encoder_cache_dir
    queries = QUERIES if args.fixed_queries else _load_queries()
    texts = [f"{t}\n{b}" for _, t, b in DOCS]
    stats = Stats()
    loaded: dict[str, object] = {}
    started = time.perf_counter()
    order = [x.strip() for x in args.order.split(",") if x.strip()]
    for item in order:
        t0 = time.perf_counter()
        if item == "jvm":
            from ragnarok.stages.retrieve.anserini import LuceneSearcher

            index = args.index or build_index(tmp)
            searcher = LuceneSearcher(str(index))
            searcher.search("warm up", 10)
            loaded["lucene"] = searcher
        elif item == "torch":
            from ragnarok.stages.embed.backends import load_backend

            enc = Encoder("minilm", backend="torch")
            enc._st = load_backend(resolve_model("minilm"), "torch", cache_dir)  # noqa: SLF001
            enc.encode(["warm up"], query=True)
            loaded["torch"] = enc
        elif item == "onnx":
            from ragnarok.stages.embed.backends import load_backend

            enc = Encoder("minilm", backend=args.onnx_backend)
            enc._st = load_backend(resolve_model("minilm"), args.onnx_backend, cache_dir)  # noqa: SLF001
            enc.encode(["warm up"], query=True)
            loaded["onnx"] = enc
        elif item == "rerank":
            from ragnarok.stages.rerank.cross_encoder import CrossEncoderReranker
            from ragnarok.stages.rerank.tiny import build_tiny_cross_encoder

            ce = build_tiny_cross_encoder(tmp / "ce", layers=6, hidden=384, heads=12, seed=1)
            reranker = CrossEncoderReranker(checkpoint=str(ce), allow_downloads=False, device="cpu", max_length=256)
            reranker.scores("warm up", texts[:2])
            loaded["rerank"] = reranker
        elif item == "faiss":  # what a dense retriever does with each query vector (OpenMP beside torch's)
            import faiss

            rng = np.random.default_rng(args.seed)
            base = rng.standard_normal((20_000, 384)).astype(np.float32)
            base /= np.linalg.norm(base, axis=1, keepdims=True)
            flat = faiss.IndexFlatIP(384)
            flat.add(base)
            loaded["faiss"] = flat
        else:
            raise SystemExit(f"unknown item in --order: {item}")
        print(f"loaded {item} in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    print(f"onnx backend: {getattr(loaded.get('onnx'), 'backend_name', None)}", file=sys.stderr, flush=True)

    # reference outputs, computed once, one at a time
    ref_q = ref_t = None
    if "torch" in loaded:
        ref_q = np.stack([loaded["torch"].encode([q], query=True)[0] for q in queries])
        ref_t = np.stack([loaded["torch"].encode([t])[0] for t in texts])
    ref_hits = {q: [h.docid for h in loaded["lucene"].search(q, 10)] for q in queries} if "lucene" in loaded else {}
    ref_faiss = None
    if "faiss" in loaded and ref_q is not None:
        ref_faiss = loaded["faiss"].search(ref_q, 10)[1]
    ref_scores = {q: loaded["rerank"].scores(q, texts) for q in queries[:12]} if "rerank" in loaded else {}
    if ref_q is not None and "onnx" in loaded:
        first = np.stack([loaded["onnx"].encode([q], query=True)[0] for q in queries])
        stats.diff("onnx-reference", np.abs(first - ref_q).max())

    timing: dict[str, dict[str, float | None]] = {}
    if args.timing and "torch" in loaded and "onnx" in loaded:
        ms: dict[str, list[float]] = {"torch": [], "onnx": []}
        for n in range(args.timing):
            q = queries[n % len(queries)]
            for name in ("onnx", "torch") if n % 2 else ("torch", "onnx"):
                t0 = time.perf_counter()
                loaded[name].encode([q], query=True)
                ms[name].append((time.perf_counter() - t0) * 1000)
        timing = {k: {"p50": pct(v, 0.5), "p95": pct(v, 0.95), "n": len(v)} for k, v in ms.items()}
        print(f"quiet single-query encode ms: {json.dumps(timing)}", file=sys.stderr, flush=True)

    stop = threading.Event()
    doc_lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def check_vec(role: str, got: np.ndarray, want: np.ndarray, what: str) -> None:
        diff = float(np.abs(got - want).max())
        stats.diff(role, diff)
        if not diff <= args.tol:  # NaN counts as a mismatch
            stats.mismatch(role, f"{what}: max abs diff {diff:.3g}")

    def do(role: str, rng: random.Random) -> None:
        t0 = time.perf_counter()
        if role == "onnx":
            i = rng.randrange(len(queries))
            got = loaded["onnx"].encode([queries[i]], query=True)[0]
            if ref_q is not None:
                check_vec(role, got, ref_q[i], f"query {i}")
        elif role == "torch":
            rows = [rng.randrange(len(queries) + len(texts)) for _ in range(16)]
            batch = [queries[r] if r < len(queries) else texts[r - len(queries)] for r in rows]
            got = loaded["torch"].encode(batch)
            for k, r in enumerate(rows):
                want = ref_q[r] if r < len(queries) else ref_t[r - len(queries)]
                check_vec(role, got[k], want, f"row {r}")
        elif role == "lucene":
            q = queries[rng.randrange(len(queries))]
            hits = [h.docid for h in loaded["lucene"].search(q, 10)]
            if hits != ref_hits[q]:
                stats.mismatch(role, f"hits of {q[:40]!r}: {hits} != {ref_hits[q]}")
            if hits and args.lucene_docs != "off":
                with doc_lock if args.lucene_docs == "locked" else contextlib.nullcontext():
                    doc = loaded["lucene"].doc(hits[0])
                    docid = None if doc is None else doc.docid()
                if docid != hits[0]:
                    stats.mismatch(role, f"doc {hits[0]}: read back {docid}")
        elif role == "faiss":
            i = rng.randrange(len(queries))
            vec = loaded["onnx"].encode([queries[i]], query=True) if "onnx" in loaded else ref_q[i : i + 1]
            ids = loaded["faiss"].search(vec, 10)[1][0]
            if ref_faiss is not None and list(ids) != list(ref_faiss[i]):
                stats.mismatch(role, f"faiss top-10 of query {i}: {list(ids)} != {list(ref_faiss[i])}")
        elif role == "rerank":
            q = list(ref_scores)[rng.randrange(len(ref_scores))]
            got = loaded["rerank"].scores(q, texts)
            diff = float(np.abs(got - ref_scores[q]).max())
            stats.diff(role, diff)
            if not diff <= 1e-4:
                stats.mismatch(role, f"scores of {q[:40]!r}: max abs diff {diff:.3g}")
        else:
            raise ValueError(role)
        stats.call(role, (time.perf_counter() - t0) * 1000)

    def worker(role: str, seed: int) -> None:
        rng = random.Random(seed)
        parts = [r for r in ("onnx", "torch", "lucene", "rerank", "faiss") if r in loaded] if role == "turn" else [role]
        while not stop.is_set() and time.monotonic() < deadline:
            for part in parts:
                try:
                    do(part, rng)
                except Exception as exc:  # noqa: BLE001 - every error is the finding
                    stats.error(part, exc)

    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    roles = [r for r in roles if r == "turn" or r in loaded]
    threads = (
        [
            threading.Thread(
                target=worker, args=(roles[n % len(roles)], args.seed + n), daemon=True, name=f"stress-{n}"
            )
            for n in range(args.threads)
        ]
        if roles
        else []
    )
    t_start = time.perf_counter()
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.perf_counter() - t_start
    onnx_enc = loaded.get("onnx")
    if onnx_enc is not None and hasattr(onnx_enc._st, "close"):  # noqa: SLF001
        onnx_enc._st.close()  # noqa: SLF001
    summary = {
        "ok": not stats.errors and not stats.mismatches,
        "order": order,
        "roles": [roles[n % len(roles)] for n in range(args.threads)] if roles else [],
        "onnx_backend": args.onnx_backend,
        "fresh_export": args.fresh_export,
        "lucene_docs": args.lucene_docs,
        "seconds": round(elapsed, 1),
        "total_s": round(time.perf_counter() - started, 1),
        "calls": stats.calls,
        "errors": len(stats.errors),
        "mismatches": len(stats.mismatches),
        "error_types": sorted({f"{e['type']}: {e['message'][:200]}" for e in stats.errors}),
        "max_abs_diff": {k: float(f"{v:.3g}") for k, v in stats.max_diff.items()},
        "stress_ms_p50": {k: pct(v, 0.5) for k, v in stats.ms.items()},
        "quiet_query_ms": timing,
        "loadavg": os.getloadavg(),
    }
    print(json.dumps(summary), flush=True)
    if "lucene" in loaded:
        loaded["lucene"].close()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
