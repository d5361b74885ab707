"""Near-duplicate removal with MinHash and LSH (datasketch), as MS MARCO V2.1 was curated.

What counts as a near-duplicate
    Each document's text (``body``; ``contents`` for Anserini-style records; ``title`` when both are empty)
    becomes the set of its 9-gram word shingles. Words are the runs of ASCII letters and digits and of
    non-ASCII characters, ASCII-lowercased; punctuation and whitespace only separate words. A document with
    fewer than 9 words has one shingle, all of its words. Two documents are near-duplicates when datasketch's
    ``MinHashLSH`` puts them in a common bucket (b bands of r rows, chosen by datasketch for ``threshold``
    and ``num_perm`` with recall weighted up, see ``LSH_WEIGHTS``) **and** their MinHash Jaccard estimate is >= ``threshold`` (the check removes LSH's
    false positives; ``verify=False`` skips it).

Classes and the representative
    Near-duplicate pairs are joined transitively (union-find) into equivalence classes. From each class we
    keep **the document that comes first in the input** and remove the others. Input order is the order of
    the files (sorted, for a directory) and of the lines in them, so the result does not depend on workers.

How it runs (two streaming passes over the input, any size, plain or gzip)
    Pass 1 reads raw lines; worker processes parse them, shingle and MinHash them a batch at a time
    (vectorised: the shingle hashes of a batch go through datasketch's affine32 permutations as one
    ``(num_perm x shingles)`` array, bit-for-bit what ``MinHash(hashfunc=...).update_batch`` computes) and
    return signatures; the parent inserts ``LeanMinHash`` objects into ``MinHashLSH`` through an insertion
    session, and appends the signatures to a scratch file beside OUT (``num_perm * 4`` bytes per document,
    read back only to verify candidate pairs). Then the LSH buckets holding two or more documents are
    scanned, candidates verified and united. Pass 2 copies the kept lines, byte for byte, to a temporary file
    beside OUT that replaces OUT only when everything succeeded.

Memory
    In memory (``storage_config`` dict, the default) datasketch's LSH costs about 4.7 KiB per document (12
    bands, each a bytes key and a set per bucket: 4.7 GiB peak for 1 M documents, see docs/BENCHMARKS.md).
    With ``redis_url`` the buckets live in Redis (redis-server used about 6.5 KiB per document) and this
    process keeps 9 bytes per document (a status byte, and 8 bytes for the duplicate-docid check) plus the
    pages of the signature scratch file it maps to verify candidates (page cache, reclaimable). Worker
    processes are handed at most ``2 * workers + 2`` batches at a time, so nothing else grows with the input.
"""

from __future__ import annotations

import heapq
import json
import multiprocessing
import os
import pickle
import secrets
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from datasketch import LeanMinHash, MinHash, MinHashLSH
from tqdm import tqdm

from ragnarok.collection.jsonl import (
    BadLine, CollectionFormatError, DocidSet, InputReport, _ByteCounter, classify, docid_hash,
    iter_raw_lines, parse_document, total_bytes,
)

DEFAULT_THRESHOLD = 0.8
DEFAULT_NUM_PERM = 128
SHINGLE_WORDS = 9
SEED = 1
SCHEME = "affine32"
BATCH = 2000
# datasketch picks (bands, rows) minimising weighted false-positive and false-negative areas under its
# S-curve. Candidates are verified against the threshold afterwards, so a false positive costs only a check
# while a false negative is a missed duplicate: weigh recall up. At threshold 0.8 and 128 permutations this
# gives 12 bands x 10 rows: pairs at Jaccard 0.9 become candidates with probability 0.994 (0.929 with
# datasketch's default equal weights, 9 x 13), at 0.85 with 0.928 (0.686).
LSH_WEIGHTS = (0.2, 0.8)

KEEP, BAD, REMOVED = 0, 1, 2

# ----------------------------------------------------------------------------------------------- shingling

_WORD_BYTES = bytes(c if (48 <= c <= 57 or 97 <= c <= 122 or c >= 128) else 32 for c in range(256))
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_rng = np.random.RandomState(20240909)
_K = (_rng.randint(0, 1 << 62, size=4, dtype=np.uint64) * np.uint64(2) + np.uint64(1))
_GRAM = _rng.randint(0, 1 << 62, size=64, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_U = np.uint64


def _fmix64(x: np.ndarray) -> np.ndarray:
    x ^= x >> _U(33)
    x *= _U(0xFF51AFD7ED558CCD)
    x ^= x >> _U(33)
    x *= _U(0xC4CEB9FE1A85EC53)
    x ^= x >> _U(33)
    return x


def _fmix32(x: np.ndarray) -> np.ndarray:
    """datasketch's pre-mix of the affine32 scheme (MurmurHash3's 32-bit finalizer)."""
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def document_text(document: dict[str, Any]) -> str:
    return document.get("body") or document.get("title") or ""


def words(text: str) -> list[str]:
    """The words shingles are made of (the reference tokenizer; :func:`shingle_hashes` is its fast twin)."""
    return text.encode("utf-8", "surrogatepass").lower().translate(_WORD_BYTES).decode("utf-8", "replace").split()


def _word_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the words of ``texts`` (concatenated) and the number of words of each text.

    A word hashes its length, its first 8 and its last 8 bytes (words of more than 16 bytes that differ only
    in the middle collide, harmlessly for near-duplicate detection).
    """
    buf = b"\n".join(t.encode("utf-8", "surrogatepass").lower().translate(_WORD_BYTES) for t in texts)
    b = np.frombuffer(buf + b"\0" * 16, dtype=np.uint8)
    is_word = b > 32
    edge = np.flatnonzero(is_word[1:] != is_word[:-1]) + 1
    if is_word[0]:
        edge = np.concatenate(([0], edge))
    starts, ends = edge[0::2], edge[1::2]
    n_docs = len(texts)
    if len(starts) == 0:
        return np.empty(0, np.uint64), np.zeros(n_docs, np.int64)
    seps = np.flatnonzero(b == 10)
    doc_of = np.searchsorted(seps, starts)
    counts = np.bincount(doc_of, minlength=n_docs).astype(np.int64)
    length = (ends - starts).astype(np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(b, 8)
    first = np.ascontiguousarray(windows[starts]).view("<u8").ravel() & _MASKS[np.minimum(ends - starts, 8)]
    last = np.ascontiguousarray(windows[ends - 8]).view("<u8").ravel()  # (ends - 8 may wrap: masked below)
    last *= (length > 8).astype(np.uint64)
    h = first * _K[0]
    h += last * _K[1]
    h += length * _K[2]
    return _fmix64(h), counts


def shingle_hashes(texts: list[str], n: int = SHINGLE_WORDS) -> tuple[np.ndarray, np.ndarray]:
    """32-bit hashes of the n-gram word shingles of each text, concatenated, and the count per text.

    A text with 1..n-1 words has one shingle (all its words); one with none has no shingle.
    """
    if not 1 <= n <= len(_GRAM):
        raise ValueError(f"shingle size must be 1..{len(_GRAM)}, got {n}")
    wh, counts = _word_hashes(texts)
    n_docs = len(texts)
    if len(wh) == 0:
        return np.empty(0, np.uint32), np.zeros(n_docs, np.int64)
    pad = n - 1
    doc_of = np.repeat(np.arange(n_docs), counts)
    padded = np.zeros(len(wh) + pad * n_docs + pad, dtype=np.uint64)
    padded[np.arange(len(wh)) + pad * doc_of] = wh
    m = len(padded) - pad
    grams = padded[:m] * _GRAM[0]
    for j in range(1, n):
        grams += padded[j : m + j] * _GRAM[j]
    n_grams = np.where(counts > 0, np.maximum(counts - pad, 1), 0)
    doc_start = np.concatenate(([0], np.cumsum(counts + pad)[:-1]))
    gram_start = np.concatenate(([0], np.cumsum(n_grams)[:-1]))
    index = np.repeat(doc_start - gram_start, n_grams) + np.arange(int(n_grams.sum()))
    grams = _fmix64(grams[index])
    return (grams >> _U(32)).astype(np.uint32), n_grams


def permutations(num_perm: int = DEFAULT_NUM_PERM, seed: int = SEED) -> np.ndarray:
    """datasketch's permutation parameters ``(a, b)`` for ``num_perm`` and ``seed`` (scheme affine32)."""
    return MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations


def signatures(hashes: np.ndarray, counts: np.ndarray, perms: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """MinHash signatures ``(documents, num_perm)`` of shingle hashes grouped by ``counts``.

    Row i equals ``MinHash(num_perm, seed, hashfunc=int, scheme="affine32")`` updated with text i's shingle
    hashes (a text without shingles gets datasketch's empty signature, all 2^32-1).
    """
    a, b = perms
    num_perm = len(a)
    out = np.full((len(counts), num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
    hv = _fmix32(hashes.astype(np.uint32, copy=False))
    cum = np.concatenate(([0], np.cumsum(counts)))
    nonempty = np.flatnonzero(counts > 0)
    i = 0
    while i < len(nonempty):
        # as many whole documents as fit in ``chunk`` shingles (at least one)
        j = max(i + 1, int(np.searchsorted(cum[nonempty + 1], cum[nonempty[i]] + chunk, "right")))
        docs = nonempty[i:j]
        s, e = cum[docs[0]], cum[docs[-1] + 1]
        block = np.multiply(a[:, None], hv[None, s:e])  # (num_perm, shingles), uint32 wrap = mod 2^32
        block += b[:, None]
        # the documents in docs are contiguous in hv except for empty ones, which contribute no columns
        out[docs] = np.minimum.reduceat(block, cum[docs] - s, axis=1).T
        i = j
    return out


def minhash_documents(texts: list[str], num_perm: int = DEFAULT_NUM_PERM, seed: int = SEED,
                      n: int = SHINGLE_WORDS) -> np.ndarray:
    hashes, counts = shingle_hashes(texts, n)
    return signatures(hashes, counts, permutations(num_perm, seed))


def lean_minhash(signature: np.ndarray, seed: int = SEED) -> LeanMinHash:
    return LeanMinHash(seed=seed, hashvalues=signature, scheme=SCHEME)


# ----------------------------------------------------------------------------------------------- workers


@dataclass
class Batch:
    """A worker's answer for one batch of raw lines (in order)."""

    signatures: np.ndarray  # (lines, num_perm) uint32
    docid_hashes: np.ndarray  # (lines,) uint64; 0 for bad lines
    docids: list[str | None]
    nonempty: np.ndarray  # (lines,) bool: has at least one shingle
    bad: list[tuple[int, BadLine]]  # (position in batch, what)
    where: list[tuple[str, int]]  # (file, line number) of each line
    band_keys: list[tuple[bytes, ...]]  # per line, the LSH bucket key of each band (datasketch's _H)


_worker_perms: np.ndarray | None = None
_worker_n = SHINGLE_WORDS
_worker_ranges: list[tuple[int, int]] = []


def _init_worker(num_perm: int, seed: int, n: int, hashranges: list[tuple[int, int]]) -> None:
    global _worker_perms, _worker_n, _worker_ranges
    _worker_perms, _worker_n, _worker_ranges = permutations(num_perm, seed), n, hashranges


def band_keys(sigs: np.ndarray, hashranges: list[tuple[int, int]]) -> list[tuple[bytes, ...]]:
    """Per signature, the bucket key of each LSH band, exactly as ``MinHashLSH._H`` makes it
    (``bytes(hashvalues[start:end].byteswap().data)``), for a whole batch at once."""
    per_band = []
    for start, end in hashranges:
        band = np.ascontiguousarray(sigs[:, start:end]).byteswap()
        raw = band.tobytes()
        width = band.shape[1] * band.itemsize
        per_band.append([raw[i : i + width] for i in range(0, len(raw), width)])
    return list(zip(*per_band))


def _hash_batch(items: list[tuple[str, int, bytes]]) -> Batch:
    assert _worker_perms is not None
    texts, docids, hashes, bad = [], [], np.zeros(len(items), np.uint64), []
    for pos, (file, line_no, data) in enumerate(items):
        try:
            document = parse_document(data, f"{file}:{line_no}")
        except CollectionFormatError as exc:
            bad.append((pos, BadLine(classify(exc), str(exc))))
            texts.append("")
            docids.append(None)
            continue
        texts.append(document_text(document))
        docids.append(document["docid"])
        hashes[pos] = docid_hash(document["docid"])
    shingles, counts = shingle_hashes(texts, _worker_n)
    sigs = signatures(shingles, counts, _worker_perms)
    return Batch(sigs, hashes, docids, counts > 0, bad, [(file, line_no) for file, line_no, _ in items],
                 band_keys(sigs, _worker_ranges))


def _batches(lines: Iterable[tuple[Path, int, bytes]], size: int) -> Iterator[list[tuple[str, int, bytes]]]:
    batch: list[tuple[str, int, bytes]] = []
    for file, line_no, data in lines:
        batch.append((str(file), line_no, data))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def map_batches(func: Callable, batches: Iterable, workers: int, initializer: Callable, initargs: tuple,
                in_flight: int | None = None) -> Iterator[Any]:
    """``func`` over ``batches`` in order: in this process (workers <= 1) or a forkserver pool.

    At most ``in_flight`` batches (default ``2 * workers + 2``) are out at a time: ``Pool.imap`` would read
    the whole input ahead and queue every result whenever this process consumes more slowly than the
    workers produce (with Redis storage, for one), so memory would grow with the input.
    """
    if workers <= 1:
        initializer(*initargs)
        yield from map(func, batches)
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    limit = max(1, in_flight if in_flight is not None else 2 * workers + 2)
    with ctx.Pool(workers, initializer=initializer, initargs=initargs) as pool:
        pending: deque[Any] = deque()
        for batch in batches:
            pending.append(pool.apply_async(func, (batch,)))
            if len(pending) >= limit:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


# ----------------------------------------------------------------------------------------------- union-find


class UnionFind:
    """Union-find over the documents that have a near-duplicate (a dict: memory ~ near-duplicates only).
    The root of every class is its smallest member, i.e. the first document of the class in input order."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        parent = self.parent
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, x: int, y: int) -> bool:
        rx, ry = self.find(x), self.find(y)
        if rx == ry:
            return False
        if ry < rx:
            rx, ry = ry, rx
        self.parent[ry] = rx
        self.parent.setdefault(rx, rx)
        return True

    def classes(self) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for x in self.parent:
            groups.setdefault(self.find(x), []).append(x)
        return {root: sorted(members) for root, members in groups.items() if len(members) > 1}


# ----------------------------------------------------------------------------------------------- LSH storage


def redis_storage(url: str) -> dict[str, Any]:
    """datasketch's ``storage_config`` for a ``redis://host:port/db`` URL (a unique basename per run)."""
    parsed = urlparse(url if "://" in url else f"redis://{url}")
    if parsed.scheme not in {"redis", ""}:
        raise ValueError(f"--redis-url must look like redis://host:port/db, got {url!r}")
    config: dict[str, Any] = {"host": parsed.hostname or "localhost", "port": parsed.port or 6379}
    if parsed.path.strip("/"):
        config["db"] = int(parsed.path.strip("/"))
    if parsed.password:
        config["password"] = parsed.password
    return {"type": "redis", "redis": config, "basename": b"ragnarok-dedup-" + secrets.token_hex(6).encode()}


def _multi_member_buckets(table: Any, prepickle: bool) -> Iterator[list[int]]:
    """The members of every bucket of one LSH band table that holds two or more documents."""
    inner = getattr(table, "_dict", None)
    if inner is not None:  # datasketch's DictSetStorage: a defaultdict(set); read it without copying
        for members in inner.values():
            if len(members) > 1:
                yield [pickle.loads(m) for m in members] if prepickle else list(members)
        return
    # datasketch's RedisSetStorage: a hash {bucket -> redis key of its set}; scan it in pages (flat memory)
    r, name = table._redis, table._name
    page: list[bytes] = []

    def flush() -> Iterator[list[int]]:
        pipe = r.pipeline(transaction=False)
        for key in page:
            pipe.scard(key)
        multi = [key for key, n in zip(page, pipe.execute()) if n > 1]
        pipe = r.pipeline(transaction=False)
        for key in multi:
            pipe.smembers(key)
        for members in pipe.execute():
            yield [pickle.loads(m) for m in members]

    for _, redis_key in r.hscan_iter(name, count=10_000):
        page.append(redis_key)
        if len(page) >= 10_000:
            yield from flush()
            page = []
    if page:
        yield from flush()


def _drop_redis_keys(lsh: MinHashLSH, basename: bytes) -> None:
    r = lsh.keys._redis
    batch = []
    for key in r.scan_iter(match=basename + b"*", count=10_000):
        batch.append(key)
        if len(batch) >= 10_000:
            r.unlink(*batch)
            batch = []
    if batch:
        r.unlink(*batch)


# ----------------------------------------------------------------------------------------------- the run


@dataclass
class DedupReport:
    threshold: float
    num_perm: int
    bands: int
    rows: int
    storage: str
    input: InputReport = field(default_factory=InputReport)
    candidate_buckets: int = 0
    pairs_checked: int = 0
    pairs_rejected: int = 0
    classes: int = 0
    removed: int = 0
    kept: int = 0
    largest: list[dict[str, Any]] = field(default_factory=list)
    removed_docids: list[str] = field(default_factory=list)

    @property
    def percent_removed(self) -> float:
        return 100.0 * self.removed / self.input.documents if self.input.documents else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents_in": self.input.documents, "documents_out": self.kept, "classes": self.classes,
            "removed": self.removed, "percent_removed": round(self.percent_removed, 4),
            "threshold": self.threshold, "num_perm": self.num_perm, "bands": self.bands, "rows": self.rows,
            "storage": self.storage, "shingle": f"{SHINGLE_WORDS}-word", "representative": "first in input order",
            "candidate_buckets": self.candidate_buckets, "pairs_checked": self.pairs_checked,
            "pairs_rejected": self.pairs_rejected, "input": self.input.as_dict(), "largest_classes": self.largest,
        }

    def summary(self) -> str:
        lines = [
            f"documents in: {self.input.documents:,}  out: {self.kept:,}",
            f"near-duplicate classes: {self.classes:,}  removed: {self.removed:,} ({self.percent_removed:.2f} %)",
            f"threshold {self.threshold}, {self.num_perm} permutations ({self.bands} bands x {self.rows} rows), "
            f"{SHINGLE_WORDS}-word shingles, {self.storage} LSH",
        ]
        if self.input.empty:
            lines.append(f"empty documents (kept, not compared): {self.input.empty:,}")
        if self.input.skipped:
            kinds = ", ".join(f"{k} {v:,}" for k, v in self.input.bad.items() if v)
            lines.append(f"skipped bad lines: {self.input.skipped:,} ({kinds})")
        for c in self.largest[:5]:
            members = ", ".join(m["docid"] for m in c["examples"])
            lines.append(f"  class of {c['size']:,}: keep {c['representative']['docid']}; e.g. {members}")
        return "\n".join(lines)


def _atomic_writer(out: Path) -> tuple[Path, Any]:
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    raw = os.fdopen(fd, "wb")
    if out.name.endswith(".gz"):
        import gzip  # noqa: PLC0415

        return Path(tmp), gzip.GzipFile(filename=out.name[:-3], fileobj=raw, mode="wb", compresslevel=6, mtime=0), raw
    return Path(tmp), raw, None


def write_atomically(out: Path, lines: Iterable[bytes]) -> int:
    """Write ``lines`` to a temporary file beside ``out`` and rename it to ``out`` (gzip when ``.gz``)."""
    out = Path(out)
    tmp, handle, raw = _atomic_writer(out)
    n = 0
    try:
        for line in lines:
            handle.write(line if line.endswith(b"\n") else line + b"\n")
            n += 1
        handle.close()
        if raw is not None:
            raw.close()
        os.replace(tmp, out)
    except BaseException:
        handle.close()
        if raw is not None:
            raw.close()
        tmp.unlink(missing_ok=True)
        raise
    return n


def dedup(
    input_path: Path, output: Path | None, threshold: float = DEFAULT_THRESHOLD, num_perm: int = DEFAULT_NUM_PERM,
    redis_url: str | None = None, skip_bad: bool = False, workers: int | None = None, verify: bool = True,
    batch_size: int = BATCH, examples: int = 10, progress: bool | None = None, seed: int = SEED,
    shingle_words: int = SHINGLE_WORDS, keep_removed_docids: int = 0,
) -> DedupReport:
    """Remove near-duplicates from the JSONL collection ``input_path`` into ``output`` (see module doc).

    ``output=None`` only reports. Bad lines raise :class:`CollectionFormatError` (file:line) before ``output``
    is touched, unless ``skip_bad``: then they are left out of ``output`` and counted in the report.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm < 16:
        raise ValueError(f"num_perm must be >= 16, got {num_perm}")
    input_path = Path(input_path)
    workers = default_workers() if workers is None else workers
    storage = redis_storage(redis_url) if redis_url else None
    try:
        lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=LSH_WEIGHTS, storage_config=storage)
    except ImportError as exc:
        raise RuntimeError(f"--redis-url needs the redis package: {exc}") from None
    basename = storage["basename"] if storage else b""
    if storage:
        try:
            lsh.keys._redis.ping()
        except Exception as exc:  # noqa: BLE001 - redis' own exception classes
            raise RuntimeError(f"cannot reach Redis at {redis_url}: {exc}") from None
    report = DedupReport(threshold, num_perm, lsh.b, lsh.r, "redis" if storage else "in-memory")
    scratch_dir = (Path(output).parent if output else Path(tempfile.gettempdir()))
    scratch_dir.mkdir(parents=True, exist_ok=True)
    fd, sig_name = tempfile.mkstemp(prefix=".dedup-signatures-", dir=scratch_dir)
    sig_path = Path(sig_name)
    try:
        status = _pass_one(input_path, lsh, report, os.fdopen(fd, "wb"), skip_bad, workers, batch_size,
                           progress, num_perm, seed, shingle_words)
        n_lines = len(status)
        sig = np.memmap(sig_path, dtype=np.uint32, mode="r", shape=(n_lines, num_perm)) if n_lines else None
        uf = UnionFind()
        for table in lsh.hashtables:
            for members in _multi_member_buckets(table, lsh.prepickle):
                report.candidate_buckets += 1
                _unite(members, sig, uf, threshold if verify else None, report)
        classes = uf.classes()
        for root, members in classes.items():
            for m in members[1:]:
                status[m] = REMOVED
        report.classes = len(classes)
        report.removed = sum(len(m) - 1 for m in classes.values())
        report.kept = report.input.documents - report.removed
        largest = heapq.nlargest(examples, classes.items(), key=lambda kv: (len(kv[1]), -kv[0]))
        wanted = {m: None for _, members in largest for m in members[:6]}
        removed_wanted = keep_removed_docids > 0
        removed_docids: list[str] = []

        def kept_lines() -> Iterator[bytes]:
            for index, (file, line_no, data) in enumerate(iter_raw_lines(input_path)):
                if index in wanted or (removed_wanted and status[index] == REMOVED
                                       and len(removed_docids) < keep_removed_docids):
                    document = parse_document(data, f"{file}:{line_no}")
                    if index in wanted:
                        wanted[index] = {"docid": document["docid"], "title": document["title"][:100],
                                         "text": document_text(document)[:160], "line": f"{file}:{line_no}"}
                    if status[index] == REMOVED and len(removed_docids) < keep_removed_docids:
                        removed_docids.append(document["docid"])
                if status[index] == KEEP:
                    yield data

        if output is not None:
            written = write_atomically(Path(output), kept_lines())
            if written != report.kept:
                raise RuntimeError(f"wrote {written} documents but expected {report.kept}: did the input change?")
        else:
            for _ in kept_lines():
                pass
        report.removed_docids = removed_docids
        for root, members in largest:
            report.largest.append({
                "size": len(members), "representative": wanted[members[0]],
                "examples": [wanted[m] for m in members[1:6]],
            })
        return report
    finally:
        sig_path.unlink(missing_ok=True)
        if storage:
            _drop_redis_keys(lsh, basename)


def default_workers() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _pass_one(input_path: Path, lsh: MinHashLSH, report: DedupReport, sig_out: Any, skip_bad: bool,
              workers: int, batch_size: int, progress: bool | None, num_perm: int, seed: int, n: int,
              ) -> bytearray:
    status = bytearray()
    seen = DocidSet()
    counter = _ByteCounter()
    bar = tqdm(total=total_bytes(input_path), unit="B", unit_scale=True, desc="dedup: minhash",
               disable=None if progress is None else not progress, mininterval=0.5)
    line_index = 0
    first = True
    insert = _band_inserter(lsh)
    try:
        with sig_out, lsh.insertion_session(buffer_size=50_000) as session:
            batches = _batches(iter_raw_lines(input_path, counter), batch_size)
            for batch in map_batches(_hash_batch, batches, workers, _init_worker,
                                     (num_perm, seed, n, lsh.hashranges)):
                k = len(batch.docids)
                flags = bytearray(k)
                for pos, bad in batch.bad:
                    _bad_line(bad, skip_bad, report)
                    flags[pos] = BAD
                fresh = seen.add_many(batch.docid_hashes)
                nonempty = batch.nonempty
                for pos in range(k):
                    if flags[pos]:
                        continue
                    if not fresh[pos]:
                        file, line_no = batch.where[pos]
                        _bad_line(BadLine("duplicate", f"{file}:{line_no}: duplicate docid {batch.docids[pos]!r}"),
                                  skip_bad, report)
                        flags[pos] = BAD
                        continue
                    report.input.documents += 1
                    if not nonempty[pos]:
                        report.input.empty += 1
                    elif first:  # the public path once: it records the MinHash scheme in the index
                        session.insert(line_index + pos, lean_minhash(batch.signatures[pos], seed),
                                       check_duplication=False)
                        first = False
                    else:
                        insert(line_index + pos, batch.band_keys[pos])
                sig_out.write(batch.signatures.tobytes())
                status += flags
                line_index += k
                report.input.lines += k
                bar.update(counter.update() - bar.n)
    finally:
        bar.close()
    return status


def _band_inserter(lsh: MinHashLSH) -> Callable[[int, tuple[bytes, ...]], None]:
    """``insert(key, band_keys)``: what ``MinHashLSH._insert(key, minhash, check_duplication=False,
    buffer=True)`` writes, given the band keys the worker already computed (``_H`` of each band).

    For datasketch's in-memory storage (``DictListStorage``/``DictSetStorage``, a ``defaultdict`` inside)
    the writes go straight to the dicts, skipping 10 wrapper calls per document (a third of the parent's
    time); tests check the result equals ``MinHashLSH.insert``'s.
    """
    tables = [getattr(t, "_dict", None) for t in lsh.hashtables]
    key_dict = getattr(lsh.keys, "_dict", None)
    if key_dict is not None and all(t is not None for t in tables) and not lsh.prepickle:
        pairs = tables

        def insert(key: int, keys: tuple[bytes, ...]) -> None:
            key_dict[key].extend(keys)
            for H, table in zip(keys, pairs):
                table[H].add(key)

        return insert

    def insert_generic(key: int, keys: tuple[bytes, ...]) -> None:
        stored: Any = pickle.dumps(key) if lsh.prepickle else key
        lsh.keys.insert(stored, *keys, buffer=True)
        for H, table in zip(keys, lsh.hashtables):
            table.insert(H, stored, buffer=True)

    return insert_generic


def _bad_line(bad: BadLine, skip_bad: bool, report: DedupReport) -> None:
    if not skip_bad:
        raise CollectionFormatError(bad.message + " (use --skip-bad to leave bad lines out)")
    report.input.add_bad(bad)


def _unite(members: list[int], sig: np.ndarray | None, uf: UnionFind, threshold: float | None,
           report: DedupReport) -> None:
    """Unite the members of one LSH bucket: each with the first member it is similar to (pivot clustering)."""
    members = sorted(members)
    if threshold is None or sig is None:
        for m in members[1:]:
            uf.union(members[0], m)
        return
    remaining = np.array(members, dtype=np.int64)
    while len(remaining) > 1:
        pivot = int(remaining[0])
        root = uf.find(pivot)
        rest = remaining[1:]
        same = np.fromiter((uf.find(int(m)) == root for m in rest), bool, len(rest))
        todo = rest[~same]
        if len(todo):
            sims = (sig[todo] == sig[pivot]).mean(axis=1)
            report.pairs_checked += len(todo)
            hit = sims >= threshold
            report.pairs_rejected += int((~hit).sum())
            for m in todo[hit]:
                uf.union(pivot, int(m))
            remaining = todo[~hit]
        else:
            remaining = todo


def write_report(path: Path, report: DedupReport) -> None:
    write_atomically(Path(path), [json.dumps(report.as_dict(), ensure_ascii=False, indent=2).encode() + b"\n"])
