"""Near-duplicate removal: throughput and peak memory of `ragnarok collection dedup` on synthetic documents.

    python bench/bench_dedup.py                      # on-disk buckets: 100k docs (1 and 2 workers), 1M docs;
                                                     # Redis 100k/300k
    python bench/bench_dedup.py --sizes 100000 --no-redis --no-large --storages disk memory

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
                ws = vocab[stream[pos : pos + k]].tolist()
                pos += k
                sentences, j = [], 0
                while j < k:
                    m = int(rng.integers(8, 20))
                    sentences.append(" ".join(ws[j : j + m]).capitalize() + ".")
                    j += m
                body = "\n\n".join(" ".join(sentences[p : p + 4]) for p in range(0, len(sentences), 4))
                pool.append(body)
                if len(pool) > 2000:
                    pool = pool[-1000:]
            out.write(
                json.dumps(
                    {
                        "docid": f"synthetic_{i}",
                        "url": f"https://example.org/{i}",
                        "title": f"Document {i}",
                        "headings": "",
                        "body": body,
                    }
                )
                + "\n"
            )
    return path.stat().st_size


WRAPPER = r"""
import json, os, resource, subprocess, sys, time

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append((int(name), fields))
    out, todo = {}, [root]
    while todo:
        for pid, fields in children.get(todo.pop(), []):
            out[pid] = fields
            todo.append(pid)
    return out


t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
cpu, peak_sum = {}, 0
import threading
out_err = {}
reader = threading.Thread(target=lambda: out_err.update(zip(("out", "err"), p.communicate())))
reader.start()
while reader.is_alive():
    procs = tree(os.getpid())
    rss = 0
    for pid, fields in procs.items():
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
        rss += int(fields[21]) * PAGE
    peak_sum = max(peak_sum, rss)
    reader.join(0.2)
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "s": dt, "rss": ru.ru_maxrss, "rss_sum": peak_sum / 1024,
                  "cpu": max(sum(cpu.values()), ru.ru_utime + ru.ru_stime),
                  "out": out_err["out"], "err": out_err["err"][-2000:]}))
"""


class Measured(tuple):
    """``(seconds, peak RSS MiB, stdout)`` with ``.cpu`` (CPU seconds of the whole process tree: load-independent)
    and ``.rss_sum`` (MiB: the largest sum of the resident sets of the tree's processes at one sample)."""

    cpu: float
    rss_sum: float


def measured(cmd: list[str], env: dict | None = None) -> Measured:
    """Run ``cmd`` in a fresh child of a fresh process: (seconds, peak RSS MiB of its largest process, stdout).

    The parent samples the process tree every 0.2 s from /proc for CPU time and the summed resident sets
    (pool workers included); the peak RSS is getrusage's (the largest single process, exact).
    """
    res = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], capture_output=True, text=True, env=env)
    data = json.loads(res.stdout)
    if data["rc"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {data['err']}")
    m = Measured((data["s"], data["rss"] / 1024, data["out"]))
    m.cpu, m.rss_sum = data["cpu"], data["rss_sum"] / 1024
    return m


def ragnarok(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ragnarok.cli.main import app; app()", *args]


def bulk_baseline(path: Path, n: int = 5000) -> tuple[float, float]:
    """datasketch's MinHash.bulk over 9-word shingles (bytes, SHA-1 each): documents per second of wall time
    and per CPU second (one process; shingling is not timed)."""
    from datasketch import MinHash

    from ragnarok.collection.minhash import words

    docs = []
    with open(path, encoding="utf-8") as f:
        for line, _ in zip(f, range(n)):
            w = words(json.loads(line)["body"])
            docs.append([" ".join(w[i : i + 9]).encode() for i in range(max(len(w) - 8, 1))])
    t, c = time.perf_counter(), time.process_time()
    MinHash.bulk(docs, num_perm=128)
    return len(docs) / (time.perf_counter() - t), len(docs) / (time.process_time() - c)


def start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("redis-server")
    if not exe:
        raise RuntimeError("redis-server not installed (apt-get install -y redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
    )
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
    ap.add_argument("--workdir", type=Path, default=None, help="keep (and reuse) the generated files here")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument(
        "--storages",
        nargs="+",
        default=["disk"],
        choices=["disk", "memory"],
        help="bucket storages to measure without Redis (memory: datasketch's in-memory MinHashLSH)",
    )
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts for --sizes")
    ap.add_argument("--no-in-memory", action="store_true", help="only the Redis runs")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-dedup-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    rows = []
    sizes = sorted(
        set(args.sizes + ([] if args.no_large else [args.large]) + ([] if args.no_redis else args.redis_sizes))
    )
    files = {}
    for n in sizes:
        files[n] = work / f"docs-{n}.jsonl"
        t = time.perf_counter()
        size = files[n].stat().st_size if files[n].exists() else generate(files[n], n)  # reuse with --workdir
        print(f"# generated {n:,} docs, {size / n:,.0f} bytes/doc avg, in {time.perf_counter() - t:.0f} s")
    if not args.no_baseline:
        wall, cpu = bulk_baseline(files[sizes[0]])
        print(
            f"datasketch MinHash.bulk (SHA-1 shingles, 128 perm, 1 process): {wall:,.0f} docs/s, "
            f"{cpu:,.0f} docs per CPU-s  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    runs = [] if args.no_in_memory else [(st, n, w) for st in args.storages for n in args.sizes for w in args.workers]
    if not args.no_large and not args.no_in_memory:
        runs += [(st, args.large, 2) for st in args.storages]
    for storage, n, workers in runs:
        m = measured(
            ragnarok(
                "collection",
                "dedup",
                str(files[n]),
                str(work / "out.jsonl"),
                "--storage",
                storage,
                "--workers",
                str(workers),
                "--no-progress",
                "--report",
                str(work / "report.json"),
            )
        )
        s, rss, out = m
        report = json.loads((work / "report.json").read_text())
        rows.append((storage, n, workers, s, rss, report["percent_removed"]))
        print(
            f"{storage:<10} {n:>9,} docs  workers={workers}  {s:7.1f} s  {n / s:9,.0f} docs/s  "
            f"CPU {m.cpu:6.1f} s ({n / m.cpu:7,.0f} docs per CPU-s)  peak RSS {rss:7,.0f} MiB "
            f"(tree {m.rss_sum:7,.0f} MiB)  removed {report['percent_removed']:.2f} %  "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    if not args.no_redis:
        proc, url = start_redis(work)
        try:
            import redis

            for n in args.redis_sizes:
                m = measured(
                    ragnarok(
                        "collection",
                        "dedup",
                        str(files[n]),
                        str(work / "out.jsonl"),
                        "--workers",
                        "2",
                        "--no-progress",
                        "--redis-url",
                        url,
                        "--report",
                        str(work / "report.json"),
                    )
                )
                s, rss, _ = m
                report = json.loads((work / "report.json").read_text())
                used = redis.Redis.from_url(url).info("memory")["used_memory_peak"] / 2**20
                print(
                    f"redis      {n:>9,} docs  workers=2  {s:7.1f} s  {n / s:9,.0f} docs/s  CPU {m.cpu:6.1f} s  "
                    f"peak RSS {rss:7,.0f} MiB (tree {m.rss_sum:7,.0f} MiB, redis-server peak {used:,.0f} MiB)  "
                    f"load {os.getloadavg()[0]:.1f}  "
                    f"removed {report['percent_removed']:.2f} %",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
