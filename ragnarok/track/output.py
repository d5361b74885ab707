"""An append-only JSON-lines output that a killed run can resume.

Each finished topic is one line, written with a single ``write`` on an ``O_APPEND`` descriptor: the kernel
finishes a write it has started even when the process is killed, so a line is in the file whole or not at
all. Opening an existing file drops a torn last line anyway (a full disk, a power cut), keeps every complete
line, and tells which topics they answer, so the run skips them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


class OutputError(OSError):
    """The output cannot be written, or holds lines of another run."""


class JsonLinesLog:
    def __init__(self, path: str | Path, topic_of: Callable[[dict[str, Any]], str | None],
                 run_of: Callable[[dict[str, Any]], str | None] | None = None, run_id: str | None = None):
        self.path = Path(path)
        self.topic_of, self.run_of, self.run_id = topic_of, run_of, run_id
        self.done: set[str] = set()
        self._fd: int | None = None

    def open(self) -> "JsonLinesLog":
        """Read what is there (dropping a torn last line), then open for appending."""
        if self.path.is_dir():
            raise OutputError(f"output {self.path} is a directory")
        if not self.path.parent.is_dir():
            raise OutputError(f"output folder {self.path.parent} does not exist")
        if self.path.exists():
            self._recover()
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        return self

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
                raise OutputError(f"{self.path}:{n} is not a JSON line; not resuming into it "
                                  "(give another --output)") from None
            if self.run_of is not None and self.run_id is not None and self.run_of(record) != self.run_id:
                raise OutputError(f"{self.path} holds run {self.run_of(record)!r}, not {self.run_id!r}; "
                                  "give another --output or the same --run-id")
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
        assert self._fd is not None, "open() first"
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode()
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


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a log (a torn last line ignored)."""
    data = Path(path).read_bytes()
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].split(b"\n") if line.strip()]
