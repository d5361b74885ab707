"""The offline demo collection and its topics: size, determinism, judgments, and BM25 quality end to end."""

import hashlib
import json
from pathlib import Path

import pytest

from ragnarok.collection.demo import iter_demo_documents
from ragnarok.collection.segment import Segmenter
from ragnarok.core.evaluation import evaluate, read_qrels
from ragnarok.core.topics import load_topics
from ragnarok.core.types import Query
from ragnarok.service.retrieval_service import RetrievalService

TOPICS = Path(__file__).resolve().parent.parent / "topics"


@pytest.fixture(scope="module")
def documents():
    return list(iter_demo_documents())


def test_demo_collection_is_large_real_and_deterministic(documents):
    segments = [s for d in documents for s in Segmenter().segment(d)]
    assert len(segments) >= 5000
    assert len({d["docid"] for d in documents}) == len(documents)
    assert all("#" not in d["docid"] for d in documents)
    for d in documents[::97]:
        for s in Segmenter().segment(d):
            assert d["body"][s["start_char"] : s["end_char"]] == s["segment"]
    digest = hashlib.sha256(json.dumps(documents).encode()).hexdigest()
    assert hashlib.sha256(json.dumps(list(iter_demo_documents())).encode()).hexdigest() == digest
    assert " at 0x" not in json.dumps(documents)


def test_topics_and_judgments(documents):
    topics = load_topics("demo", TOPICS)
    assert len(topics) >= 30 and len({t.qid for t in topics}) == len(topics)
    qrels = read_qrels(TOPICS / "qrels.demo.txt")
    ids = {d["docid"] for d in documents}
    assert set(qrels) == {t.qid for t in topics}
    for qid, judged in qrels.items():
        assert 2 in judged.values(), f"{qid} has no fully relevant document"
        assert set(judged) <= ids, f"{qid} judges documents that do not exist: {set(judged) - ids}"


def test_bm25_finds_the_judged_answers(demo_settings):
    """Segment-level BM25 scored against document-level judgments (MaxP)."""
    service = RetrievalService(demo_settings)
    topics = load_topics("demo", TOPICS)
    run = {}
    for t in topics:
        request = service.get("bm25").retrieve(Query(text=t.text, qid=t.qid), 100)
        run[t.qid] = {c.docid: c.score for c in request.candidates}
    scores = evaluate(read_qrels(TOPICS / "qrels.demo.txt"), run)
    assert scores["nDCG@10"] > 0.45 and scores["Recall@100"] > 0.75
    top = service.get("bm25").retrieve(Query(text="how do I parse command-line arguments"), 5)
    assert any(
        c.docid.split("#")[0]
        in {"stdlib.argparse", "stdlib.getopt", "stdlib.argparse.ArgumentParser", "stdlib.getopt.getopt"}
        for c in top.candidates
    )
