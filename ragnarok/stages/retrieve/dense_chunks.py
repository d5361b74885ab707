"""A dense build's work in progress, kept so that a build that takes hours resumes where it stopped.

The build of ``<dir>/NAME`` writes into ``<dir>/.NAME.partial/`` (the same path for every run, not one per
process): ``plan.json`` (what is encoded: model, batch size, sentence store, the Lucene index's identity),
``lock`` (the building process's PID: a second build of the same index is refused while it runs), and the
vectors encoded so far in chunks of :data:`CHUNK_BATCHES` batches, ``chunk-00000/`` ... (``vectors.npy``,
``docids.txt``, the sentence store's ``keys.npy``/``store.npy``), each written in ``chunk-N.tmp/`` and renamed
whole. An interrupted or killed build leaves complete chunks only; the same command skips the segments they
hold and goes on from the next batch. Nothing in ``.NAME.partial`` is ever read as an index.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHUNK_BATCHES = 10  # batches per checkpoint


def partial_dir(out_dir: Path) -> Path:
    """Where the build of ``out_dir`` keeps its work in progress."""
    return out_dir.with_name(f".{out_dir.name}.partial")


def pid_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def build_lock(partial: Path, out_dir: Path) -> Iterator[None]:
    """Hold ``partial/lock`` (this PID) while building; a lock held by a running process is a
    :class:`RuntimeError` naming it, one left by a dead process is taken over."""
    partial.mkdir(parents=True, exist_ok=True)
    lock = partial / "lock"
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and pid_running(pid):
                raise RuntimeError(
                    f"another build of the dense index {out_dir} is running (pid {pid}); wait for "
                    f"it, or stop it and run this command again (it resumes)"
                ) from None
            lock.unlink(missing_ok=True)  # a dead build's lock
            continue
        with os.fdopen(fd, "w") as file:
            file.write(str(os.getpid()))
        break
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


@dataclass
class Chunks:
    """The chunks of one build in progress (see the module docstring)."""

    directory: Path

    def resume(self, plan: dict[str, Any]) -> int:
        """Keep the chunks of a build with the same ``plan`` (else remove them and record ``plan``); returns
        the number of segments they hold."""
        for leftover in self.directory.glob("chunk-*.tmp"):
            shutil.rmtree(leftover, ignore_errors=True)
        plan_file = self.directory / "plan.json"
        try:
            same = json.loads(plan_file.read_text(encoding="utf-8")) == plan
        except (OSError, ValueError):
            same = False
        if not same:
            for old in self.directory.glob("chunk-*"):
                shutil.rmtree(old, ignore_errors=True)
            plan_file.write_text(json.dumps(plan), encoding="utf-8")
        return sum(self.rows(chunk) for chunk in self.done())

    def done(self) -> list[Path]:
        return sorted(p for p in self.directory.glob("chunk-*") if not p.name.endswith(".tmp"))

    @staticmethod
    def rows(chunk: Path) -> int:
        return int(json.loads((chunk / "meta.json").read_text(encoding="utf-8"))["rows"])

    def write(
        self,
        docids: list[str],
        vectors: list[np.ndarray],
        store_keys: list[np.ndarray],
        store_vectors: list[np.ndarray],
    ) -> None:
        """Save one chunk (written aside, renamed whole)."""
        from ragnarok.runtime.interrupt import writing  # noqa: PLC0415

        index = len(self.done())
        tmp = self.directory / f"chunk-{index:05d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        np.save(tmp / "vectors.npy", np.concatenate(vectors))
        if store_keys:
            np.save(tmp / "keys.npy", np.concatenate(store_keys))
            np.save(tmp / "store.npy", np.concatenate(store_vectors))
        (tmp / "docids.txt").write_text("".join(d + "\n" for d in docids), encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps({"rows": len(docids)}), encoding="utf-8")
        with writing():
            tmp.rename(self.directory / f"chunk-{index:05d}")

    def vectors(self) -> Rows:
        """The encoded vectors of every chunk, memory-mapped, as one sequence of rows."""
        return Rows([chunk / "vectors.npy" for chunk in self.done()])

    def docids(self) -> list[str]:
        return [d for chunk in self.done() for d in (chunk / "docids.txt").read_text(encoding="utf-8").splitlines()]

    def store_parts(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(keys, vectors)`` of each chunk's sentence store part, in order."""
        for chunk in self.done():
            if (chunk / "keys.npy").exists():
                yield np.load(chunk / "keys.npy"), np.load(chunk / "store.npy", mmap_mode="r")


class Rows:
    """Row blocks read as one ``(n, dim)`` sequence: ``rows[a:b]`` is a float32 array of those rows only (read
    from the blocks they lie in), ``rows.take(indices)`` picks rows. A block is an array, or the path of a
    ``.npy`` file, memory-mapped for each read and unmapped after it: reading every row once (to build an
    index) leaves none of the file's pages in this process."""

    def __init__(self, blocks: list[np.ndarray | Path]):
        shapes = [_shape(b) for b in blocks]
        self.blocks = [b for b, shape in zip(blocks, shapes) if shape[0]]
        self.starts = np.cumsum([0, *[shape[0] for shape in shapes if shape[0]]])
        self.dim = int(shapes[0][1]) if shapes else 0

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _block(self, i: int) -> np.ndarray:
        block = self.blocks[i]
        return np.load(block, mmap_mode="r") if isinstance(block, Path) else block

    def __getitem__(self, window: slice) -> np.ndarray:
        start, stop, _ = window.indices(len(self))
        parts = []
        for i in range(len(self.blocks)):
            a, b = max(start, int(self.starts[i])), min(stop, int(self.starts[i + 1]))
            if a < b:
                parts.append(np.array(self._block(i)[a - self.starts[i] : b - self.starts[i]], dtype=np.float32))
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def take(self, indices: np.ndarray) -> np.ndarray:
        which = np.searchsorted(self.starts, indices, side="right") - 1
        rows = np.empty((len(indices), self.dim), dtype=np.float32)
        for w in np.unique(which):
            block = self._block(int(w))
            rows[which == w] = block[indices[which == w] - self.starts[w]]
        return rows


def _shape(block: np.ndarray | Path) -> tuple[int, int]:
    if isinstance(block, Path):
        return tuple(np.load(block, mmap_mode="r").shape)  # type: ignore[return-value]
    return (len(block), int(block.shape[1]) if block.ndim == 2 else 0)
