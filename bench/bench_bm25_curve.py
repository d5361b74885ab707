"""BM25's own search time as the collection grows: Lucene alone (in this process, no HTTP, no JSON of
candidates), at 10k, 100k and 1M V2.1-shaped segments, with the TREC RAG 2024 topics, and what the
growth implies at V2.1's 113.5 M segments.

    python bench/bench_bm25_curve.py [--sizes 10000,100000,1000000] [--k 100] [--workdir DIR]

Each size: bench/scale_corpus.py's collection (Zipfian vocabulary of real text, V2.1's fields and docid shape),
indexed with ``ragnarok index`` (positions, docvectors, raw documents, as the R service needs them), then the 301
topics searched one at a time with BM25 (k1 0.9, b 0.4) for ``--k`` hits, 3 passes after a warm-up pass: the p50
and mean of Lucene's search (Anserini's analyzer and bag-of-words query, top docs only) and of Anserini's
``SimpleSearcher.search`` (which also reads each hit's stored document). The slope of log(time) against log(size)
between the two largest sizes, carried to 113.5 M, is the extrapolation; the posting lists of a query's terms
grow linearly with the collection, so a slope near 1 is what exhaustive BM25 scoring does, lower what Lucene's
block-max WAND skips.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus  # noqa: E402

V21 = 113_520_750


def build(work: Path, size: int) -> Path:
    collection, index = work / f"segments-{size}.jsonl", work / f"index-{size}"
    if not index.exists():
        if not collection.exists():
            scale_corpus.write_collection(collection, size)
        subprocess.run(
            [sys.executable, "-m", "ragnarok.cli", "index", str(collection), str(index)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        collection.unlink()
    return index


def _timed(search, topics: list[str]) -> tuple[float, float]:
    for text in topics:
        search(text)
    times = []
    for _ in range(3):
        for text in topics:
            start = time.perf_counter()
            search(text)
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), statistics.mean(times)


def measure(index: Path, topics: list[str], k: int) -> dict[str, tuple[float, float]]:
    """(p50, mean) ms of Lucene's own search (Anserini's analyzer and bag-of-words BM25 query, TopDocs: no stored
    field read), and of Anserini's SimpleSearcher.search, which also reads each hit's stored document."""
    from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: PLC0415

    searcher = LuceneSearcher(index)
    searcher.set_bm25(0.9, 0.4)
    from jnius import autoclass, cast  # noqa: PLC0415 - the JVM is up

    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(index)).toPath())
    )
    lucene = autoclass("org.apache.lucene.search.IndexSearcher")(cast("org.apache.lucene.index.IndexReader", reader))
    lucene.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")(0.9, 0.4))
    analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
    generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
    out = {
        "lucene": _timed(
            lambda text: lucene.search(generator.buildQuery("contents", analyzer, text), k).totalHits, topics
        ),
        "anserini": _timed(lambda text: searcher.object.search(text, k), topics),
    }
    reader.close()
    searcher.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-bm25-"))
    work.mkdir(parents=True, exist_ok=True)
    topics = scale_corpus.load_queries()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {len(topics)} rag24 topics, k {args.k}")
    rows = []
    for size in sizes:
        index = build(work, size)
        found = measure(index, topics, args.k)
        rows.append((size, found))
        print(
            f"{size:>10,} segments  Lucene's BM25 search p50 {found['lucene'][0]:7.3f} ms, mean "
            f"{found['lucene'][1]:7.3f} ms; Anserini's searcher with the hits' documents p50 "
            f"{found['anserini'][0]:7.3f} ms, mean {found['anserini'][1]:7.3f} ms",
            flush=True,
        )
    (n1, a), (n2, b) = rows[-2], rows[-1]
    for kind in ("lucene", "anserini"):
        for label, col in (("p50", 0), ("mean", 1)):
            slope = math.log(b[kind][col] / a[kind][col]) / math.log(n2 / n1)
            print(
                f"{kind} {label}: slope {slope:.2f} between {n1:,} and {n2:,}; at V2.1's {V21:,} segments: "
                f"{b[kind][col] * (V21 / n2) ** slope:,.1f} ms (extrapolated)"
            )


if __name__ == "__main__":
    main()
