"""Segmenting a whole collection, streaming and in parallel, with output identical to the sequential run.

The parent reads raw lines (plain or gzip JSONL, a file or a directory) in batches; worker processes parse,
validate and segment each batch (:class:`~ragnarok.collection.segment.Segmenter`: 10-sentence windows,
stride 5) and serialise the segments; ``Pool.imap`` hands the batches back in input order, and the parent
drops repeated docids and writes. So the output is byte for byte what one process writes with
``json.dumps(segment, ensure_ascii=False)`` per segment of :func:`iter_documents`, in the same order,
whatever ``workers`` is. The output goes to a temporary file beside OUT, renamed over OUT on success only.

Memory stays flat in the input size: batches in flight are bounded by the pool, and the duplicate-docid
check costs 8 bytes per document.
"""

from __future__ import annotations

import ctypes
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ragnarok.collection.jsonl import (
    BadLine,
    CollectionFormatError,
    DocidSet,
    InputReport,
    _ByteCounter,
    classify,
    docid_hash,
    iter_raw_lines,
    parse_document,
    parse_record,
    to_segment,
    total_bytes,
)
from ragnarok.collection.lucene_index import anserini_record, record_contents
from ragnarok.collection.segment import STRIDE, WINDOW, Segmenter
from ragnarok.collection.workers import batches, default_workers, map_batches, write_atomically

BATCH = 256


@dataclass
class SegmentReport:
    input: InputReport = field(default_factory=InputReport)
    segments: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.input.documents,
            "segments": self.segments,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "input": self.input.as_dict(),
        }

    def summary(self) -> str:
        lines = [f"documents: {self.input.documents:,}  segments: {self.segments:,}"]
        if self.input.empty:
            lines.append(f"empty documents (no segments): {self.input.empty:,}")
        if self.input.skipped:
            kinds = ", ".join(f"{k} {v:,}" for k, v in self.input.bad.items() if v)
            lines.append(f"skipped bad lines: {self.input.skipped:,} ({kinds})")
        return "\n".join(lines)


@dataclass
class _Done:
    docids: list[str | None]
    hashes: np.ndarray  # uint64 docid hashes (0 for bad lines)
    outputs: list[bytes]  # the JSONL segments of each line (b"" for bad or empty documents)
    counts: list[int]  # segments per line
    bad: list[tuple[int, BadLine]]
    where: list[tuple[str, int]]
    bytes_in: int


_buf: tuple = (None, None, None, 0)


def _buffers(size: int) -> tuple:
    """Output buffers for blingfire, reused across calls (one process, one thread at a time)."""
    global _buf
    if _buf[3] < size:
        size = max(size, 1 << 16)
        _buf = (ctypes.create_string_buffer(size), (ctypes.c_int32 * size)(), (ctypes.c_int32 * size)(), size)
    return _buf[:3]


def _sentence_offsets(text: str) -> list[tuple[int, int]] | None:
    """``blingfire.text_to_sentences_and_offsets(text)[1]``, computed fast, or None to ask blingfire itself.

    blingfire's Python wrapper maps UTF-8 byte offsets to character offsets with a Python loop over every
    byte (three quarters of segmentation time). We call the same C function and map with numpy when the
    offsets are in order and on character boundaries (always, in practice), and fall back otherwise; tests
    compare the result with blingfire's on ASCII and non-ASCII text.
    """
    import blingfire  # noqa: PLC0415

    raw = text.encode("utf-8")
    out, starts, ends = _buffers(len(raw) * 2)
    n_out = len(raw) * 2
    n = blingfire.blingfire.TextToSentencesWithOffsets(
        ctypes.c_char_p(raw),
        ctypes.c_int(len(raw)),
        ctypes.byref(out),
        ctypes.byref(starts),
        ctypes.byref(ends),
        ctypes.c_int(n_out),
    )
    if n == -1 or n > n_out:
        return []
    # blingfire's wrapper reads its (fresh, zeroed) buffer with .value: the output up to the first NUL
    k = ctypes.string_at(out, n).split(b"\0", 1)[0].count(b"\n") + 1
    s_list, e_list = starts[:k], [x + 1 for x in ends[:k]]  # exclusive byte ends
    ordered = all(b <= c for b, c in zip(s_list, e_list)) and all(c <= b for c, b in zip(e_list, s_list[1:]))
    if not ordered or s_list[0] < 0 or e_list[-1] > len(raw):
        return None
    if len(raw) == len(text):  # ASCII: bytes are characters
        return list(zip(s_list, e_list))
    s, e = np.array(s_list), np.array(e_list)
    b = np.frombuffer(raw, dtype=np.uint8)
    is_start = (b & 0xC0) != 0x80
    char_at = np.concatenate((np.cumsum(is_start) - 1, [len(text)]))  # char index of each byte, and the end
    boundary = np.concatenate((is_start, [True]))
    if not (boundary[s].all() and boundary[e].all()):
        return None
    return list(zip(char_at[s].tolist(), char_at[e].tolist()))


_BLANK_LINE_RUN = re.compile(r"\s*\n[ \t]*\n\s*")


def paragraphs(body: str) -> Iterator[tuple[int, str]]:
    """``(start, text)`` of what ``segment._PARAGRAPH.finditer(body)`` matches, in linear time (the lazy
    regex there costs ~90 us per 1.6 KB document): the text between whitespace runs that hold a blank line,
    stripped. One quirk is kept: the regex's optional group makes a one-character paragraph run on to the
    end of the next one (``".\n\nNext one."`` is one paragraph), so it does here; tests compare the two."""
    chunks = _chunks(body)
    for start, end in chunks:
        if end - start == 1:
            following = next(chunks, None)
            if following is not None:
                end = following[1]
        yield start, body[start:end]


def _chunks(body: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for sep in _BLANK_LINE_RUN.finditer(body):
        yield from _stripped(body, pos, sep.start())
        pos = sep.end()
    yield from _stripped(body, pos, len(body))


def _stripped(body: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    chunk = body[start:end]
    text = chunk.lstrip()
    if text:
        begin = start + len(chunk) - len(text)
        yield begin, begin + len(text.rstrip())


def sentence_spans(body: str) -> list[tuple[int, int]]:
    """:func:`ragnarok.core.sentences.sentence_spans`, fast (same spans)."""
    import blingfire  # noqa: PLC0415

    spans = []
    for base, text in paragraphs(body):
        offsets = _sentence_offsets(text)
        if offsets is None:
            offsets = blingfire.text_to_sentences_and_offsets(text)[1]
        spans.extend((base + a, base + b) for a, b in offsets if b > a)
    return spans


class FastSegmenter(Segmenter):
    """:class:`Segmenter` with :func:`sentence_spans` above: the same segments, several times faster."""

    def sentences(self, body: str) -> list[tuple[int, int]]:
        return sentence_spans(body)


_segmenter: Segmenter = FastSegmenter()
_anserini = False
_segmented = False  # the input is already segmented (MS MARCO V2.1 segmented): validate, do not re-segment


def _init(window: int, stride: int, anserini: bool = False, segmented: bool = False) -> None:
    global _segmenter, _anserini, _segmented
    _segmenter, _anserini, _segmented = FastSegmenter(window, stride), anserini, segmented


def segment_lines(document: dict[str, Any], segmenter: Segmenter, anserini: bool = False) -> tuple[bytes, int]:
    """The JSONL bytes of one document's segments and their number."""
    segments = segmenter.segment(document)
    if anserini:
        segments = map(anserini_record, segments)
    parts = [json.dumps(seg, ensure_ascii=False) for seg in segments]
    if not parts:
        return b"", 0
    return ("\n".join(parts) + "\n").encode("utf-8", "surrogatepass"), len(parts)


def segmented_lines(record: dict[str, Any], anserini: bool = False, raw: bytes | None = None) -> tuple[bytes, int]:
    """The JSONL bytes of one already-made segment (:func:`~ragnarok.collection.jsonl.to_segment`): itself,
    as :func:`anserini_record` with ``anserini``; none when its text is empty. ``raw``: its line as read, when
    ``record`` is exactly what it holds: the Anserini record is then that line with ``id`` and ``contents``
    put in front (the same JSON object, not serialised again: a fifth of the cost of checking a segment), or
    the line itself when it has them already (as a collection prepared for Anserini's JsonCollection does)."""
    if not record["segment"].strip():
        return b"", 0
    if not anserini:
        return (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"), 1
    line = raw.strip() if raw is not None else b""
    if (
        line.startswith(b"{")
        and record.get("id") == record["docid"]
        and record.get("contents") == record_contents(record)
    ):  # an Anserini record already: the line as it is
        return line + b"\n", 1
    if line.startswith(b"{") and "id" not in record and "contents" not in record:
        head = json.dumps({"id": record["docid"], "contents": record_contents(record)}, ensure_ascii=False)
        return head[:-1].encode("utf-8", "surrogatepass") + b", " + line[1:].lstrip() + b"\n", 1
    return (json.dumps(anserini_record(record), ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"), 1


def _segment_batch(items: list[tuple[str, int, bytes]]) -> _Done:
    docids: list[str | None] = []
    hashes = np.zeros(len(items), np.uint64)
    outputs, counts, bad = [], [], []
    for pos, (file, line_no, data) in enumerate(items):
        try:
            where = f"{file}:{line_no}"
            parsed = parse_record(data, where) if _segmented else None
            document = to_segment(parsed, where) if parsed is not None else parse_document(data, where)
        except CollectionFormatError as exc:
            bad.append((pos, BadLine(classify(exc), str(exc))))
            docids.append(None)
            outputs.append(b"")
            counts.append(0)
            continue
        docids.append(document["docid"])
        hashes[pos] = docid_hash(document["docid"])
        if parsed is not None:
            out, n = segmented_lines(document, _anserini, data if document is parsed or document == parsed else None)
        else:
            out, n = segment_lines(document, _segmenter, _anserini)
        outputs.append(out)
        counts.append(n)
    return _Done(docids, hashes, outputs, counts, bad, [(f, n) for f, n, _ in items], sum(len(d) for _, _, d in items))


def segment_collection(
    input_path: Path,
    output: Path,
    workers: int | None = None,
    skip_bad: bool = False,
    window: int = WINDOW,
    stride: int = STRIDE,
    batch_size: int = BATCH,
    progress: bool | None = None,
    anserini: bool = False,
    segmented: bool = False,
) -> SegmentReport:
    """Segment every document under ``input_path`` into the JSONL file ``output`` (``.gz`` compresses).

    ``anserini`` writes each segment as :func:`anserini_record` (what ``ragnarok index`` feeds Lucene), so that
    ``ragnarok index --collection JsonCollection DIR INDEX`` can index the output's directory as it is.
    ``segmented``: the input holds segments already (MS MARCO V2.1 segmented): each is validated and written
    as it is, not segmented again.

    Bad lines (malformed JSON, invalid UTF-8, no docid, a repeated docid) raise
    :class:`CollectionFormatError` with their file and line before ``output`` is touched, unless
    ``skip_bad``: then they are left out and counted. Documents with an empty body give no segments.
    """
    report = SegmentReport()
    stream = segment_stream(
        input_path, report, workers, skip_bad, window, stride, batch_size, progress, anserini, segmented
    )
    write_atomically(Path(output), (out for out, _ in stream))
    return report


def segment_stream(
    input_path: Path,
    report: SegmentReport,
    workers: int | None = None,
    skip_bad: bool = False,
    window: int = WINDOW,
    stride: int = STRIDE,
    batch_size: int = BATCH,
    progress: bool | None = None,
    anserini: bool = False,
    segmented: bool = False,
) -> Iterator[tuple[bytes, int]]:
    """The JSONL bytes of each input line's segments and their number, in input order, validated as
    :func:`segment_collection` says (``report`` counts as it goes)."""
    Segmenter(window, stride)  # validates the window before any work
    input_path = Path(input_path)
    workers = default_workers() if workers is None else workers
    seen = DocidSet()
    counter = _ByteCounter()
    bar = tqdm(
        total=total_bytes(input_path),
        unit="B",
        unit_scale=True,
        desc="segmenting",
        disable=None if progress is None else not progress,
        mininterval=0.5,
    )
    try:
        chunks = batches(iter_raw_lines(input_path, counter), batch_size)
        for done in map_batches(_segment_batch, chunks, workers, _init, (window, stride, anserini, segmented)):
            bad_at = dict(done.bad)
            fresh = seen.add_many(done.hashes)
            report.bytes_in += done.bytes_in
            for pos, out in enumerate(done.outputs):
                report.input.lines += 1
                bad = bad_at.get(pos)
                if bad is None and not fresh[pos]:
                    file, line_no = done.where[pos]
                    bad = BadLine("duplicate", f"{file}:{line_no}: duplicate docid {done.docids[pos]!r}")
                if bad is not None:
                    if not skip_bad:
                        raise CollectionFormatError(bad.message + " (use --skip-bad to leave bad lines out)")
                    report.input.add_bad(bad)
                    continue
                report.input.documents += 1
                if not done.counts[pos]:
                    report.input.empty += 1
                    continue
                report.segments += done.counts[pos]
                report.bytes_out += len(out)
                yield out, done.counts[pos]
            bar.update(counter.update() - bar.n)
    finally:
        bar.close()
