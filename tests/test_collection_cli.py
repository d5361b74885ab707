"""``ragnarok collection dedup|segment`` through the real CLI, checking the files it writes."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.collection.jsonl import iter_documents
from ragnarok.collection.segment import Segmenter

runner = CliRunner()


def _body(rng: random.Random, sentences: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "Ünïcödé", "façade", "日本語", "river", "stone", "light", "x"]
    if sentences == 0:
        return ""
    paragraphs = []
    for _ in range(max(1, sentences // 7)):
        paragraphs.append(
            " ".join(
                " ".join(rng.choice(words) for _ in range(rng.randint(3, 15))).capitalize()
                + rng.choice([".", "!", "?"])
                for _ in range(7)
            )
        )
    return "\n\n".join(paragraphs)


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    rng = random.Random(7)
    docs = [
        {
            "docid": f"msmarco_v2.1_doc_{i:02d}_{i * 977}",
            "url": f"https://example.org/{i}",
            "title": f"Title {i}",
            "headings": "H1\nH2",
            "body": _body(rng, rng.choice([0, 3, 10, 11, 25, 60])),
        }
        for i in range(120)
    ]
    docs[5]["body"] = docs[4]["body"]  # an exact duplicate for dedup
    path = tmp_path_factory.mktemp("coll") / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def _run(*args: str):
    return runner.invoke(app, ["collection", *args])


def test_segment_parallel_is_identical_to_sequential(collection, tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    r1 = _run("segment", str(collection), str(one), "--workers", "1")
    r2 = _run("segment", str(collection), str(two), "--workers", "2", "--report", str(tmp_path / "r.json"))
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    reference = "".join(
        json.dumps(seg, ensure_ascii=False) + "\n"
        for doc in iter_documents(collection)
        for seg in Segmenter().segment(doc)
    )
    assert one.read_text(encoding="utf-8") == reference
    assert two.read_bytes() == one.read_bytes()
    segments = [json.loads(line) for line in reference.splitlines()]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["segments"] == len(segments) and report["documents"] == 120 and report["input"]["empty_documents"] > 0
    assert f"wrote {len(segments):,} segments of 120 documents" in r2.stdout
    seg = segments[0]
    assert seg["docid"] == f"msmarco_v2.1_doc_00_0#0_{seg['start_char']}"


def test_segment_gzip_and_options(collection, tmp_path):
    gz = tmp_path / "docs.jsonl.gz"
    gz.write_bytes(gzip.compress(collection.read_bytes()))
    out = tmp_path / "segs.jsonl.gz"
    result = _run("segment", str(gz), str(out), "--window", "3", "--stride", "3", "--workers", "2")
    assert result.exit_code == 0, result.output
    expected = "".join(
        json.dumps(s, ensure_ascii=False) + "\n" for d in iter_documents(collection) for s in Segmenter(3, 3).segment(d)
    )
    assert gzip.decompress(out.read_bytes()).decode("utf-8") == expected


def test_segment_bad_input(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"docid": "a", "body": "One. Two."}\n{"docid": "b", "body": "x"\n'
        b'{"docid": "a", "body": "Again."}\n{"docid": "c", "body": "Three."}\n'
    )
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")
    result = _run("segment", str(src), str(out), "--workers", "2")
    assert result.exit_code == 2
    assert "error:" in result.stderr and "in.jsonl:2: malformed JSON" in result.stderr
    assert out.read_text() == "keep me\n"
    result = _run("segment", str(src), str(out), "--skip-bad")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["docid"].split("#")[0] for line in out.read_text().splitlines()] == ["a", "c"]
    assert "skipped bad lines: 2 (malformed 1, duplicate 1)" in result.stderr


def test_dedup_cli_with_report(collection, tmp_path):
    out, report = tmp_path / "kept.jsonl", tmp_path / "report.json"
    result = _run(
        "dedup",
        str(collection),
        str(out),
        "--report",
        str(report),
        "--workers",
        "2",
        "--threshold",
        "0.8",
        "--num-perm",
        "128",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    kept = [json.loads(line)["docid"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert "msmarco_v2.1_doc_05_4885" not in kept and "msmarco_v2.1_doc_04_3908" in kept
    assert data["documents_in"] == 120 and data["documents_out"] == len(kept) and data["removed"] >= 1
    assert data["representative"] == "first in input order" and data["classes"] >= 1
    biggest = data["largest_classes"][0]
    assert (
        biggest["size"] >= 2
        and biggest["examples"]
        and biggest["representative"]["line"].endswith(tuple(f":{i}" for i in range(1, 121)))
    )
    assert "near-duplicate classes" in result.stderr and "kept " in result.stdout
    # the kept lines are copied byte for byte, in input order
    source = collection.read_text(encoding="utf-8").splitlines()
    assert out.read_text(encoding="utf-8").splitlines() == [
        line for line in source if json.loads(line)["docid"] in set(kept)
    ]


def test_dedup_cli_errors(tmp_path, collection):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(collection.read_bytes().splitlines(keepends=True)[0] + b"\xff\xfe not json\n")
    out = tmp_path / "out.jsonl"
    result = _run("dedup", str(src), str(out), "--workers", "1")
    assert result.exit_code == 2 and "bad.jsonl:2: not valid UTF-8" in result.stderr and not out.exists()
    result = _run("dedup", str(src), str(out), "--skip-bad", "--workers", "1")
    assert result.exit_code == 0 and "skipped bad lines: 1 (utf8 1)" in result.stderr
    assert _run("dedup", str(tmp_path / "missing"), str(out)).exit_code == 2
    result = _run("dedup", str(src), str(src))
    assert result.exit_code == 2 and "must be different" in result.stderr
    result = _run("dedup", str(src), str(out), "--threshold", "1.5")
    assert result.exit_code == 2
    result = _run("dedup", str(src), str(out), "--storage", "tape", "--skip-bad")
    assert result.exit_code == 2 and "storage must be one of disk, memory, got 'tape'" in result.stderr


def test_fast_sentence_spans_equal_the_segmenters():
    from ragnarok.collection import parallel_segment as ps
    from ragnarok.collection.segment import _PARAGRAPH, sentence_spans

    rng = random.Random(11)
    pieces = [
        "word",
        "Ünï",
        "日本語。",
        ".",
        " ",
        "\n",
        "\n\n",
        "\n \t\n",
        "\r\n\r\n",
        "\t",
        "\xa0",
        "\u2028",
        "\x1c",
        "\x85",
        "😀",
        "x.",
        "End!",
        "a",
        "Mr. Smith went. ",
        "?!",
        "\x00",
    ]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    texts += [_body(rng, 30), ".\n\nNext one.", "a"]
    for t in texts:
        assert list(ps.paragraphs(t)) == [(m.start(), m.group(0)) for m in _PARAGRAPH.finditer(t)], repr(t)
        assert ps.sentence_spans(t) == sentence_spans(t), repr(t)


def test_segment_anserini_records_are_what_ragnarok_index_writes(collection, tmp_path):
    from ragnarok.collection.lucene_index import segment_records

    out = tmp_path / "coll" / "segments.jsonl"
    result = _run("segment", str(collection), str(out), "--anserini", "--workers", "2")
    assert result.exit_code == 0, result.output
    expected = "".join(
        json.dumps(r, ensure_ascii=False) + "\n" for r in segment_records(iter_documents(collection), Segmenter())
    )
    assert out.read_text(encoding="utf-8") == expected
    first = json.loads(expected.splitlines()[0])
    assert list(first)[:3] == ["id", "contents", "docid"] and first["id"] == first["docid"]


def test_segment_anserini_output_indexes_with_threads(collection, tmp_path):
    """The scale path: parallel segmentation (gzip), then Anserini's indexer over that directory, 2 threads."""
    from ragnarok.core.types import Query
    from ragnarok.stages.retrieve.lucene import LuceneRetriever

    coll = tmp_path / "coll"
    r = _run("segment", str(collection), str(coll / "part-0.jsonl.gz"), "--anserini", "--workers", "2")
    assert r.exit_code == 0, r.output
    n = len(gzip.decompress((coll / "part-0.jsonl.gz").read_bytes()).splitlines())
    r = runner.invoke(
        app, ["index", "--collection", "JsonCollection", str(coll), str(tmp_path / "idx"), "--threads", "2"]
    )
    assert r.exit_code == 0, r.output
    hits = LuceneRetriever("bm25", str(tmp_path / "idx")).retrieve(Query(text="river stone"), n + 10)
    assert len(hits.candidates) > 0 and all("#" in c.docid for c in hits.candidates)
    body = next(d for d in iter_documents(collection) if d["docid"] == hits.candidates[0].docid.split("#")[0])["body"]
    assert body[hits.candidates[0].doc.start_char : hits.candidates[0].doc.end_char] == hits.candidates[0].doc.segment


def test_index_rejects_bad_input_before_replacing_the_index(tmp_path):
    """`ragnarok index` streams its input: a malformed line or a repeated docid fails with its line number,
    before the JVM starts and without touching an existing index; with --skip-bad they are left out."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"docid": "a", "body": "One. Two."}\n{"docid": "b", "body": "Three."}\n{"docid": "a", "body": "Again."}\n'
    )
    index = tmp_path / "idx"
    index.mkdir()
    (index / "marker").write_text("old index")
    r = runner.invoke(app, ["index", str(src), str(index)])
    assert r.exit_code == 2 and "in.jsonl:3: duplicate docid 'a'" in r.stderr, r.output
    src.write_bytes(b'{"docid": "a", "body": "One. Two."}\n{"docid": "b", "body": "Three."\n')
    r = runner.invoke(app, ["index", str(src), str(index)])
    assert r.exit_code == 2 and "in.jsonl:2: malformed JSON" in r.stderr, r.output
    assert [p.name for p in index.iterdir()] == ["marker"] and (index / "marker").read_text() == "old index"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "in.jsonl"]  # no scratch left behind
    r = runner.invoke(app, ["index", str(src), str(index), "--skip-bad", "--workers", "2"])
    assert r.exit_code == 0 and "indexed 1 segments" in r.stdout, r.output
    assert not (index / "marker").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["idx", "in.jsonl"]


def test_truncated_gzip_is_a_clear_error_and_output_is_kept(collection, tmp_path):
    gz = tmp_path / "docs.jsonl.gz"
    gz.write_bytes(gzip.compress(collection.read_bytes())[:-200])
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    for command in ("segment", "dedup"):
        r = _run(command, str(gz), str(out), "--workers", "1")
        assert r.exit_code == 2 and "docs.jsonl.gz: cannot read" in r.stderr, r.output
        assert out.read_text() == "previous\n"
