"""From LSH buckets to near-duplicate classes: verify candidate pairs, then join them transitively.

Within a bucket every member is compared with the bucket's first member (its pivot, the first in input
order); those whose MinHash Jaccard estimate reaches the threshold are joined to it, and the rest form a
bucket of their own, with its own pivot, until fewer than two are left (at most ``size - 1`` comparisons
per round: a bucket of 100,000 copies of one boilerplate page is settled in one round). Each bucket's outcome
depends on its members only, never on the order buckets are read in. The accepted pairs, over all bands,
are the edges of a graph whose connected components (scipy) are the classes; a class keeps its smallest
line number, the document that comes first in the input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ragnarok.collection.bands import Groups

VERIFY_CHUNK = 8192  # pairs verified at a time: 2 x 4 MiB of signature rows at 128 permutations
GROUP_CHUNK = 65_536  # buckets split at a time


class SignatureFile:
    """The rows of dedup's signature scratch file (``num_perm`` uint32 per line), read with ``pread``: a memory
    map would count every page the verification touches in this process's resident set (512 MiB for 1 M
    documents), while pages read this way stay in the kernel's reclaimable page cache."""

    def __init__(self, path: Path, num_perm: int) -> None:
        self.width = 4 * num_perm
        self._fd = os.open(path, os.O_RDONLY)
        self.lines = os.fstat(self._fd).st_size // self.width

    def __len__(self) -> int:
        return self.lines

    def __getitem__(self, lines: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(lines, return_inverse=True)
        fd, width = self._fd, self.width
        data = b"".join([os.pread(fd, width, line * width) for line in unique.tolist()])
        return np.frombuffer(data, dtype=np.uint32).reshape(len(unique), -1)[inverse.ravel()]

    def close(self) -> None:
        os.close(self._fd)


class Verifier:
    """``verify(a, b)``: for each pair ``(a[i], b[i])`` of line numbers, whether its MinHash Jaccard estimate
    reaches ``threshold``. Each distinct pair is estimated once, however many bands it turns up in: verified
    pairs are remembered (9 bytes each). ``checked`` and ``rejected`` count distinct pairs."""

    def __init__(self, signatures: np.ndarray | SignatureFile, threshold: float) -> None:
        self.signatures, self.threshold = signatures, threshold
        self.span = np.uint64(max(len(signatures), 1))
        self.checked = self.rejected = 0
        self._keys, self._ok = np.empty(0, np.uint64), np.empty(0, bool)

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        keys, inverse = np.unique(a.astype(np.uint64) * self.span + b.astype(np.uint64), return_inverse=True)
        at = np.minimum(np.searchsorted(self._keys, keys), max(len(self._keys) - 1, 0))
        known = self._keys[at] == keys if len(self._keys) else np.zeros(len(keys), bool)
        ok = np.empty(len(keys), bool)
        ok[known] = self._ok[at[known]]
        fresh = keys[~known]
        ok[~known] = found = self._estimate(fresh)
        self.checked += len(fresh)
        self.rejected += int((~found).sum())
        merged = np.concatenate((self._keys, fresh))
        order = np.argsort(merged, kind="stable")
        self._keys, self._ok = merged[order], np.concatenate((self._ok, found))[order]
        return ok[inverse.ravel()]

    def _estimate(self, keys: np.ndarray) -> np.ndarray:
        ok = np.empty(len(keys), dtype=bool)
        for start in range(0, len(keys), VERIFY_CHUNK):
            chunk = keys[start : start + VERIFY_CHUNK]
            left = self.signatures[(chunk // self.span).astype(np.int64)]
            right = self.signatures[(chunk % self.span).astype(np.int64)]
            ok[start : start + len(chunk)] = (left == right).mean(axis=1) >= self.threshold
        return ok


def pivot_edges(groups: Groups, verify: Verifier | None, chunk: int = GROUP_CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """The accepted pairs ``(pivot, member)`` of every group (see the module doc), ``chunk`` groups at a time.
    Without ``verify`` every member joins its bucket's first member."""
    ends = np.cumsum(groups.sizes)
    left, right = [], []
    for g in range(0, len(groups.sizes), chunk):
        sizes = groups.sizes[g : g + chunk]
        start = int(ends[g - 1]) if g else 0
        members = groups.members[start : int(ends[g + len(sizes) - 1])]
        group = np.repeat(np.arange(len(sizes)), sizes)
        while len(members):
            first = np.concatenate(([True], group[1:] != group[:-1]))
            pivot = members[first][np.cumsum(first) - 1]
            rest = ~first
            a, b, group = pivot[rest], members[rest], group[rest]
            ok = np.ones(len(a), bool) if verify is None else verify(a, b)
            left.append(a[ok])
            right.append(b[ok])
            members, group = b[~ok], group[~ok]
            if len(group):  # groups with fewer than two left are done
                _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
                keep = counts[inverse.ravel()] > 1
                members, group = members[keep], group[keep]
    if not left:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(left), np.concatenate(right)


@dataclass
class Classes:
    """Near-duplicate classes: ``nodes`` (line numbers with a near-duplicate, ascending) and the class
    ``label`` of each; ``representative[label]`` is the class's smallest line number."""

    nodes: np.ndarray
    label: np.ndarray
    representative: np.ndarray

    @property
    def count(self) -> int:
        return len(self.representative)

    def removed(self) -> np.ndarray:
        """Line numbers of every member but the representative of its class."""
        return self.nodes[self.nodes != self.representative[self.label]]

    def largest(self, k: int) -> list[list[int]]:
        """The ``k`` largest classes (ties: the earlier representative first), each as its ascending members."""
        sizes = np.bincount(self.label, minlength=self.count)
        top = sorted(range(self.count), key=lambda c: (-sizes[c], self.representative[c]))[:k]
        return [self.nodes[self.label == c].tolist() for c in top]


def classes(a: np.ndarray, b: np.ndarray) -> Classes:
    """The connected components of the graph with edges ``(a[i], b[i])``."""
    nodes = np.unique(np.concatenate((a, b)))
    if not len(nodes):
        return Classes(nodes, np.empty(0, np.int64), np.empty(0, np.int64))
    ia, ib = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
    graph = coo_matrix((np.ones(len(ia), np.int8), (ia, ib)), shape=(len(nodes), len(nodes)))
    count, label = connected_components(graph, directed=False)
    _, first = np.unique(label, return_index=True)  # labels are 0..count-1; nodes ascend, so the first is smallest
    return Classes(nodes, label.astype(np.int64), nodes[first])
