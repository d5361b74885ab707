"""An append-only JSON-lines output that a killed run can resume.

Each finished topic is one line, written with a single ``write`` on an ``O_APPEND`` descriptor: the kernel
finishes a write it has started even when the process is killed, so a line is in the file whole or not at
all. Opening an existing file drops a torn last line anyway (a full disk, a power cut), keeps every complete
line, and tells which topics they answer, so the run skips them. A new file is created with the first line,
so a run that writes nothing (refused, or killed before its first topic) leaves nothing behind.

Every file written here is a normal file: mode 0666 less the umask (0644 under the usual umask 022).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragnarok.runtime.interrupt import writing

#: Mode of every file created here, before the umask: what ``open(path, "w")`` gives.
FILE_MODE = 0o666


class OutputError(OSError):
    """The output cannot be written, or holds lines of another run."""


class JsonLinesLog:
    """``topic_of`` tells the topic a line answers; ``foreign`` (optional) says why a line already in the file
    belongs to another run (another run id, another format), or None when it belongs to this one: opening a
    file with such a line fails, and the file is left as it was."""

    def __init__(
        self,
        path: str | Path,
        topic_of: Callable[[dict[str, Any]], str | None],
        foreign: Callable[[dict[str, Any]], str | None] | None = None,
    ):
        self.path = Path(path)
        self.topic_of, self.foreign = topic_of, foreign
        self.done: set[str] = set()
        self._fd: int | None = None

    def open(self) -> "JsonLinesLog":
        """Read what is there (dropping a torn last line) and open it for appending; a new file is only checked
        for (its folder exists, writable) and created by the first :meth:`append`."""
        if self.path.is_dir():
            raise OutputError(f"output {self.path} is a directory")
        if not self.path.parent.is_dir():
            raise OutputError(f"output folder {self.path.parent} does not exist")
        if self.path.exists():
            self._recover()
            self._open_fd()
        elif not os.access(self.path.parent, os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {self.path}: output folder {self.path.parent} is not writable")
        return self

    def _open_fd(self) -> None:
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise OutputError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _recover(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise OutputError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        complete = data[: data.rfind(b"\n") + 1]
        for n, line in enumerate(complete.split(b"\n")[:-1], start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise OutputError(
                    f"{self.path}:{n} is not a JSON object line; not resuming into it (give another --output)"
                )
            why = self.foreign(record) if self.foreign is not None else None
            if why:
                raise OutputError(f"{self.path}:{n} {why}")
            topic = self.topic_of(record)
            if topic is not None:
                self.done.add(topic)
        if len(complete) < len(data):  # a torn line from a crash: drop it, keep every whole one
            try:
                os.truncate(self.path, len(complete))
            except OSError as exc:
                raise OutputError(f"cannot repair {self.path}: {exc.strerror or exc}") from None

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one whole line (one ``write``; the page cache keeps it if we are killed)."""
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        if self._fd is None:
            self._open_fd()
            assert self._fd is not None
        with writing():  # an interrupted run leaves after the line, not in it (ragnarok.runtime.interrupt)
            written = os.write(self._fd, data)
            while written < len(data):  # only on a full disk or the like; finish the line or fail loudly
                written += os.write(self._fd, data[written:])
        topic = self.topic_of(record)
        if topic is not None:
            self.done.add(topic)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "JsonLinesLog":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def atomic_write(path: str | Path, data: bytes, check: Callable[[Path], object] | None = None) -> None:
    """Replace ``path`` with ``data`` at once (a temporary file beside it, renamed over it), as a normal file
    (:data:`FILE_MODE` less the umask). ``check`` sees the temporary file first; when it raises, ``path`` is
    left as it was."""
    path = Path(path)
    while True:
        tmp = path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")  # same extension
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a log (a torn last line ignored)."""
    data = Path(path).read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].split(b"\n") if line.strip()]


def in_topic_order(path: str | Path, order: list[str], topic_of: Callable[[dict[str, Any]], str | None]) -> bool:
    """Rewrite a finished log with its lines in the topics' order (``order``: topic ids as the topic file lists
    them; lines of other topics keep their place after them), so that two runs of the same pipeline write the
    same bytes whatever order their topics finished in. Replaced at once (:func:`atomic_write`); nothing is
    written when the lines are in order already, or when there is no file. Returns whether it was rewritten."""
    path = Path(path)
    if not path.exists():
        return False
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    lines = [line for line in complete.split(b"\n") if line.strip()]
    rank = {qid: i for i, qid in enumerate(order)}

    def key(item: tuple[int, bytes]) -> tuple[int, int]:
        try:
            topic = topic_of(json.loads(item[1]))
        except ValueError:
            topic = None
        return (rank.get(topic, len(rank)) if topic is not None else len(rank), item[0])

    ordered = [line for _, line in sorted(enumerate(lines), key=key)]
    if ordered == lines:
        return False
    with writing():  # not cut by an interrupt half-way (ragnarok.runtime.interrupt)
        atomic_write(path, b"".join(line + b"\n" for line in ordered) + data[len(complete) :])
    return True
