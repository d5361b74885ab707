"""The measurements of bench/bench_scale.py: builds (timed, peak RSS of the process tree), vectors, the dense
index, queries against a running ``ragnarok serve``, memory and disk, and the scale goals' ratios."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dedup import measured, ragnarok  # noqa: E402 - bench/ is on sys.path when run as a script
from bench_index import PYSERINI_CLI  # noqa: E402

MODEL = "minilm"
DIM = 384
K = 100
#: Disk per segment while one size is measured (collection 3.8 KB, two Lucene indexes 2 x ~4 KB, vectors and
#: dense index 2 x 1.5 KB, a sentence store ~4.5 KB, measured at 10k), with room to spare; plus a fixed part
#: (the demo index the server builds, the server's data directory).
DISK_PER_SEGMENT = 24_000
DISK_FIXED = 1_000_000_000


# -- the machine, memory, disk ---------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    mem = _meminfo()
    return {
        "cores": os.cpu_count(),
        "ram_gb": round(mem.get("MemTotal", 0) / 2**20, 1),
        "available_gb": round(mem.get("MemAvailable", 0) / 2**20, 1),
        "load_1m": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
    }


def _meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        out[name] = int(rest.split()[0])
    return out


def tree_rss_mb(pid: int, field: str = "") -> float:
    """The summed resident sets (MiB) of process ``pid`` and all its descendants, from /proc; ``field``
    ``RssAnon`` or ``RssFile``: that part of it (/proc/PID/status), anonymous memory or mapped files' pages."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            if field:
                line = next(x for x in Path(f"/proc/{p}/status").read_text().splitlines() if x.startswith(field))
                total += int(line.split()[1]) * 1024
            else:
                total += int((Path(f"/proc/{p}/statm")).read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, StopIteration):
            continue
    return total / 2**20


def disk_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    if path.is_file():
        return path.stat().st_size / 1e6
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def check_disk(work: Path, sizes: list[int], keep: bool) -> int:
    """The bytes the run needs (every size's files with ``keep``, else the largest size's); raises
    ``OSError`` with the estimate when ``work``'s file system has less free."""
    need = DISK_FIXED + DISK_PER_SEGMENT * (sum(sizes) if keep else max(sizes))
    existing = next(p for p in (work, *work.parents) if p.exists())  # nothing is created before the check
    free = shutil.disk_usage(existing).free
    if free < need:
        raise OSError(
            f"not enough free disk in {work}: the sizes {','.join(map(str, sizes))} need about "
            f"{need / 1e9:.1f} GB ({DISK_PER_SEGMENT / 1000:.0f} KB per segment"
            f"{', all sizes kept (--keep)' if keep else ''}), {free / 1e9:.1f} GB free"
        )
    return need


# -- builds ----------------------------------------------------------------------------------------------------


def index_command(collection: Path, out: Path, threads: int) -> list[str]:
    """``ragnarok index FILE OUT``: V2.1 segments indexed as they are, by the resumable sharded build, where
    this ragnarok has it (``ragnarok.collection.jsonl.is_segmented``); else ``--collection JsonCollection``
    (the records carry Anserini's ``id``/``contents`` beside V2.1's fields)."""
    from ragnarok.collection import jsonl  # noqa: PLC0415

    if hasattr(jsonl, "is_segmented"):
        return ["index", str(collection), str(out), "--threads", str(threads)]
    return ["index", "--collection", "JsonCollection", str(collection.parent), str(out), "--threads", str(threads)]


def ragnarok_index(collection: Path, out: Path, threads: int) -> dict[str, Any]:
    """``ragnarok index`` on the collection file (:func:`index_command`), timed, with its tree's peak RSS."""
    cmd = index_command(collection, out, threads)
    m = measured(ragnarok(*cmd))
    return {"s": m[0], "peak_rss_mb": m.rss_sum, "cpu_s": m.cpu, "command": "ragnarok " + " ".join(cmd)}


def pyserini_index(collection_dir: Path, out: Path, threads: int) -> dict[str, float]:
    """pyserini's own indexer, ``python -m pyserini.index.lucene --collection JsonCollection ... --threads T
    --storePositions --storeDocvectors --storeRaw``: the same ``IndexCollection.main`` call (bench_index.py
    says why it is not run through ``-m``)."""
    args = [
        "-collection",
        "JsonCollection",
        "-input",
        str(collection_dir),
        "-index",
        str(out),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        str(threads),
        "-storePositions",
        "-storeDocvectors",
        "-storeRaw",
    ]
    m = measured([sys.executable, "-c", PYSERINI_CLI, *args])
    return {"s": m[0], "peak_rss_mb": m.rss_sum, "cpu_s": m.cpu}


# -- vectors ---------------------------------------------------------------------------------------------------


def records(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def demo_bases(data_dir: Path, n_queries: int = 100, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Real MiniLM vectors of real text, what synthetic vectors are made from: the demo index's dense vectors
    (6,282 segments of the Python documentation; built in ``data_dir`` if missing), and ``n_queries`` in-domain
    queries near them: a prose sentence of each of ``n_queries`` demo segments. The bench's own collection is
    word salad drawn from one vocabulary: its MiniLM vectors crowd together (every segment is about everything),
    which no real collection's do, and HNSW's recall on them says nothing about V2.1's."""
    import faiss  # noqa: PLC0415

    from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415
    from ragnarok.core.settings import Settings  # noqa: PLC0415
    from ragnarok.stages.generate.extractive import prose_sentences  # noqa: PLC0415
    from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense import dense_dir  # noqa: PLC0415

    lucene = ensure_demo_index(Settings(data_dir=data_dir), 2, MODEL)
    index = faiss.read_index(str(dense_dir(lucene, MODEL) / "index.faiss"))
    vectors = index.reconstruct_n(0, index.ntotal)
    searcher, found = LuceneSearcher(str(lucene)), []
    for row in np.random.default_rng(seed).permutation(searcher.num_docs):
        sentences = prose_sentences(json.loads(searcher.doc(int(row)).raw())["segment"])
        found += [s for s in sentences if 6 <= len(s.split()) <= 30][:1]
        if len(found) == n_queries:
            break
    return np.ascontiguousarray(vectors, dtype=np.float32), found


def collection_queries(path: Path, among: int, n: int = 100, seed: int = 0) -> list[str]:
    """``n`` in-domain queries: one sentence (6-30 words) of each of ``n`` segments drawn from the collection's
    first ``among`` (those whose real vectors the synthetic ones are made from). The TREC topics are far from
    every segment of a synthetic collection (their best cosine is about 0.2), which real V2.1 segments are not;
    a query near its documents is what recall against exact search means for a real collection."""
    rng = np.random.default_rng(seed)
    wanted = set(rng.choice(among, size=min(n * 3, among), replace=False).tolist())
    found: list[str] = []
    for row, record in enumerate(records(path)):
        if row >= among or len(found) >= n:
            break
        if row in wanted:
            found += [s.strip() for s in record["segment"].split(". ") if 6 <= len(s.split()) <= 30][:1]
    return found


def docids_of(path: Path) -> list[str]:
    return [r["docid"] for r in records(path)]


def minilm_vectors(collection: Path, out: Path, size: int, batch: int = 256) -> np.ndarray:
    """Real MiniLM vectors of the first ``size`` segments (title, newline, segment: what ragnarok's dense build
    encodes), written to ``out`` (.npy, memory-mapped) batch by batch, with a progress bar and an ETA."""
    from ragnarok.runtime.progress import progress  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense import shared_encoder  # noqa: PLC0415

    encoder = shared_encoder(MODEL)
    vectors = np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=(size, DIM))
    done, texts = 0, []
    with progress(size, "MiniLM vectors", unit="segment") as bar:
        for r in records(collection):
            texts.append("\n".join(p for p in (r["title"], r["segment"]) if p))
            if len(texts) == batch or done + len(texts) == size:
                vectors[done : done + len(texts)] = encoder.encode(texts)
                bar.update(len(texts))
                done, texts = done + len(texts), []
                if done == size:
                    break
    vectors.flush()
    return vectors


def synthetic_vectors(real: np.ndarray, out: Path, size: int, seed: int, chunk: int = 65_536) -> np.ndarray:
    """``size`` vectors made from real ones: each a random mix of two real vectors (weight 0.55-1 on the first)
    plus Gaussian noise (0.01 per dimension, 0.2 in norm at 384), normalised, so neighbourhoods look like real embeddings'."""
    rng = np.random.default_rng(seed)
    vectors = np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=(size, real.shape[1]))
    base = np.asarray(real, dtype=np.float32)
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        a, b = base[rng.integers(len(base), size=n)], base[rng.integers(len(base), size=n)]
        w = rng.uniform(0.55, 1.0, size=(n, 1)).astype(np.float32)
        v = w * a + (1 - w) * b + rng.normal(0, 0.01, size=a.shape).astype(np.float32)
        vectors[start : start + n] = v / np.linalg.norm(v, axis=1, keepdims=True)
    vectors.flush()
    return vectors


def write_dense(
    vectors: np.ndarray, docids: list[str], out_dir: Path, lucene_dir: Path, kind: str = "auto", shards: int = 1
) -> Any:
    """The dense index, written by the dense build's own interface (the one place the bench calls it)."""
    from ragnarok.stages.retrieve.dense_build import write_dense_index  # noqa: PLC0415

    return write_dense_index(vectors, docids, out_dir, model=MODEL, kind=kind, shards=shards, lucene_dir=lucene_dir)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int = K) -> np.ndarray:
    """Exact inner-product top ``k`` (row numbers) of each query: faiss IndexFlatIP, in this process."""
    import faiss  # noqa: PLC0415

    index = faiss.IndexFlatIP(vectors.shape[1])
    for start in range(0, len(vectors), 262_144):
        index.add(np.ascontiguousarray(vectors[start : start + 262_144]))
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), k)[1]


def same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float = 1e-5) -> bool:
    """Two rankings are the same when their docids are, in order, except within a run of equal scores."""
    if len(a) != len(b) or any(abs(x[1] - y[1]) > tol for x, y in zip(a, b)):
        return False
    groups: dict[float, tuple[set, set]] = {}
    for (da, sa), (db, _) in zip(a, b):
        key = round(sa / tol)
        ga, gb = groups.setdefault(key, (set(), set()))
        ga.add(da)
        gb.add(db)
    return all(ga == gb for ga, gb in groups.values())


def shards_identical(vectors: np.ndarray, docids: list[str], lucene_dir: Path, root: Path, queries: list[str]) -> bool:
    """Exact search over 4 shards ranks every query as one exact index does (the dense build's ``shards``)."""
    from ragnarok.stages.retrieve.dense import DenseRetriever  # noqa: PLC0415

    rankings = []
    for shards in (1, 4):
        out = root / f"flat-{shards}-shards"
        write_dense(vectors, docids, out, lucene_dir, kind="flat", shards=shards)
        retriever = DenseRetriever(f"dense:{MODEL}", str(lucene_dir), MODEL, str(out))
        rankings.append([retriever.search(q, K) for q in queries])
        shutil.rmtree(out, ignore_errors=True)
    return all(same_ranking(a, b) for a, b in zip(*rankings))


# -- queries against the server --------------------------------------------------------------------------------


class Client:
    """One keep-alive HTTP connection to the server (reopened when uvicorn closed an idle one)."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def post(self, path: str, body: dict) -> tuple[float, dict, dict]:
        """(milliseconds, JSON answer, headers); raises on any status but 200."""
        payload = json.dumps(body)
        for attempt in (0, 1):
            start = time.perf_counter()
            try:
                self.conn.request("POST", path, payload, {"content-type": "application/json"})
                response = self.conn.getresponse()
                data = response.read()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
                if attempt:
                    raise
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200:
            raise RuntimeError(f"POST {path} answered {response.status}: {data[:500]!r}")
        return elapsed, json.loads(data), dict(response.getheaders())


def timed_queries(fn: Callable[[str], Any], queries: list[str], warmup: list[str]) -> tuple[list[float], list]:
    """Each query once, after the ``warmup`` queries (other ones: no cache holds a timed query): (milliseconds,
    answers)."""
    for q in warmup:
        fn(q)
    times, answers = [], []
    for q in queries:
        start = time.perf_counter()
        answers.append(fn(q))
        times.append((time.perf_counter() - start) * 1000)
    return times, answers


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


# -- the goals -------------------------------------------------------------------------------------------------

#: (name, metric, numerator size, denominator size, bound): a ratio ``metric[num] / metric[den] <= bound``
RATIO_GOALS = [
    ("bm25_p50_100k_over_10k", "bm25_p50_ms", 100_000, 10_000, 2.0),
    ("bm25_p50_1m_over_10k", "bm25_p50_ms", 1_000_000, 10_000, 3.0),
    ("dense_p50_100k_over_10k", "dense_p50_ms", 100_000, 10_000, 2.0),
    ("dense_p50_1m_over_10k", "dense_p50_ms", 1_000_000, 10_000, 3.0),
    ("rag_offline_p50_100k_over_10k", "rag_offline_p50_ms", 100_000, 10_000, 2.0),
    ("rag_offline_p50_1m_over_10k", "rag_offline_p50_ms", 1_000_000, 10_000, 3.0),
]


def goals(sizes: dict[str, dict[str, Any]]) -> tuple[dict[str, float], list[tuple[str, float | None, str, bool]]]:
    """The scale goals that this run's sizes allow: (ratios, [(goal, value, bound, passed)])."""
    ratios, checks = {}, []
    for name, metric, num, den, bound in RATIO_GOALS:
        a, b = sizes.get(str(num), {}).get(metric), sizes.get(str(den), {}).get(metric)
        if a is not None and b:
            ratios[name] = round(a / b, 3)
            checks.append((name, ratios[name], f"<= {bound}", ratios[name] <= bound))
    for size, m in sizes.items():
        if m.get("dense_recall_at_100") is not None:
            checks.append(
                (
                    f"dense_recall_at_100 at {size}",
                    m["dense_recall_at_100"],
                    ">= 0.95",
                    m["dense_recall_at_100"] >= 0.95,
                )
            )
        if m.get("index_segments_per_s") and m.get("pyserini_segments_per_s"):
            r = round(m["index_segments_per_s"] / m["pyserini_segments_per_s"], 3)
            ratios[f"index_over_pyserini_{size}"] = r
            checks.append((f"index_over_pyserini_{size}", r, ">= 0.9", r >= 0.9))
        if m.get("index_cpu_s") and m.get("pyserini_cpu_s"):  # CPU seconds: what a busy machine changes least
            ratios[f"index_over_pyserini_cpu_{size}"] = round(m["pyserini_cpu_s"] / m["index_cpu_s"], 3)
    if (m := sizes.get("1000000")) and m.get("service_rss_mb") is not None:
        checks.append(("service_rss_mb at 1M", m["service_rss_mb"], "<= 2560", m["service_rss_mb"] <= 2560))
    peaks = {int(s): m["build_peak_rss_mb"] for s, m in sizes.items() if m.get("build_peak_rss_mb")}
    peaks = (
        {s: p for s, p in peaks.items() if s >= 100_000} if len(peaks) > 2 else peaks
    )  # the goals are at 100k and 1M
    if len(peaks) > 1:  # bounded by the batch: the largest build's peak within 1.5 x the smaller one's
        r = round(peaks[max(peaks)] / peaks[min(peaks)], 3)
        ratios[f"build_peak_rss_{max(peaks)}_over_{min(peaks)}"] = r
        checks.append((f"build_peak_rss_{max(peaks)}_over_{min(peaks)}", r, "<= 1.5", r <= 1.5))
    return ratios, checks
