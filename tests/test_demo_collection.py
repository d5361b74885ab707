"""The demo collection (the running interpreter's stdlib documentation) and its hand-judged topics."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragnarok.collection.demo import iter_demo_documents, write_demo_jsonl
from ragnarok.collection.segment import Segmenter

TOPICS = Path(__file__).resolve().parent.parent / "topics"


def _digest(documents: list[dict]) -> str:
    return hashlib.sha256(json.dumps(documents, ensure_ascii=False).encode()).hexdigest()


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return list(iter_demo_documents())


@pytest.fixture(scope="module")
def topics() -> dict[str, str]:
    lines = (TOPICS / "demo.tsv").read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line]
    assert all(len(row) == 2 and row[1].strip() for row in rows)
    qids = [qid for qid, _ in rows]
    assert len(set(qids)) == len(qids), "duplicate qids in demo.tsv"
    return dict(rows)


@pytest.fixture(scope="module")
def qrels() -> dict[str, dict[str, int]]:
    judged: dict[str, dict[str, int]] = {}
    for line in (TOPICS / "qrels.demo.txt").read_text(encoding="utf-8").splitlines():
        qid, _, docid, grade = line.split()
        assert docid not in judged.get(qid, {}), f"{qid} judges {docid} twice"
        judged.setdefault(qid, {})[docid] = int(grade)
    return judged


def test_documents_have_marco_shape_and_unique_ids(documents):
    ids = [d["docid"] for d in documents]
    assert len(set(ids)) == len(ids)
    assert all("#" not in docid for docid in ids)
    assert all(set(d) == {"docid", "url", "title", "headings", "body"} for d in documents)
    assert all(isinstance(v, str) for d in documents for v in d.values())
    assert all(d["body"].strip() for d in documents)
    assert {"stdlib.argparse", "stdlib.gzip", "stdlib.subprocess", "langref.yield"} <= set(ids)
    assert " at 0x" not in json.dumps(documents)


def test_at_least_5000_segments_that_are_exact_spans(documents):
    segmenter = Segmenter()
    assert sum(len(segmenter.spans(d["body"])) for d in documents) >= 5000
    for d in documents[::53]:
        for s in segmenter.segment(d):
            assert d["body"][s["start_char"] : s["end_char"]] == s["segment"]
            assert s["docid"].startswith(d["docid"] + "#")


def test_builds_are_identical(documents, tmp_path):
    assert _digest(list(iter_demo_documents())) == _digest(documents)
    path = tmp_path / "demo.jsonl"
    assert write_demo_jsonl(path) == len(documents)
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == documents


def test_topics_and_judgments(documents, topics, qrels):
    assert len(topics) >= 30
    assert set(qrels) <= set(topics), f"judged qids without a topic: {set(qrels) - set(topics)}"
    ids = {d["docid"] for d in documents}
    for qid in topics:
        judged = qrels.get(qid, {})
        assert 2 in judged.values(), f"{qid} has no fully relevant (grade 2) document"
        assert set(judged.values()) <= {1, 2}
        assert set(judged) <= ids, f"{qid} judges documents not in the collection: {set(judged) - ids}"
