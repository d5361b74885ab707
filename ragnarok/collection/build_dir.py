"""The persistent work directory of a resumable index build (``OUTPUT.partial/``): what build it belongs to,
who is building it (a lock with the PID), and the disk it needs.

* :func:`identity`: the input's files (path, size, mtime) and the build's options; a work directory made for
  another identity is started over.
* :class:`BuildLock`: one build of an output at a time (``flock`` on ``lock``, released by the kernel when
  the process dies, even by SIGKILL; the file names the PID for the error).
* :func:`check_free_disk` and :func:`disk_full`: free space checked before starting, and a disk that fills
  during the build turned into one clear error.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

from ragnarok.collection.jsonl import collection_files

FORMAT = 1  # the layout of the work directory; another one is started over
# Disk per byte of input at its peak (chunk files still to index beside the shards done; at the merge, the
# shards beside their merged copy). Measured on 100k V2.1-style segments (100 MB) indexed with
# positions, docvectors and raw documents: chunk files 1.9x the input (an Anserini record repeats the text as
# "contents"), the index 0.88x the chunk files; so 1.9 + 1.68 = 3.6x, taken as 3.8x. Documents: their
# 10-sentence windows overlap by 5, so every sentence is in two segments: twice that (not measured).
SEGMENTED_RATIO = 3.8
DOCUMENTS_RATIO = 7.6
DISK_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
DISK_WORDS = ("No space left on device", "File too large", "Disk quota exceeded")


class DiskFullError(OSError):
    """The disk filled (or a file-size limit was hit) during a build."""

    def __str__(self) -> str:
        return str(self.strerror)


def identity(input_path: Path, options: dict[str, Any]) -> dict[str, Any]:
    """What a work directory is for: the input's files with their sizes and modification times, and the
    options that change the index."""
    files = []
    for file in collection_files(Path(input_path)):
        stat = file.stat()
        files.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
    return {"format": FORMAT, "input": files, "options": options}


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    """``value`` as ``path``, whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value), encoding="utf-8")
    os.replace(tmp, path)


class BuildLock:
    """An exclusive lock on a work directory for this process's lifetime (``flock``: a killed process's lock
    goes with it). :class:`RuntimeError` names the PID holding it."""

    def __init__(self, work: Path, output: Path):
        work.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(work / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(self._fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(self._fd)
            raise RuntimeError(
                f"another build of {output} is running (PID {pid}); wait for it to end or stop "
                "it, then run this command again"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def size_of(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when absent)."""
    if not path.exists():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def estimate_bytes(input_path: Path, segmented: bool) -> int:
    """Disk a build of ``input_path`` needs: its chunk files and its index (see the ratios above). A
    ``.gz`` input is counted at four times its size (JSON text compresses about 4:1)."""
    size = sum(f.stat().st_size * (4 if f.name.endswith(".gz") else 1) for f in collection_files(input_path))
    return int(size * (SEGMENTED_RATIO if segmented else DOCUMENTS_RATIO))


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def check_free_disk(work: Path, need: int) -> None:
    """Refuse to start when ``work``'s file system has less than ``need`` bytes free."""
    free = shutil.disk_usage(work).free
    if need > free:
        raise DiskFullError(
            errno.ENOSPC,
            f"not enough free disk for this build: it needs about {gb(need)} "
            f"(chunk files and index, estimated from the input's size) and "
            f"{gb(free)} is free at {work}; free space or build on another disk",
        )


def is_disk_full(exc: BaseException, log: str = "") -> bool:
    """Whether ``exc`` (a Python OSError or a Java exception) or Anserini's ``log`` says the disk filled."""
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        return True
    text = f"{exc} {getattr(exc, 'stacktrace', '')} {log}"
    return any(word in text for word in DISK_WORDS)


def disk_full(while_: str) -> DiskFullError:
    return DiskFullError(
        errno.ENOSPC,
        f"the disk filled while {while_}; nothing was put in place; free space "
        "and run the same command again: it resumes",
    )


# --------------------------------------------------------------------------------------------- shard size

TARGET_SHARDS = 10  # the default shard size: a tenth of the collection (killed halfway, about half is kept)
MIN_SHARD, MAX_SHARD = 5_000, 1_000_000  # segments: a shard's own start and commit cost about a second
SAMPLE_BYTES = 4 << 20  # input read to estimate the collection's segments


def estimate_segments(input_path: Path, segmented: bool) -> int:
    """About how many segments ``input_path`` gives, from its first file's first few MB (read as a block, never
    line by line: a huge line costs no more) and the input's size on disk (compressed bytes for .gz, on both
    sides): V2.1 segments are its lines, documents are segmented as the build does."""
    import gzip  # noqa: PLC0415

    from ragnarok.collection.jsonl import parse_document, total_bytes  # noqa: PLC0415
    from ragnarok.collection.segment import Segmenter  # noqa: PLC0415

    first = collection_files(input_path)[0]
    with open(first, "rb") as raw:
        if first.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw) as unzipped:
                sample = unzipped.read(SAMPLE_BYTES)
        else:
            sample = raw.read(SAMPLE_BYTES)
        read = max(raw.tell(), 1)
    lines = sample.split(b"\n")
    if len(lines) > 1 and len(sample) == SAMPLE_BYTES:
        lines = lines[:-1]  # a line cut by the sample's end
    lines = [line for line in lines if line.strip()]
    count = len(lines)
    if not segmented:
        segmenter, count = Segmenter(), 0
        for n, data in enumerate(lines):
            try:
                count += sum(1 for _ in segmenter.segment(parse_document(data, f"line {n}")))
            except (ValueError, LookupError):
                pass
    return max(1, round(count / read * total_bytes(input_path)))


def default_shard_segments(input_path: Path, segmented: bool) -> int:
    """A tenth of the collection's estimated segments (3 % more: an estimate a little short leaves no small
    eleventh shard), within ``MIN_SHARD``..``MAX_SHARD``."""
    estimate = estimate_segments(input_path, segmented) * 103 // 100
    return min(MAX_SHARD, max(MIN_SHARD, -(-estimate // TARGET_SHARDS)))
