"""Reading JSONL collections (plain or gzip, one file or a directory of them) with line-numbered errors."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


class CollectionFormatError(ValueError):
    pass


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


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object of every file under ``path``; a malformed line raises with its file and line."""
    for file in collection_files(path):
        with _open(file) as handle:
            line_no = 0
            try:
                for line_no, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except ValueError as exc:
                        raise CollectionFormatError(f"{file}:{line_no}: malformed JSON ({exc})") from None
                    if not isinstance(record, dict):
                        raise CollectionFormatError(f"{file}:{line_no}: expected a JSON object")
                    yield record
            except UnicodeDecodeError:
                raise CollectionFormatError(f"{file}:{line_no + 1}: not valid UTF-8") from None


def iter_documents(path: Path) -> Iterator[dict[str, Any]]:
    """MS MARCO V2.1 documents (docid, url, title, headings, body); ``id``/``contents`` are accepted too."""
    for record in iter_jsonl(path):
        docid = record.get("docid", record.get("id"))
        if not docid:
            raise CollectionFormatError(f"{path}: a document has no docid: {str(record)[:80]}")
        yield {
            "docid": str(docid),
            "url": record.get("url", ""),
            "title": record.get("title", ""),
            "headings": record.get("headings", ""),
            "body": record.get("body", record.get("contents", "")),
        }
