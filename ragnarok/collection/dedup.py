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
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasketch import MinHashLSH
from tqdm import tqdm

from ragnarok.collection.jsonl import (
    BadLine,
    CollectionFormatError,
    DocidSet,
    InputReport,
    _ByteCounter,
    classify,
    docid_hash,
    iter_raw_lines,
    parse_document,
    total_bytes,
)
from ragnarok.collection.lsh import (
    UnionFind,
    band_inserter,
    drop_redis_keys,
    multi_member_buckets,
    redis_storage,
)
from ragnarok.collection.minhash import (
    DEFAULT_NUM_PERM,
    SEED,
    SHINGLE_WORDS,
    band_keys,
    document_text,
    lean_minhash,
    permutations,
    shingle_hashes,
    signatures,
)
from ragnarok.collection.workers import batches, default_workers, map_batches, write_atomically

DEFAULT_THRESHOLD = 0.8
BATCH = 2000
# datasketch picks (bands, rows) minimising weighted false-positive and false-negative areas under its
# S-curve. Candidates are verified against the threshold afterwards, so a false positive costs only a check
# while a false negative is a missed duplicate: weigh recall up. At threshold 0.8 and 128 permutations this
# gives 12 bands x 10 rows: pairs at Jaccard 0.9 become candidates with probability 0.994 (0.929 with
# datasketch's default equal weights, 9 x 13), at 0.85 with 0.928 (0.686).
LSH_WEIGHTS = (0.2, 0.8)

KEEP, BAD, REMOVED = 0, 1, 2

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
            for members in multi_member_buckets(table, lsh.prepickle):
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
            drop_redis_keys(lsh, basename)


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
    insert = band_inserter(lsh)
    try:
        with sig_out, lsh.insertion_session(buffer_size=50_000) as session:
            chunks = batches(iter_raw_lines(input_path, counter), batch_size)
            for batch in map_batches(_hash_batch, chunks, workers, _init_worker,
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
