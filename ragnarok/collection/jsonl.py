"""Reading JSONL collections (plain or gzip, one file or a directory of them) with line-numbered errors.

Two layers: :func:`iter_jsonl` / :func:`iter_documents` yield parsed records (the simple API), and
:func:`iter_raw_lines` + :func:`parse_document` are the streaming building blocks of the large-scale commands,
which read raw lines in one process, parse them in others and classify bad input per line (``malformed``,
``utf8``, ``no-docid``, ``duplicate``).

Design notes: docs/internals/collection.md.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np
from pydantic_core import from_json


class CollectionFormatError(ValueError):
    pass


BAD_KINDS = ("malformed", "utf8", "no-docid", "duplicate")


def collection_files(path: Path) -> list[Path]:
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith((".jsonl", ".jsonl.gz", ".json")))
        if files:
            return files
        raise FileNotFoundError(f"no .jsonl or .jsonl.gz files in {path}")
    raise FileNotFoundError(f"collection not found: {path}")


def _open(path: Path) -> TextIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


# --------------------------------------------------------------------------------------------- raw lines


class _ByteCounter:
    """Bytes read from the files on disk so far (compressed bytes for .gz): drives the progress bar."""

    def __init__(self) -> None:
        self.done = 0
        self._raw: BinaryIO | None = None
        self._base = 0

    def attach(self, raw: BinaryIO) -> None:
        self._base, self._raw = self.done, raw

    def update(self) -> int:
        if self._raw is not None and not self._raw.closed:
            self.done = self._base + self._raw.tell()
        return self.done


def total_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in collection_files(path))


READ_BUFFER = 1 << 20  # large reads: fewer system calls per line of 1-2 KB


def iter_raw_lines(path: Path, counter: _ByteCounter | None = None) -> Iterator[tuple[Path, int, bytes]]:
    """``(file, line_no, raw bytes)`` of every non-blank line under ``path``, in order (1-based line numbers)."""
    for file in collection_files(path):
        with open(file, "rb", buffering=READ_BUFFER) as raw:
            if counter is not None:
                counter.attach(raw)
            handle: BinaryIO = (
                gzip.GzipFile(fileobj=raw, mode="rb") if file.name.endswith(".gz") else raw  # type: ignore[assignment]
            )
            if file.name.endswith(".gz"):
                handle = io.BufferedReader(handle, buffer_size=1 << 20)  # type: ignore[arg-type]
            try:
                for line_no, line in enumerate(handle, start=1):
                    if line.strip():
                        yield file, line_no, line
            except (OSError, EOFError) as exc:  # truncated or corrupt gzip
                raise CollectionFormatError(f"{file}: cannot read ({exc})") from None
        if counter is not None:
            counter.done = counter._base + file.stat().st_size
            counter._raw = None


@dataclass
class BadLine:
    kind: str  # one of BAD_KINDS
    message: str  # "file:line: what is wrong"


def parse_record(data: bytes, where: str) -> dict[str, Any]:
    """One JSON object from one raw line; :class:`CollectionFormatError` names ``where`` (``file:line``).
    pydantic-core's parser first (about 2.5x the standard library's speed); a line it refuses (a lone
    surrogate, which the standard library accepts; or a real error, which the standard library then words)
    is read again by the standard library."""
    try:
        record = from_json(data)
    except ValueError:
        record = None
    if isinstance(record, dict):
        return record
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CollectionFormatError(f"{where}: not valid UTF-8 (byte {exc.start})") from None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise CollectionFormatError(f"{where}: malformed JSON ({exc})") from None
    if not isinstance(record, dict):
        raise CollectionFormatError(f"{where}: malformed JSON (expected a JSON object)")
    return record


def classify(exc: CollectionFormatError) -> str:
    text = str(exc)
    if "not valid UTF-8" in text:
        return "utf8"
    if "has no docid" in text:
        return "no-docid"
    if "duplicate docid" in text:
        return "duplicate"
    return "malformed"


def to_document(record: dict[str, Any], where: str) -> dict[str, Any]:
    """MS MARCO V2.1 document fields (docid, url, title, headings, body); ``id``/``contents`` accepted too."""
    docid = record.get("docid", record.get("id"))
    if docid is None or docid == "":
        raise CollectionFormatError(f"{where}: a document has no docid: {str(record)[:80]}")
    body = record.get("body", record.get("contents", ""))
    return {
        "docid": str(docid),
        "url": record.get("url", "") or "",
        "title": record.get("title", "") or "",
        "headings": record.get("headings", "") or "",
        "body": body if isinstance(body, str) else ("" if body is None else str(body)),
    }


SEGMENT_FIELDS = ("url", "title", "headings")


def to_segment(record: dict[str, Any], where: str) -> dict[str, Any]:
    """An MS MARCO V2.1 *segmented* record (docid, url, title, headings, segment, start_char, end_char) as it
    is, every field kept; its docid and ``segment`` text are required, the text fields default to ""."""
    docid = record.get("docid", record.get("id"))
    if docid is None or docid == "":
        raise CollectionFormatError(f"{where}: a segment has no docid: {str(record)[:80]}")
    text = record.get("segment")
    if not isinstance(text, str):
        raise CollectionFormatError(f'{where}: malformed segment (its "segment" is not a string): {str(record)[:80]}')
    if type(record.get("docid")) is str and all(type(record.get(name)) is str for name in SEGMENT_FIELDS):
        return record  # a segment already: nothing to change, nothing copied
    segment = {**record, "docid": str(docid)}
    for name in SEGMENT_FIELDS:
        value = segment.get(name)
        segment[name] = "" if value is None else value if isinstance(value, str) else str(value)
    return segment


def is_segmented(path: Path) -> bool:
    """Whether the collection under ``path`` holds MS MARCO V2.1 *segments* rather than documents, judged
    from its first record: a ``segment`` field and no ``body``. A first line that does not parse says
    documents (its error then comes with its file and line)."""
    for _, _, data in iter_raw_lines(path):
        try:
            record = json.loads(data)
        except ValueError:
            return False
        return isinstance(record, dict) and "segment" in record and "body" not in record
    return False


def parse_document(data: bytes, where: str) -> dict[str, Any]:
    return to_document(parse_record(data, where), where)


def docid_hash(docid: str) -> int:
    """A stable 64-bit hash of a docid (for :class:`DocidSet`)."""
    return int.from_bytes(hashlib.blake2b(docid.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class DocidSet:
    """Seen docids in 8 bytes each: 64-bit hashes in a sorted numpy array plus a smaller sorted one of
    recent additions (merged in when it grows past 1/8 of the main one; amortised O(log n) per docid).

    A 64-bit hash collision between two different docids (chance about n^2 / 2^65: 4e-6 for 12 M docids)
    would report a false duplicate; nothing else is approximate.
    """

    def __init__(self) -> None:
        self._sorted = np.empty(0, dtype=np.uint64)
        self._recent = np.empty(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    @staticmethod
    def _member(sorted_: np.ndarray, h: np.ndarray) -> np.ndarray:
        if not len(sorted_):
            return np.zeros(len(h), dtype=bool)
        i = np.minimum(np.searchsorted(sorted_, h), len(sorted_) - 1)
        return sorted_[i] == h

    def add_many(self, hashes: np.ndarray) -> np.ndarray:
        """Record ``hashes`` (in order); a boolean mask of those not seen before (nor earlier in ``hashes``)."""
        h = np.asarray(hashes, dtype=np.uint64)
        new = ~(self._member(self._sorted, h) | self._member(self._recent, h))
        _, first = np.unique(h, return_index=True)
        once = np.zeros(len(h), dtype=bool)
        once[first] = True
        new &= once
        if new.any():
            self._recent = np.sort(np.concatenate((self._recent, h[new])))
            if len(self._recent) >= max(1 << 16, len(self._sorted) >> 3):
                merged = np.concatenate((self._sorted, self._recent))
                self._sorted = self._recent = np.empty(0, dtype=np.uint64)
                merged.sort()  # in place: 8 bytes per docid, not 16, while merging
                self._sorted = merged
        return new

    def add(self, h: int) -> bool:
        """Record ``h``; False when it was already there."""
        return bool(self.add_many(np.array([h], dtype=np.uint64))[0])


@dataclass
class InputReport:
    """What was read: lines, documents, empty documents, and bad lines by kind (with the first examples)."""

    lines: int = 0
    documents: int = 0
    empty: int = 0
    bad: dict[str, int] = field(default_factory=lambda: {k: 0 for k in BAD_KINDS})
    examples: list[str] = field(default_factory=list)
    max_examples: int = 20

    def add_bad(self, bad: BadLine) -> None:
        self.bad[bad.kind] = self.bad.get(bad.kind, 0) + 1
        if len(self.examples) < self.max_examples:
            self.examples.append(bad.message)

    @property
    def skipped(self) -> int:
        return sum(self.bad.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "documents": self.documents,
            "empty_documents": self.empty,
            "skipped": self.skipped,
            "bad": dict(self.bad),
            "bad_examples": list(self.examples),
        }


# --------------------------------------------------------------------------------------------- simple API


def iter_jsonl(path: Path, skip_bad: bool = False, report: InputReport | None = None) -> Iterator[dict[str, Any]]:
    """Every JSON object of every file under ``path``; a malformed line raises with its file and line
    (or, with ``skip_bad``, is skipped and counted in ``report``)."""
    for file, line_no, data in iter_raw_lines(path):
        if report is not None:
            report.lines += 1
        try:
            yield parse_record(data, f"{file}:{line_no}")
        except CollectionFormatError as exc:
            if not skip_bad:
                raise
            if report is not None:
                report.add_bad(BadLine(classify(exc), str(exc)))


def iter_documents(
    path: Path, skip_bad: bool = False, check_duplicates: bool = True, report: InputReport | None = None
) -> Iterator[dict[str, Any]]:
    """MS MARCO V2.1 documents (docid, url, title, headings, body); ``id``/``contents`` are accepted too.

    A repeated docid is an error like a malformed line (its segments would get the ids of the first one's):
    skipped with ``skip_bad`` (the first one is kept); ``check_duplicates=False`` lets it through.
    """
    seen = DocidSet() if check_duplicates else None
    for file, line_no, data in iter_raw_lines(path):
        where = f"{file}:{line_no}"
        if report is not None:
            report.lines += 1
        try:
            document = parse_document(data, where)
            if seen is not None and not seen.add(docid_hash(document["docid"])):
                raise CollectionFormatError(f"{where}: duplicate docid {document['docid']!r}")
        except CollectionFormatError as exc:
            if not skip_bad:
                raise
            if report is not None:
                report.add_bad(BadLine(classify(exc), str(exc)))
            continue
        if report is not None:
            report.documents += 1
            report.empty += not document["body"].strip()
        yield document
