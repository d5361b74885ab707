"""Real Lucene indexes built in the test session: segmentation, stored raw JSON, BM25/Rocchio/RM3."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.types import Query
from ragnarok.stages.retrieve.lucene import LuceneRetriever, doc_from_raw

TOPICS = Path(__file__).resolve().parents[1] / "topics" / "demo.tsv"

DOCS = [
    {
        "docid": "argparse",
        "url": "https://docs.python.org/3/library/argparse.html",
        "title": "argparse",
        "headings": "ArgumentParser",
        "body": " ".join(
            ["The argparse module makes it easy to write user-friendly command-line interfaces."]
            + [f"Parser detail number {i} explains how arguments are parsed from the command line." for i in range(14)]
        ),
    },
    {
        "docid": "gzip",
        "url": "https://docs.python.org/3/library/gzip.html",
        "title": "gzip",
        "headings": "",
        "body": "This module provides a simple interface to compress and decompress files. "
        "The data compression is provided by the zlib module.",
    },
    {"docid": "empty", "url": "", "title": "nothing", "headings": "", "body": "   "},
]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    path = tmp_path_factory.mktemp("small") / "index"
    assert index_documents(iter(DOCS), path) == 3  # argparse: 15 sentences -> 2 windows; gzip: 1; empty: 0
    return path


def test_segments_are_indexed_with_their_fields(small_index):
    request = LuceneRetriever("bm25", str(small_index)).retrieve(Query(text="compress files", qid="q1"), 5)
    top = request.candidates[0]
    assert top.docid == "gzip#0_0"
    assert top.doc.title == "gzip" and top.doc.url.endswith("gzip.html")
    assert top.doc.segment == DOCS[1]["body"][top.doc.start_char : top.doc.end_char]
    assert request.query.qid == "q1"


def test_window_ids_and_offsets(small_index):
    hits = LuceneRetriever("bm25", str(small_index)).retrieve(Query(text="parser argparse arguments"), 10)
    ids = sorted(c.docid for c in hits.candidates if c.docid.startswith("argparse"))
    assert len(ids) == 2 and ids[0] == "argparse#0_0" and ids[1].startswith("argparse#1_")
    for c in hits.candidates:
        body = next(d["body"] for d in DOCS if d["docid"] == c.docid.split("#")[0])
        assert body[c.doc.start_char : c.doc.end_char] == c.doc.segment


@pytest.mark.parametrize("feedback", ["none", "rocchio", "rm3"])
def test_each_model_ranks(small_index, feedback):
    retriever = LuceneRetriever(feedback, str(small_index), feedback=feedback)
    request = retriever.retrieve(Query(text="command-line interfaces"), 3)
    assert request.candidates and request.candidates[0].docid.startswith("argparse")
    scores = [c.score for c in request.candidates]
    assert scores == sorted(scores, reverse=True)


def test_missing_index_is_reported(tmp_path):
    from ragnarok.stages.retrieve.lucene import IndexNotFoundError

    with pytest.raises(IndexNotFoundError):
        LuceneRetriever("bm25", str(tmp_path)).retrieve(Query(text="x"), 1)


def test_doc_from_raw_handles_json_and_text():
    assert doc_from_raw(json.dumps({"contents": "c", "title": "t"})).segment == "c"
    assert doc_from_raw("<html>\n<pre>Time &amp; space</pre></html>").segment == "Time & space"
    assert doc_from_raw("plain text").segment == "plain text"
    assert doc_from_raw(None).segment is None


def test_an_empty_collection_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no segments"):
        index_documents(iter([DOCS[2]]), tmp_path / "idx")


def test_prebuilt_index_failure_is_clear(tmp_path, monkeypatch):
    """A name of no catalogue is an unknown component; a catalogue name not unpacked here fails at once (no
    download is tried), naming the command that fetches it and the sizes."""
    import time

    from ragnarok.core.registry import UnknownComponentError
    from ragnarok.stages.retrieve.prebuilt import PrebuiltMissing

    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path))
    with pytest.raises(UnknownComponentError, match="unknown prebuilt index 'no-such-index'"):
        LuceneRetriever("bm25", "prebuilt:no-such-index").retrieve(Query(text="x"), 1)
    start = time.monotonic()
    with pytest.raises(
        PrebuiltMissing,
        match=r"^the prebuilt index msmarco-v2.1-doc-segmented is not on this "
        r"machine: .* `ragnarok prebuilt fetch msmarco-v2.1-doc-segmented`.* "
        r"60 GB to download, 84 GB unpacked, 144 GB of free disk",
    ):
        LuceneRetriever("bm25", "prebuilt:msmarco-v2.1-doc-segmented", prebuilt_dir=tmp_path).retrieve(
            Query(text="x"), 1
        )
    assert time.monotonic() - start < 2


def test_the_indexing_buffer_is_passed_to_anserini(tmp_path):
    """Anserini's `-memoryBuffer` (what bounds the JVM while indexing) comes from the settings; Anserini
    accepts it (an unknown option would fail the run) and the index is complete."""
    from pydantic import ValidationError

    from ragnarok.collection.lucene_index import index_collection, is_lucene_index
    from ragnarok.core.settings import Settings

    coll = tmp_path / "coll"
    coll.mkdir()
    (coll / "docs.jsonl").write_text(
        "".join(json.dumps({"id": f"d{i}", "contents": f"tiny buffer text {i}"}) + "\n" for i in range(50))
    )
    index = index_collection(coll, tmp_path / "index", buffer_mb=16)
    assert is_lucene_index(index)
    ranked = LuceneRetriever("bm25", str(index)).retrieve(Query(text="buffer 7"), 3)
    assert ranked.candidates[0].docid == "d7"
    assert Settings().index_buffer_mb == 128
    with pytest.raises(ValidationError):
        Settings(index_buffer_mb=8)


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_retrieve_json_is_byte_identical_to_the_model(small_index, cache_bytes):
    """The R service's fast path (cached per-segment JSON) writes exactly what the pydantic models write,
    with the cache off, cold and warm, for a str and an int qid and for a query with no hits."""
    retriever = LuceneRetriever("bm25", str(small_index), doc_cache_bytes=cache_bytes)
    for _ in range(2):  # cold, then from the cache
        for text, qid in (
            ("compress files", "q1"),
            ("parser argparse arguments", 7),
            ("zzzz nothing", ""),
            ('quotes " and \\ and é ✓', "ü"),
        ):
            query = Query(text=text)
            query.qid = qid
            expected = retriever.retrieve(query, 10).model_dump_json(exclude_unset=True).encode()
            assert retriever.retrieve_json(query, 10) == expected
    assert (len(retriever._docs) > 0) == (cache_bytes > 0)  # noqa: SLF001 - bounded: nothing kept at 0 bytes


def test_concurrent_fast_path_searches_do_not_crash_the_jvm(demo_settings):
    """Sixteen threads on ``retrieve_json`` with the cache filling and emptying. An earlier version read each
    hit's stored document while walking the hits and took the JVM down (SIGSEGV in Document.get) within
    seconds; a crash kills the process, so the searches run in a child."""
    script = f"""
import sys
from concurrent.futures import ThreadPoolExecutor
from ragnarok.stages.retrieve.lucene import LuceneRetriever
from ragnarok.core.types import Query
r = LuceneRetriever("bm25", {str(demo_settings.data_dir / "indexes" / "demo")!r})
texts = [line.split("\\t", 1)[1] for line in open({str(TOPICS)!r}) if "\\t" in line]
def one(i):
    if i % 7 == 0:
        r._docs.clear()
    return len(r.retrieve_json(Query(text=texts[i % len(texts)]), 100))
with ThreadPoolExecutor(16) as pool:
    sizes = list(pool.map(one, range(800)))
print(len(sizes), min(sizes))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=demo_settings.data_dir
    )
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    count, smallest = done.stdout.split()
    assert int(count) == 800 and int(smallest) > 1000
