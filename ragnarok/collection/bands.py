"""LSH buckets on disk, found by sorting: the default storage of ``ragnarok collection dedup``.

datasketch's ``MinHashLSH`` keeps, per band, a dict from the band's rows (bytes) to the set of documents in
that bucket: about 4.7 KiB per document in memory, and a dict insert per band and document. Here the workers
hash each band of each signature to 64 bits (:func:`~ragnarok.collection.minhash.band_hashes`), the parent
appends them to one scratch file per band (8 bytes per document and band, written a batch at a time), and at
the end each band's file is read and sorted once: runs of equal hashes are its buckets. Documents share a
bucket exactly when datasketch's LSH would put them in one (equal rows hash equally; different rows collide
with probability about 2^-64, and verification would reject such a pair anyway).

Memory: one band at a time, about 25 bytes per document while it is sorted (its hashes, their order, a
flag), 8 more when some lines are not compared (bad or empty); the files themselves are page cache.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np


@dataclass
class Groups:
    """Buckets holding two or more documents, concatenated: ``members`` (line numbers, ascending within a
    bucket) split by ``sizes``. Buckets of different bands are separate groups, even with equal members."""

    members: np.ndarray
    sizes: np.ndarray

    @classmethod
    def concat(cls, parts: list[Groups]) -> Groups:
        if not parts:
            return cls(np.empty(0, np.int64), np.empty(0, np.int64))
        return cls(
            np.concatenate([p.members for p in parts]).astype(np.int64, copy=False),
            np.concatenate([p.sizes for p in parts]).astype(np.int64, copy=False),
        )

    @classmethod
    def from_lists(cls, buckets: list[list[int]]) -> Groups:
        members = [sorted(b) for b in buckets if len(b) > 1]
        return cls(
            np.fromiter((m for b in members for m in b), np.int64),
            np.fromiter((len(b) for b in members), np.int64, len(members)),
        )


class BucketStore(Protocol):
    """Where dedup's pass 1 puts each document's LSH bands, and where the buckets come from afterwards."""

    storage: str  # its name in the report
    wants_keys: bool  # True: workers compute datasketch's band keys (bytes); False: 64-bit band hashes

    def add(self, first_line: int, compared: np.ndarray, batch: Any) -> None:
        """The next batch of lines (``first_line`` onwards); ``compared``: the lines that are documents to
        compare (not bad, not empty)."""

    def groups(self, compared: np.ndarray) -> Groups:
        """Every bucket of every band that holds two or more of the ``compared`` lines."""

    def close(self) -> None:
        """Release scratch space (also after a failure)."""


def runs(hashes: np.ndarray, lines: np.ndarray | None = None) -> Groups:
    """The groups of equal ``hashes`` (two or more per group), as positions in ``hashes`` or as ``lines``.

    Sorts ``hashes`` in place. Peak memory: ``hashes``, its order, and a byte per element.
    """
    if len(hashes) < 2:
        return Groups.concat([])
    order = np.argsort(hashes, kind="stable")  # stable: members stay in input order within a bucket
    hashes[:] = hashes[order]
    same = hashes[1:] == hashes[:-1]  # element i+1 is in element i's bucket
    member = np.zeros(len(hashes), dtype=bool)
    member[1:] = same
    member[:-1] |= same
    positions = np.flatnonzero(member)
    members = order[positions]
    # a group starts where its first member's predecessor is in another bucket
    starts = np.flatnonzero(np.concatenate(([True], ~same[positions[1:] - 1])))
    sizes = np.diff(np.append(starts, len(positions)))
    return Groups(members if lines is None else lines[members], sizes)


class SortedBands:
    """One append-only scratch file of band hashes per band, in ``directory``; sorted once by :meth:`groups`."""

    storage = "disk"
    wants_keys = False  # the workers compute 64-bit band hashes for it

    def __init__(self, directory: Path, bands: int) -> None:
        self.paths: list[Path] = []
        self._files = []
        try:
            for band in range(bands):
                fd, name = tempfile.mkstemp(prefix=f".dedup-band{band}-", dir=directory)
                self.paths.append(Path(name))
                self._files.append(os.fdopen(fd, "wb"))
        except BaseException:
            self.close()
            raise

    def add(self, first_line: int, compared: np.ndarray, batch: Any) -> None:  # noqa: ARG002
        """Append ``batch.band_hashes`` ``(lines, bands)``, the next lines of the input (every line, in order:
        :meth:`groups` leaves out those not compared)."""
        for band, f in enumerate(self._files):
            f.write(np.ascontiguousarray(batch.band_hashes[:, band]).tobytes())

    def groups(self, compared: np.ndarray) -> Groups:
        """The buckets of every band among the lines where ``compared`` (bool per line) is set."""
        self._close_files()
        lines = None if compared.all() else np.flatnonzero(compared)
        parts = []
        for path in self.paths:
            hashes = np.fromfile(path, dtype=np.uint64)
            if len(hashes) != len(compared):
                raise RuntimeError(f"{path} holds {len(hashes)} band hashes for {len(compared)} lines")
            parts.append(runs(hashes if lines is None else hashes[lines], lines))
            del hashes
            path.unlink()
        return Groups.concat(parts)

    def _close_files(self) -> None:
        for f in self._files:
            f.close()

    def close(self) -> None:
        self._close_files()
        for path in self.paths:
            path.unlink(missing_ok=True)
