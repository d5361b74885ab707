"""Near-duplicate removal with MinHash and LSH (datasketch), as MS MARCO V2.1 was curated.

Documents whose 9-gram word shingles have a MinHash Jaccard estimate at or above ``threshold`` are joined into
classes, and each class keeps the document that comes first in the input, so the result depends neither on
the number of workers nor on the storage. It runs in two streaming passes over input of any size (plain or
gzip), with the LSH buckets on disk, in memory or in Redis.

Design notes: docs/internals/collection.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ragnarok.collection.bands import BucketStore, Groups, SortedBands
from ragnarok.collection.clusters import Classes, SignatureFile, Verifier, classes, pivot_edges
from ragnarok.collection.dedup_worker import Batch, hash_batch, init_worker
from ragnarok.collection.jsonl import (
    BadLine,
    CollectionFormatError,
    DocidSet,
    InputReport,
    _ByteCounter,
    iter_raw_lines,
    parse_document,
    total_bytes,
)
from ragnarok.collection.lsh import DatasketchBuckets, datasketch_lsh
from ragnarok.collection.minhash import DEFAULT_NUM_PERM, SEED, SHINGLE_WORDS, document_text, permutations
from ragnarok.collection.workers import batches, default_workers, map_batches, write_atomically

DEFAULT_THRESHOLD = 0.8
BATCH = 2000
STORAGES = ("disk", "memory")
# datasketch picks (bands, rows) minimising weighted false-positive and false-negative areas under its
# S-curve. Candidates are verified against the threshold afterwards, so a false positive costs only a check
# while a false negative is a missed duplicate: weigh recall up. At threshold 0.8 and 128 permutations this
# gives 12 bands x 10 rows: pairs at Jaccard 0.9 become candidates with probability 0.994 (0.929 with
# datasketch's default equal weights, 9 x 13), at 0.85 with 0.928 (0.686).
LSH_WEIGHTS = (0.2, 0.8)

# the status of each input line: kept and compared, bad (left out), removed, kept without comparison (empty)
KEEP, BAD, REMOVED, EMPTY = 0, 1, 2, 3

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
            "documents_in": self.input.documents,
            "documents_out": self.kept,
            "classes": self.classes,
            "removed": self.removed,
            "percent_removed": round(self.percent_removed, 4),
            "threshold": self.threshold,
            "num_perm": self.num_perm,
            "bands": self.bands,
            "rows": self.rows,
            "storage": self.storage,
            "shingle": f"{SHINGLE_WORDS}-word",
            "representative": "first in input order",
            "candidate_buckets": self.candidate_buckets,
            "pairs_checked": self.pairs_checked,
            "pairs_rejected": self.pairs_rejected,
            "input": self.input.as_dict(),
            "largest_classes": self.largest,
        }

    def summary(self) -> str:
        lines = [
            f"documents in: {self.input.documents:,}  out: {self.kept:,}",
            f"near-duplicate classes: {self.classes:,}  removed: {self.removed:,} ({self.percent_removed:.2f} %)",
            f"threshold {self.threshold}, {self.num_perm} permutations ({self.bands} bands x {self.rows} rows), "
            f"{SHINGLE_WORDS}-word shingles, {self.storage} LSH buckets",
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
    input_path: Path,
    output: Path | None,
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = DEFAULT_NUM_PERM,
    storage: str = "disk",
    redis_url: str | None = None,
    skip_bad: bool = False,
    workers: int | None = None,
    verify: bool = True,
    batch_size: int = BATCH,
    examples: int = 10,
    progress: bool | None = None,
    seed: int = SEED,
    shingle_words: int = SHINGLE_WORDS,
    keep_removed_docids: int = 0,
) -> DedupReport:
    """Remove near-duplicates from the JSONL collection ``input_path`` into ``output`` (see module doc).

    ``output=None`` only reports. Bad lines raise :class:`CollectionFormatError` (file:line) before ``output``
    is touched, unless ``skip_bad``: then they are left out of ``output`` and counted in the report.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm < 16:
        raise ValueError(f"num_perm must be >= 16, got {num_perm}")
    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {', '.join(STORAGES)}, got {storage!r}")
    input_path = Path(input_path)
    workers = default_workers() if workers is None else workers
    scratch_dir = Path(output).parent if output else Path(tempfile.gettempdir())
    scratch_dir.mkdir(parents=True, exist_ok=True)
    lsh, redis_basename = datasketch_lsh(threshold, num_perm, LSH_WEIGHTS, redis_url)
    store: BucketStore = (
        DatasketchBuckets(lsh, seed, redis_basename)
        if redis_url or storage == "memory"
        else SortedBands(scratch_dir, lsh.b)
    )
    report = DedupReport(threshold, num_perm, lsh.b, lsh.r, store.storage)
    sig_path: Path | None = None
    try:
        fd, sig_name = tempfile.mkstemp(prefix=".dedup-signatures-", dir=scratch_dir)
        sig_path = Path(sig_name)
        status = _pass_one(
            input_path,
            store,
            lsh.hashranges,
            report,
            os.fdopen(fd, "wb"),
            skip_bad,
            workers,
            batch_size,
            progress,
            num_perm,
            seed,
            shingle_words,
        )
        groups = store.groups(status == KEEP)
        report.candidate_buckets = len(groups.sizes)
        found = _classes(groups, sig_path, len(status), num_perm, threshold if verify else None, report)
        status[found.removed()] = REMOVED
        report.classes = found.count
        report.removed = int((status == REMOVED).sum())
        report.kept = report.input.documents - report.removed
        _copy_kept(input_path, output, status, found.largest(examples), report, keep_removed_docids)
        return report
    finally:
        store.close()
        if sig_path is not None:
            sig_path.unlink(missing_ok=True)


def _pass_one(
    input_path: Path,
    store: BucketStore,
    hashranges: list[tuple[int, int]],
    report: DedupReport,
    sig_out: Any,
    skip_bad: bool,
    workers: int,
    batch_size: int,
    progress: bool | None,
    num_perm: int,
    seed: int,
    n: int,
) -> np.ndarray:
    """MinHash every line; returns the status of each line (KEEP, BAD or EMPTY)."""
    statuses = []
    seen = DocidSet()
    counter = _ByteCounter()
    bar = tqdm(
        total=total_bytes(input_path),
        unit="B",
        unit_scale=True,
        desc="dedup: minhash",
        disable=None if progress is None else not progress,
        mininterval=0.5,
    )
    line_index = 0
    try:
        with sig_out:
            chunks = batches(iter_raw_lines(input_path, counter), batch_size)
            for batch in map_batches(
                hash_batch,
                chunks,
                workers,
                init_worker,
                (permutations(num_perm, seed), n, hashranges, store.wants_keys),
            ):
                flags = _line_status(batch, seen, skip_bad, report)
                store.add(line_index, flags == KEEP, batch)
                sig_out.write(batch.signatures.tobytes())
                statuses.append(flags)
                line_index += len(flags)
                bar.update(counter.update() - bar.n)
    finally:
        bar.close()
    report.input.lines = line_index
    return np.concatenate(statuses) if statuses else np.empty(0, np.uint8)


def _line_status(batch: Batch, seen: DocidSet, skip_bad: bool, report: DedupReport) -> np.ndarray:
    """KEEP, BAD or EMPTY for each line of a batch; bad lines and repeated docids fail unless ``skip_bad``."""
    flags = np.full(len(batch.docids), KEEP, np.uint8)
    for pos, bad in batch.bad:
        _bad_line(bad, skip_bad, report)
        flags[pos] = BAD
    valid = np.flatnonzero(flags == KEEP)
    for pos in valid[~seen.add_many(batch.docid_hashes[valid])].tolist():
        file, line_no = batch.where[pos]
        _bad_line(BadLine("duplicate", f"{file}:{line_no}: duplicate docid {batch.docids[pos]!r}"), skip_bad, report)
        flags[pos] = BAD
    documents = flags == KEEP
    empty = documents & ~batch.nonempty
    flags[empty] = EMPTY
    report.input.documents += int(documents.sum())
    report.input.empty += int(empty.sum())
    return flags


def _bad_line(bad: BadLine, skip_bad: bool, report: DedupReport) -> None:
    if not skip_bad:
        raise CollectionFormatError(bad.message + " (use --skip-bad to leave bad lines out)")
    report.input.add_bad(bad)


def _classes(
    groups: Groups, sig_path: Path, n_lines: int, num_perm: int, threshold: float | None, report: DedupReport
) -> Classes:
    sig = SignatureFile(sig_path, num_perm)
    if len(sig) != n_lines:
        raise RuntimeError(f"{sig_path} holds {len(sig)} signatures for {n_lines} lines")
    verify = None if threshold is None else Verifier(sig, threshold)
    try:
        a, b = pivot_edges(groups, verify)
    finally:
        sig.close()
    if verify is not None:
        report.pairs_checked, report.pairs_rejected = verify.checked, verify.rejected
    return classes(a, b)


def _copy_kept(
    input_path: Path,
    output: Path | None,
    status: np.ndarray,
    largest: list[list[int]],
    report: DedupReport,
    keep_removed_docids: int,
) -> None:
    """Pass 2: the kept lines to ``output`` (atomically); the examples of the largest classes to the report."""
    wanted: dict[int, dict[str, str] | None] = {m: None for members in largest for m in members[:6]}
    removed_docids: list[str] = []
    codes = status.tobytes()  # indexing bytes is far cheaper than indexing a numpy array, line by line

    def kept_lines() -> Iterator[bytes]:
        lines = written = 0
        for index, (file, line_no, data) in enumerate(iter_raw_lines(input_path)):
            lines += 1
            if index >= len(codes):  # more lines than pass 1 read
                break
            code = codes[index]
            collect = code == REMOVED and len(removed_docids) < keep_removed_docids
            if index in wanted or collect:
                document = parse_document(data, f"{file}:{line_no}")
                if index in wanted:
                    wanted[index] = {
                        "docid": document["docid"],
                        "title": document["title"][:100],
                        "text": document_text(document)[:160],
                        "line": f"{file}:{line_no}",
                    }
                if collect:
                    removed_docids.append(document["docid"])
            if code == KEEP or code == EMPTY:
                written += 1
                yield data
        if lines != len(codes) or written != report.kept:  # raised before OUTPUT is replaced
            raise RuntimeError(
                f"{input_path} changed while it was deduplicated (its lines differ between the "
                f"two passes); the output was not written"
            )

    if output is not None:
        write_atomically(Path(output), kept_lines())
    else:
        for _ in kept_lines():
            pass
    report.removed_docids = removed_docids
    report.largest = [
        {"size": len(members), "representative": wanted[members[0]], "examples": [wanted[m] for m in members[1:6]]}
        for members in largest
    ]


def write_report(path: Path, report: DedupReport) -> None:
    write_atomically(Path(path), [json.dumps(report.as_dict(), ensure_ascii=False, indent=2).encode() + b"\n"])
