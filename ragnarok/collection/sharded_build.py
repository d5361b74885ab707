"""``ragnarok index IN OUT`` at scale: a build that resumes by shard after a kill, and gives the same index.

The input is chunked into shards in a persistent work directory beside the output, each shard is indexed by
Anserini into its own sub-index and marked done, and the sub-indexes are merged into OUT atomically. Killed,
the same command resumes at the first shard not done; BM25's statistics are read over the merged index, so
scores are those of one uninterrupted build.

Design notes: docs/internals/collection.md.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ragnarok.collection.build_dir import (
    BuildLock,
    check_free_disk,
    default_shard_segments,
    disk_full,
    estimate_bytes,
    identity,
    is_disk_full,
    read_json,
    size_of,
    write_json,
)
from ragnarok.collection.jsonl import CollectionFormatError, collection_files, is_segmented
from ragnarok.collection.lucene_index import NO_SEGMENTS, _anserini
from ragnarok.collection.segment import STRIDE, WINDOW
from ragnarok.runtime.index_files import put_in_place


@dataclass
class BuildResult:
    segments: int
    segmented: bool  # the input was V2.1 segmented (indexed as it is), not documents
    documents: int
    skipped: int
    shards: int
    resumed_shards: int  # shards found done at the start

    def describe(self) -> str:
        how = (
            "V2.1 segmented input, indexed as it is"
            if self.segmented
            else f"{self.documents:,} documents segmented: {WINDOW}-sentence windows, stride {STRIDE}"
        )
        return f"{self.segments:,} segments ({how})"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def work_dir(output: Path) -> Path:
    return output.with_name(output.name + ".partial")


def build_index(
    input_path: Path,
    output: Path,
    threads: int = 2,
    workers: int | None = None,
    skip_bad: bool = False,
    shard_segments: int | None = None,
) -> BuildResult:
    """Build the Lucene index of a JSONL collection (documents or V2.1 segments) at ``output``, resumably;
    ``shard_segments`` None: :func:`default_shard_segments`."""
    input_path, output = Path(input_path), Path(output)
    if shard_segments is not None and shard_segments < 1:
        raise ValueError("--shard-segments must be at least 1")
    if output.exists() and not output.is_dir():
        raise FileExistsError(f"{output} is a file, not an index directory")
    segmented = is_segmented(input_path)
    if shard_segments is None:
        shard_segments = default_shard_segments(input_path, segmented)
    if segmented and workers is None:  # checking a segment costs less than shipping it to a worker process
        workers = 1
    ident = identity(
        input_path,
        {
            "segmented": segmented,
            "window": WINDOW,
            "stride": STRIDE,
            "skip_bad": skip_bad,
            "shard_segments": shard_segments,
        },
    )
    work = work_dir(output)
    fresh = not work.exists()
    lock = BuildLock(work, output)
    try:
        if read_json(work / "build.json") != ident:
            if not fresh:
                say(f"starting over: {work} was left by a build of another input or with other options")
            _empty(work)
            write_json(work / "build.json", ident)
            fresh = True
        say(
            'input: V2.1 segments (a "segment" field, no "body"): indexed as they are, not segmented again'
            if segmented
            else f"input: documents: segmented into {WINDOW}-sentence windows, stride {STRIDE}"
        )
        need = estimate_bytes(input_path, segmented) - size_of(work)
        try:
            check_free_disk(work, need)
        except OSError:
            if fresh:
                shutil.rmtree(work, ignore_errors=True)
            raise
        try:
            chunked = _chunk(input_path, work, threads, workers, skip_bad, shard_segments, segmented)
        except (CollectionFormatError, ValueError):  # bad input: nothing worth resuming
            shutil.rmtree(work, ignore_errors=True)
            raise
        counts = chunked["shards"]
        done = sum((work / "shards" / f"{k:05d}.done").exists() for k in range(len(counts)))
        if done:
            say(f"resuming: {done} of {len(counts)} shards done")
        _index_shards(work, counts, threads)
        _merge(work, counts, output)
        shutil.rmtree(work, ignore_errors=True)
    finally:
        lock.release()
    report = chunked["report"]
    return BuildResult(
        sum(counts), segmented, report["input"]["documents"], report["input"]["skipped"], len(counts), done
    )


def _empty(work: Path) -> None:
    for path in work.iterdir():
        if path.name != "lock":
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


# --------------------------------------------------------------------------------------------- 1: chunks


class _ChunkWriter:
    """Segment lines into ``chunks/k/part-j.jsonl``: ``shard_segments`` per shard, dealt in turn into ``parts``
    files (Anserini indexes one file per thread: every thread has work, however few segments the shard holds);
    a shard's directory is written as ``k.tmp`` and renamed when complete."""

    def __init__(self, root: Path, shard_segments: int, parts: int):
        self.root, self.shard_segments, self.parts = root, shard_segments, parts
        self.counts: list[int] = []
        self.in_shard = 0
        self.handles: list[BinaryIO] = []
        self.tmp: Path | None = None

    def add(self, line: bytes) -> None:
        if self.tmp is None or self.in_shard == self.shard_segments:
            self.finish()
            self.tmp = self.root / f"{len(self.counts):05d}.tmp"
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp.mkdir(parents=True)
        part = self.in_shard % self.parts
        if part == len(self.handles):  # opened as the first segment comes: no empty file
            self.handles.append(open(self.tmp / f"part-{part:03d}.jsonl", "wb", buffering=1 << 20))
        self.handles[part].write(line)
        self.in_shard += 1

    def finish(self) -> None:
        for handle in self.handles:
            handle.close()
        self.handles = []
        if self.tmp is not None:
            os.replace(self.tmp, self.root / f"{len(self.counts):05d}")
            self.counts.append(self.in_shard)
            self.tmp, self.in_shard = None, 0


def _chunk(
    input_path: Path,
    work: Path,
    threads: int,
    workers: int | None,
    skip_bad: bool,
    shard_segments: int,
    segmented: bool,
) -> dict[str, Any]:
    """Phase 1 (skipped when a previous run completed it): the chunk files and their counts."""
    from ragnarok.collection.parallel_segment import SegmentReport, segment_stream  # noqa: PLC0415

    chunked = read_json(work / "chunked.json")
    if chunked is not None:
        return chunked
    root = work / "chunks"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    report = SegmentReport()
    # a shard's chunk files: one per input file, up to the threads (Anserini gives each file a thread, as
    # pyserini's indexer does the input's): two writers of one index cost ~15 % more CPU, in merges, for ~20 %
    # less wall time (docs/BENCHMARKS.md, "Indexing V2.1 segments")
    writer = _ChunkWriter(root, shard_segments, max(1, min(threads, len(collection_files(input_path)))))
    try:
        for out, n in segment_stream(input_path, report, workers, skip_bad, anserini=True, segmented=segmented):
            if n == 1:
                writer.add(out)
            else:
                for line in out.splitlines(keepends=True):
                    writer.add(line)
        writer.finish()
    except OSError as exc:
        if is_disk_full(exc):
            shutil.rmtree(root, ignore_errors=True)
            raise disk_full("writing the chunk files") from None
        raise
    if report.segments == 0:
        raise ValueError(NO_SEGMENTS)
    if report.input.skipped:
        say(report.summary())
    chunked = {"shards": writer.counts, "report": report.as_dict()}
    write_json(work / "chunked.json", chunked)
    return chunked


# --------------------------------------------------------------------------------------------- 2: shards


def _index_shards(work: Path, counts: list[int], threads: int) -> None:
    from ragnarok.runtime.progress import progress  # noqa: PLC0415

    shards = work / "shards"
    shards.mkdir(exist_ok=True)
    todo = [k for k in range(len(counts)) if not (shards / f"{k:05d}.done").exists()]
    if not todo:
        return
    total, already = sum(counts), sum(counts) - sum(counts[k] for k in todo)
    say(f"indexing {total - already:,} segments with Anserini ({threads} threads, {len(todo)} shards)")

    log = work / "anserini.log"
    with (
        _output_to(log) as terminal,
        progress(total, "indexing", unit="segment", initial=already, file=terminal) as bar,
    ):
        for k in todo:
            target = shards / f"{k:05d}"
            shutil.rmtree(target, ignore_errors=True)  # a shard a killed build left half-written
            _index_one(work / "chunks" / f"{k:05d}", target, threads, counts[k], log)
            (shards / f"{k:05d}.done").write_text(f"{counts[k]}\n")
            shutil.rmtree(work / "chunks" / f"{k:05d}", ignore_errors=True)
            bar.update(counts[k])


def _index_one(chunks: Path, target: Path, threads: int, expected: int, log: Path) -> None:
    """One shard's sub-index, checked; a disk that filled is :func:`disk_full`."""
    try:
        _anserini(chunks, target, "JsonCollection", threads, "DefaultLuceneDocumentGenerator", (), None)
        indexed = num_docs(target)
    except Exception as exc:  # noqa: BLE001 - Java's exceptions come as JavaException
        if is_disk_full(exc, _read(log)):
            shutil.rmtree(target, ignore_errors=True)
            raise disk_full(f"indexing shard {target.name}") from None
        raise
    if indexed != expected:
        text = _read(log)
        shutil.rmtree(target, ignore_errors=True)
        if is_disk_full(OSError(), text):
            raise disk_full(f"indexing shard {target.name}")
        raise RuntimeError(
            f"shard {target.name}: Anserini indexed {indexed:,} of {expected:,} segments (its log: {log})"
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-200_000:]
    except OSError:
        return ""


@contextmanager
def _output_to(log: Path) -> Iterator[TextIO]:
    """The process's stdout and stderr (where Anserini's log and its stack traces go) into ``log`` for the
    block, so that a failure can be read there and the terminal gets one clear line; with ``--verbose`` only
    stdout is kept, and shown on stderr afterwards. Yields the terminal's stderr (for the progress). Interrupted,
    the streams come back first (``on_stop``), so that the ``interrupted: ...`` line is seen."""
    from ragnarok.core.java import is_verbose  # noqa: PLC0415
    from ragnarok.runtime.interrupt import on_stop  # noqa: PLC0415

    streams = (1,) if is_verbose() else (1, 2)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in streams}
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def restore() -> None:
        for fd, copy in saved.items():
            os.dup2(copy, fd)

    for fd in streams:
        os.dup2(target, fd)
    os.close(target)
    terminal = os.fdopen(os.dup(saved[2]), "w", buffering=1) if 2 in saved else sys.stderr
    try:
        with on_stop(restore):
            yield terminal
    finally:
        restore()
        if terminal is not sys.stderr:
            terminal.close()
        for copy in saved.values():
            os.close(copy)
        if is_verbose():
            sys.stderr.write(_read(log))


def num_docs(index: Path) -> int:
    from ragnarok.core.java import start_jvm  # noqa: PLC0415

    start_jvm()
    from jnius import autoclass  # noqa: PLC0415 - after the JVM started with Anserini's jar

    directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.io.File")(str(index)).toPath())
    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    try:
        return reader.numDocs()
    finally:
        reader.close()
        directory.close()


# --------------------------------------------------------------------------------------------- 3: merge


def _merge(work: Path, counts: list[int], output: Path) -> None:
    """The shards as one index (``addIndexes``: segments copied, not analysed again), put in place."""
    merged = work / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    shards = [work / "shards" / f"{k:05d}" for k in range(len(counts))]
    try:
        if len(shards) == 1:  # nothing to merge: hard links (Lucene never rewrites a file), the shard kept
            merged.mkdir()
            for file in shards[0].iterdir():
                os.link(file, merged / file.name)
        else:
            add_indexes(shards, merged)
        if num_docs(merged) != sum(counts):
            raise RuntimeError(f"the merged index holds {num_docs(merged):,} of {sum(counts):,} segments")
    except Exception as exc:  # noqa: BLE001
        if is_disk_full(exc):
            shutil.rmtree(merged, ignore_errors=True)
            raise disk_full("merging the shards") from None
        raise
    put_in_place(merged, output)


def add_indexes(shards: list[Path], merged: Path) -> None:
    """Lucene's ``IndexWriter.addIndexes(Directory...)`` with Anserini's IndexCollection configuration
    (its analyzer, BM25, no compound files, a concurrent merge scheduler)."""
    from ragnarok.core.java import start_jvm  # noqa: PLC0415
    from ragnarok.core.settings import get_settings  # noqa: PLC0415

    start_jvm()
    from jnius import autoclass, cast  # noqa: PLC0415 - after the JVM started with Anserini's jar

    fs = autoclass("org.apache.lucene.store.FSDirectory")
    path = autoclass("java.io.File")
    config = autoclass("org.apache.lucene.index.IndexWriterConfig")(
        autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
    )
    config.setOpenMode(autoclass("org.apache.lucene.index.IndexWriterConfig$OpenMode").CREATE)
    config.setSimilarity(autoclass("org.apache.lucene.search.similarities.BM25Similarity")())
    config.setRAMBufferSizeMB(float(get_settings().index_buffer_mb))
    config.setUseCompoundFile(False)
    config.setMergeScheduler(autoclass("org.apache.lucene.index.ConcurrentMergeScheduler")())
    sources = [cast("org.apache.lucene.store.Directory", fs.open(path(str(s)).toPath())) for s in shards]
    writer = autoclass("org.apache.lucene.index.IndexWriter")(fs.open(path(str(merged)).toPath()), config)
    try:
        writer.addIndexes(*sources)  # Java varargs: Directory...
        writer.commit()
    finally:
        writer.close()
        for source in sources:
            source.close()
