"""Near-duplicate removal: throughput and peak memory of `ragnarok collection dedup` on synthetic documents.

    python bench/bench_dedup.py                      # 100k docs (1 and 2 workers), 1M docs, Redis 100k/300k
    python bench/bench_dedup.py --sizes 100000 --no-redis --no-large

Documents are 1-2 KB of synthetic text (Zipf-distributed pseudo-words, sentences, paragraphs); 8 % of them
are near-duplicates of a recent document (0-3 words edited). Each measurement runs the real CLI in a fresh
child process; peak memory is that child's (and its workers') largest resident set (getrusage of children).
Also measured: datasketch's own `MinHash.bulk` over 9-word shingles (SHA-1 per shingle) as the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _vocab(n: int = 50_000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    syll = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou", "ea")]
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(syll) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    return sorted(words)


def generate(path: Path, n: int, seed: int = 0, dup_rate: float = 0.08) -> int:
    """``n`` JSONL documents of 1-2 KB at ``path``; returns its size in bytes."""
    vocab = np.array(_vocab())
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 0.9
    weights /= weights.sum()
    pool: list[str] = []
    with open(path, "w", encoding="utf-8") as out:
        stream = rng.choice(len(vocab), size=(n // 1000 + 1) * 1000 * 260, p=weights)
        pos = 0
        for i in range(n):
            if pool and rng.random() < dup_rate:
                words = pool[int(rng.integers(len(pool)))].split(" ")
                for _ in range(int(rng.integers(0, 4))):
                    words[int(rng.integers(len(words)))] = str(vocab[int(rng.integers(len(vocab)))])
                body = " ".join(words)
            else:
                k = int(rng.integers(140, 280))
                if pos + k > len(stream):
                    pos = int(rng.integers(0, len(stream) - k))
                ws = vocab[stream[pos:pos + k]].tolist()
                pos += k
                sentences, j = [], 0
                while j < k:
                    m = int(rng.integers(8, 20))
                    sentences.append(" ".join(ws[j:j + m]).capitalize() + ".")
                    j += m
                body = "\n\n".join(" ".join(sentences[p:p + 4]) for p in range(0, len(sentences), 4))
                pool.append(body)
                if len(pool) > 2000:
                    pool = pool[-1000:]
            out.write(json.dumps({"docid": f"synthetic_{i}", "url": f"https://example.org/{i}",
                                  "title": f"Document {i}", "headings": "", "body": body}) + "\n")
    return path.stat().st_size


def measured(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Run ``cmd`` in a fresh child of a fresh process: (seconds, peak RSS MiB of it and its workers, stdout)."""
    wrapper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "dt = time.perf_counter() - t\n"
        "print(json.dumps({'rc': p.returncode, 's': dt, 'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
        " 'out': p.stdout, 'err': p.stderr[-2000:]}))\n"
    )
    res = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, env=env)
    data = json.loads(res.stdout)
    if data["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {data['err']}")
    return data["s"], data["rss"] / 1024, data["out"]


def ragnarok(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ragnarok.cli import app; app()", *args]


def bulk_baseline(path: Path, n: int = 5000) -> float:
    """datasketch's MinHash.bulk over 9-word shingles (bytes, SHA-1 each): documents per second."""
    from datasketch import MinHash

    from ragnarok.collection.dedup import words

    docs = []
    with open(path, encoding="utf-8") as f:
        for line, _ in zip(f, range(n)):
            w = words(json.loads(line)["body"])
            docs.append([" ".join(w[i:i + 9]).encode() for i in range(max(len(w) - 8, 1))])
    t = time.perf_counter()
    MinHash.bulk(docs, num_perm=128)
    return len(docs) / (time.perf_counter() - t)


def start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("redis-server")
    if not exe:
        raise RuntimeError("redis-server not installed (apt-get install -y redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL)
    import redis

    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    return proc, f"redis://127.0.0.1:{port}/0"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--redis-sizes", type=int, nargs="+", default=[100_000, 300_000])
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-dedup-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    sizes = sorted(set(args.sizes + ([] if args.no_large else [args.large])
                       + ([] if args.no_redis else args.redis_sizes)))
    files = {}
    for n in sizes:
        files[n] = work / f"docs-{n}.jsonl"
        t = time.perf_counter()
        size = files[n].stat().st_size if files[n].exists() else generate(files[n], n)  # reuse with --workdir
        print(f"# generated {n:,} docs, {size / n:,.0f} bytes/doc avg, in {time.perf_counter() - t:.0f} s")
    print(f"datasketch MinHash.bulk (SHA-1 shingles, 128 perm, 1 core): {bulk_baseline(files[sizes[0]]):,.0f} docs/s")
    runs = [(n, w) for n in args.sizes for w in (1, 2)]
    if not args.no_large:
        runs.append((args.large, 2))
    for n, workers in runs:
        s, rss, out = measured(ragnarok("collection", "dedup", str(files[n]), str(work / "out.jsonl"),
                                        "--workers", str(workers), "--no-progress",
                                        "--report", str(work / "report.json")))
        report = json.loads((work / "report.json").read_text())
        rows.append(("in-memory", n, workers, s, rss, report["percent_removed"]))
        print(f"in-memory  {n:>9,} docs  workers={workers}  {s:7.1f} s  {n / s:9,.0f} docs/s  "
              f"peak RSS {rss:7,.0f} MiB  removed {report['percent_removed']:.2f} %", flush=True)
    if not args.no_redis:
        proc, url = start_redis(work)
        try:
            import redis

            for n in args.redis_sizes:
                s, rss, _ = measured(ragnarok("collection", "dedup", str(files[n]), str(work / "out.jsonl"),
                                              "--workers", "2", "--no-progress", "--redis-url", url,
                                              "--report", str(work / "report.json")))
                report = json.loads((work / "report.json").read_text())
                used = redis.Redis.from_url(url).info("memory")["used_memory_peak"] / 2**20
                print(f"redis      {n:>9,} docs  workers=2  {s:7.1f} s  {n / s:9,.0f} docs/s  "
                      f"peak RSS {rss:7,.0f} MiB (redis-server peak {used:,.0f} MiB)  "
                      f"removed {report['percent_removed']:.2f} %", flush=True)
        finally:
            proc.terminate()
            proc.wait()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
