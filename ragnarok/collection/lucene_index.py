"""Building Lucene indexes with Anserini's IndexCollection (the same code path as pyserini's own CLI).

Two entry points:

* :func:`index_collection` indexes an existing collection as it is, with any Anserini collection class
  (``JsonCollection``, ``HtmlCollection`` for CACM, ``TrecCollection``, ...).
* :func:`index_documents` segments MS MARCO V2.1-style documents (10-sentence windows, stride 5), writes the
  segments as a JsonCollection (``id`` + ``contents`` for Lucene, every field kept in the stored raw JSON),
  then indexes them with positions, docvectors and raw documents.

``ragnarok index IN.jsonl OUT`` builds resumably, in shards merged at the end:
:mod:`ragnarok.collection.sharded_build`, on the parts here.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ragnarok.collection.segment import Segmenter
from ragnarok.core.java import start_jvm
from ragnarok.runtime.index_files import index_identity, is_lucene_index, put_in_place  # noqa: F401 - re-exported (their old home)

SHARD_SIZE = 100_000
NO_SEGMENTS = "no segments: the input holds no document with a non-empty body"


def index_collection(
    input_dir: Path,
    index_dir: Path,
    collection: str = "JsonCollection",
    threads: int = 2,
    generator: str = "DefaultLuceneDocumentGenerator",
    extra_args: Iterable[str] = (),
    buffer_mb: int | None = None,
) -> Path:
    """Index ``input_dir`` (a directory of files of one Anserini collection class) into ``index_dir``.

    The index is built in a sibling directory (``INDEX.partial``) and put in place of ``index_dir`` only when
    complete, in one atomic exchange where the kernel has one: an interrupted or failed build leaves
    ``index_dir`` exactly as it was (and removes the partial one). ``buffer_mb``: Lucene's RAM buffer (default:
    the settings' ``index_buffer_mb``, 128). Anserini's own default, 4096 MB, lets the JVM grow by gigabytes on
    a large collection (and fail with a smaller heap).
    """
    from ragnarok.runtime.interrupt import on_stop  # noqa: PLC0415

    input_dir, index_dir = Path(input_dir), Path(index_dir)
    if input_dir.is_file():  # Anserini reads directories: give it one holding a link to the file
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        with (
            tempfile.TemporaryDirectory(prefix="collection-", dir=index_dir.parent) as one,
            on_stop(lambda: shutil.rmtree(one, ignore_errors=True)),
        ):
            (Path(one) / input_dir.name).symlink_to(input_dir.resolve())
            return index_collection(Path(one), index_dir, collection, threads, generator, extra_args, buffer_mb)
    if not input_dir.is_dir():
        raise FileNotFoundError(f"collection not found (neither a file nor a directory): {input_dir}")
    if index_dir.exists() and not index_dir.is_dir():
        raise FileExistsError(f"{index_dir} is a file, not an index directory")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = index_dir.with_name(index_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # a build killed before it could clean up
    try:
        with on_stop(lambda: shutil.rmtree(partial, ignore_errors=True)):  # interrupted: no half index left
            _anserini(input_dir, partial, collection, threads, generator, extra_args, buffer_mb)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    put_in_place(partial, index_dir)
    return index_dir


def _anserini(
    input_dir: Path,
    index_dir: Path,
    collection: str,
    threads: int,
    generator: str,
    extra_args: Iterable[str],
    buffer_mb: int | None,
) -> None:
    """Anserini's IndexCollection, writing into ``index_dir`` (created)."""
    if buffer_mb is None:
        from ragnarok.core.settings import get_settings  # noqa: PLC0415 - read when indexing, not on import

        buffer_mb = get_settings().index_buffer_mb
    start_jvm()
    from jnius import autoclass  # noqa: PLC0415 - JVM must be started first

    from ragnarok.core.java import is_verbose  # noqa: PLC0415

    args = [
        "-collection",
        collection,
        "-input",
        str(input_dir),
        "-index",
        str(index_dir),
        "-generator",
        generator,
        "-threads",
        str(threads),
        "-memoryBuffer",
        str(buffer_mb),
        "-storePositions",
        "-storeDocvectors",
        "-storeRaw",
        *(() if is_verbose() else ("-quiet",)),
        *extra_args,
    ]
    autoclass("io.anserini.index.IndexCollection").main(args)
    if not is_lucene_index(index_dir):
        raise RuntimeError(
            f"Anserini wrote no index to {index_dir}; "
            + ("see its log above" if is_verbose() else "run with --verbose to see its log")
        )


def anserini_record(seg: dict[str, Any]) -> dict[str, Any]:
    """A segment as a JsonCollection record: ``id``, ``contents`` (title, headings and segment, one per line,
    what BM25 sees) and every segment field (stored in the raw document)."""
    return {"id": seg["docid"], "contents": record_contents(seg), **seg}


def record_contents(seg: dict[str, Any]) -> str:
    """What BM25 sees of a segment: its title, headings and text, one per line."""
    return "\n".join(part for part in (seg["title"], seg["headings"], seg["segment"]) if part)


def segment_records(documents: Iterable[dict[str, Any]], segmenter: Segmenter) -> Iterator[dict[str, Any]]:
    """JsonCollection records (:func:`anserini_record`) for the segments of ``documents``."""
    for document in documents:
        yield from map(anserini_record, segmenter.segment(document))


def index_documents(
    documents: Iterable[dict[str, Any]],
    index_dir: Path,
    threads: int = 2,
    segmenter: Segmenter | None = None,
    total: int | None = None,
) -> int:
    """Segment ``documents`` and index the segments into ``index_dir``; returns the number of segments."""
    index_dir = Path(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="segments-", dir=index_dir.parent))
    count = 0
    try:
        out = None
        for record in segment_records(
            tqdm(documents, total=total, desc="segmenting", unit="doc"), segmenter or Segmenter()
        ):
            if count % SHARD_SIZE == 0:
                if out:
                    out.close()
                out = open(work / f"segments-{count // SHARD_SIZE:05d}.jsonl", "w", encoding="utf-8")
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
        if out:
            out.close()
        if count == 0:
            raise ValueError(NO_SEGMENTS)
        _index_replacing(work, index_dir, threads, count)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return count


def _index_replacing(segments_dir: Path, index_dir: Path, threads: int, count: int) -> None:
    """Index a JsonCollection directory of ``count`` segments in place of ``index_dir``
    (:func:`index_collection`)."""
    from ragnarok.core.java import is_verbose  # noqa: PLC0415

    if not is_verbose():  # Anserini's own progress lines are hidden: say what is running
        print(
            f"indexing {count:,} segments with Anserini ({threads} threads; --verbose shows its log)",
            file=sys.stderr,
            flush=True,
        )
    index_collection(segments_dir, index_dir, "JsonCollection", threads)
