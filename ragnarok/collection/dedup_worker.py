"""What dedup's worker processes run: parse a batch of raw lines, MinHash them, hash their LSH bands.

Kept apart from :mod:`ragnarok.collection.dedup` so that workers import numpy and the JSONL reader only, not
datasketch (which imports scipy.integrate: 0.6 s per process); the parent hands them datasketch's
permutations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragnarok.collection.jsonl import BadLine, CollectionFormatError, classify, docid_hash, parse_document
from ragnarok.collection.minhash import SHINGLE_WORDS, band_hashes, band_keys, document_text, shingle_hashes, signatures


@dataclass
class Batch:
    """A worker's answer for one batch of raw lines (in order)."""

    signatures: np.ndarray  # (lines, num_perm) uint32
    docid_hashes: np.ndarray  # (lines,) uint64; 0 for bad lines
    docids: list[str | None]
    nonempty: np.ndarray  # (lines,) bool: has at least one shingle
    bad: list[tuple[int, BadLine]]  # (position in batch, what)
    where: list[tuple[str, int]]  # (file, line number) of each line
    band_hashes: np.ndarray | None  # (lines, bands) uint64, for the disk storage
    band_keys: list[tuple[bytes, ...]] | None  # per line, each band's bucket key (datasketch's _H)


_perms: np.ndarray | None = None
_n = SHINGLE_WORDS
_ranges: list[tuple[int, int]] = []
_keys = False


def init_worker(perms: np.ndarray, n: int, hashranges: list[tuple[int, int]], keys: bool) -> None:
    """``perms``: datasketch's permutations; ``n``: words per shingle; ``hashranges``: the LSH bands;
    ``keys``: compute datasketch's band keys (bytes) instead of 64-bit band hashes."""
    global _perms, _n, _ranges, _keys
    _perms, _n, _ranges, _keys = perms, n, hashranges, keys


def hash_batch(items: list[tuple[str, int, bytes]]) -> Batch:
    assert _perms is not None, "init_worker first"
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
    shingles, counts = shingle_hashes(texts, _n)
    sigs = signatures(shingles, counts, _perms)
    return Batch(
        sigs,
        hashes,
        docids,
        counts > 0,
        bad,
        [(file, line_no) for file, line_no, _ in items],
        None if _keys else band_hashes(sigs, _ranges),
        band_keys(sigs, _ranges) if _keys else None,
    )
