"""A Lucene index's files, read and replaced without the JVM: is there a committed index, which build is it, and
putting a freshly built index (Lucene or dense) in place of the live one. Below the stages (core): the retrievers
and the passage lookup read indexes that the collection tools build."""

from __future__ import annotations

import shutil
from pathlib import Path


def is_lucene_index(path: Path) -> bool:
    """Whether ``path`` holds a committed Lucene index."""
    return any(Path(path).glob("segments_*"))


def index_identity(path: Path) -> dict[str, str]:
    """What identifies one build of a Lucene index, read without the JVM: the name of its latest commit point
    (``segments_N``) and the SHA-256 of that file, which lists every segment with its random 16-byte id, so
    any re-index (even of the same documents into the same directory) gives a different identity."""
    import hashlib  # noqa: PLC0415

    commits = [p for p in Path(path).glob("segments_*") if p.name[len("segments_") :].isalnum()]
    if not commits:
        raise FileNotFoundError(f"no Lucene index at {path}")
    latest = max(commits, key=lambda p: int(p.name[len("segments_") :], 36))
    return {"commit": latest.name, "sha256": hashlib.sha256(latest.read_bytes()).hexdigest()}


def put_in_place(new: Path, live: Path) -> None:
    """``new`` (a complete index) becomes ``live``; the old one is removed. Where the kernel exchanges two
    paths atomically (Linux ``renameat2``), ``live`` always holds one whole index, old or new; elsewhere two
    renames, never cut apart by an interrupt."""
    from ragnarok.runtime.interrupt import writing  # noqa: PLC0415

    old = live.with_name(live.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    with writing():
        if live.exists() and _exchange(new, live):
            shutil.rmtree(new, ignore_errors=True)  # now the old index
            return
        if live.exists():
            live.rename(old)
        new.rename(live)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``); False where the kernel or libc has none."""
    import ctypes  # noqa: PLC0415
    import os  # noqa: PLC0415

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
