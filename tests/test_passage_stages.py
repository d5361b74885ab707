"""Passage stages (ragnarok/stages/passage/): a ranking in, a ranking out. Neighbour windows and auto-merging are
checked on segments made by our own segmenter: the merged text is the document body between the merged
offsets, byte for byte (in memory, and end to end through Lucene, POST /v1/segments and POST /rag)."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from ragnarok.collection.segment import Segmenter
from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.stages.components import PASSAGE_STAGES
from ragnarok.stages.passage.base import StageContext
from ragnarok.stages.passage.spans import piece

# Paragraphs, short and long sentences, a heading: what the segmenter has to cope with in real documents.
BODY = "\n\n".join(
    f"Heading {p}\n\n"
    + " ".join(f"Sentence {p}.{s} talks about topic{(p * 7 + s) % 5}, with (some) punctuation." for s in range(1, 9))
    for p in range(1, 7)
)


def segments_of(docid: str, body: str) -> list[Candidate]:
    return [
        Candidate(
            docid=s["docid"], score=0.0, doc=Doc(**{k: s[k] for k in ("segment", "title", "start_char", "end_char")})
        )
        for s in Segmenter().segment({"docid": docid, "body": body, "title": docid})
    ]


def context(store: dict[str, list[Candidate]], topic: str = "topic1") -> StageContext:
    """The stage's view of the services, served from segmenter output (the end-to-end test uses Lucene)."""

    async def segments(prefixes: list[str]) -> dict[str, Candidate]:
        return {p: c for p in prefixes for segs in store.values() for c in segs if c.docid.startswith(p)}

    async def rerank(name: str, request: Request, k: int) -> Request:
        raise AssertionError("not used")

    async def write(fields: dict) -> dict:
        raise AssertionError("not used")

    return StageContext(Query(text=topic), segments, rerank, write)


def run(spec_name: str, arg: str | None, request: Request, k: int, ctx: StageContext):
    return asyncio.run(PASSAGE_STAGES.create(spec_name, arg=arg).apply(request, k, ctx))


def ranked(cands: list[Candidate]) -> Request:
    return Request(
        query=Query(text="topic1"),
        candidates=[c.model_copy(update={"score": float(len(cands) - i)}) for i, c in enumerate(cands)],
    )


def assert_spans_of_body(out: Request, bodies: dict[str, str]) -> None:
    for c in out.candidates:
        base = c.docid.split("#")[0]
        assert c.doc.segment == bodies[base][c.doc.start_char : c.doc.end_char], c.docid


def test_segments_overlap_by_design():
    segs = segments_of("d", BODY)
    assert len(segs) >= 4
    assert all(piece(c) is not None for c in segs)
    assert segs[1].doc.start_char < segs[0].doc.end_char  # stride 5 < window 10


@pytest.mark.parametrize("width", [1, 2, 3])
def test_neighbours_window_equals_the_body_byte_for_byte(width):
    segs, other = segments_of("d", BODY), segments_of("e", BODY.replace("topic", "subject"))
    request = ranked([segs[2], other[0], segs[3], segs[0]])
    out, detail = run("neighbours", str(width), request, 10, context({"d": segs, "e": other}))
    assert_spans_of_body(out, {"d": BODY, "e": BODY.replace("topic", "subject")})
    # the windows of d#2, d#3 and d#0 overlap: one span at d#2's rank, no text twice
    assert [c.docid for c in out.candidates] == [segs[2].docid, other[0].docid]
    first = out.candidates[0].doc
    assert first.start_char == 0
    assert first.end_char == segs[min(len(segs) - 1, 3 + width)].doc.end_char
    assert segs[3].docid in first.merged and segs[3].docid not in [c.docid for c in out.candidates]
    assert detail["merged"] >= 1 and detail["chars_after"] > 0
    texts = [c.doc.segment for c in out.candidates if c.docid.startswith("d#")]
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            assert texts[a] not in texts[b] and texts[b] not in texts[a]


def test_automerge_fills_the_gap_and_keeps_the_best_rank():
    segs = segments_of("d", BODY)
    request = ranked([segs[1], segs[3], segs[0]])  # 1 and 3 need 2 (looked up) to be one span
    out, detail = run("automerge", None, request, 10, context({"d": segs}))
    assert [c.docid for c in out.candidates] == [segs[1].docid]
    assert out.candidates[0].doc.start_char == 0 and out.candidates[0].doc.end_char == segs[3].doc.end_char
    assert_spans_of_body(out, {"d": BODY})
    assert out.candidates[0].doc.merged == [segs[n].docid for n in range(4)]
    assert detail["fetched"] == 1 and detail["merged"] == 2
    alone, _ = run("automerge", "3", ranked([segs[0], segs[1]]), 10, context({"d": segs}))
    assert [c.doc.segment for c in alone.candidates] == [segs[0].doc.segment, segs[1].doc.segment]


def test_stages_leave_foreign_ids_alone():
    request = ranked(
        [
            Candidate(docid="CACM-0001", score=1, doc=Doc(segment="a b c")),
            Candidate(docid="x#1_5", score=1, doc=Doc(segment="abc", start_char=9, end_char=12)),
        ]
    )
    for name in ("neighbours", "automerge", "collapse"):
        out, _ = run(name, None, request, 10, context({}))
        assert out.candidates == request.candidates


def test_collapse_counts_overlapping_windows_once():
    segs = segments_of("d", BODY)
    dup = Candidate(docid="copy#0_0", score=0, doc=Doc(segment=segs[0].doc.segment))
    out, detail = run("collapse", None, ranked([segs[0], segs[1], dup, segs[2]]), 10, context({}))
    assert [c.docid for c in out.candidates] == [segs[0].docid, segs[2].docid]
    assert (detail["overlapping"], detail["similar"]) == (1, 1)


def test_cutoffs_keep_order_and_at_least_one():
    cands = [
        Candidate(docid=f"c{i}", score=s, doc=Doc(segment=f"text {i}"))
        for i, s in enumerate([10.0, 9.0, 5.0, 2.0, 0.0])
    ]
    request = Request(query=Query(text="q"), candidates=cands)
    out, detail = run("cutoff", "0.5", request, 10, context({}))
    assert [c.docid for c in out.candidates] == ["c0", "c1", "c2"] and detail["threshold_score"] == 5.0
    out, _ = run("cutoff", "1", request, 10, context({}))
    assert [c.docid for c in out.candidates] == ["c0"]
    out, _ = run("percentile", "60", request, 2, context({}))
    assert [c.docid for c in out.candidates] == ["c0", "c1"]
    out, _ = run("percentile", "0", request, 10, context({}))
    assert len(out.candidates) == 5


def test_reorder_puts_the_best_at_both_ends():
    cands = [Candidate(docid=f"c{i}", score=10 - i) for i in range(7)]
    out, _ = run("reorder", None, Request(query=Query(text="q"), candidates=cands), 6, context({}))
    assert [c.docid for c in out.candidates] == ["c0", "c2", "c4", "c5", "c3", "c1"]


def test_extractive_compressor_keeps_sentences_of_the_segment():
    segs = segments_of("d", BODY)
    out, detail = run("compress", "0.3", ranked(segs[:3]), 3, context({}, topic="topic3 punctuation"))
    assert detail["chars_after"] < detail["chars_before"] and detail["sentences_dropped"] > 0
    for before, after in zip(segs, out.candidates):
        parts = after.doc.segment.split(" … ")
        assert parts and all(p in before.doc.segment for p in parts)
        assert any("topic3" in p for p in parts)
        positions = [before.doc.segment.index(p) for p in parts]
        assert positions == sorted(positions)


@pytest.mark.parametrize(
    ("name", "arg", "words"),
    [
        ("cutoff", "1.5", "cutoff:T takes a number from 0 to 1, got '1.5'"),
        ("cutoff", "nan", "cutoff:T takes a number"),
        ("percentile", "101", "percentile:P takes a number from 0 to 100"),
        ("neighbours", "4", "neighbours:W takes an integer from 1 to 3"),
        ("neighbours", "x", "neighbours:W takes an integer"),
        ("automerge", "1", "automerge:M takes an integer from 2 to 16"),
        ("compress", "0", "compress:R takes a number from 0.05 to 1"),
        ("reorder", "2", "reorder takes no argument"),
        ("llmcompress", None, "llmcompress names its generator"),
    ],
)
def test_bad_arguments_name_the_stage(name, arg, words):
    with pytest.raises(ComponentArgumentError, match=words.replace("(", r"\(").replace(".", r"\.")):
        PASSAGE_STAGES.create(name, arg=arg)


# --- end to end: the demo index (real Lucene), POST /v1/segments and POST /rag -------------------------------


@pytest.fixture(scope="module")
def client(demo_settings):
    with TestClient(create_app(demo_settings, arena=False)) as c:
        yield c


@pytest.fixture(scope="module")
def demo_bodies() -> dict[str, str]:
    from ragnarok.collection.demo import iter_demo_documents

    return {d["docid"]: d["body"] for d in iter_demo_documents()}


def test_rag_neighbours_and_automerge_on_the_demo_index(client, demo_bodies):
    topic = "compound statements if while for try with"  # langref.compound has 100+ segments
    for spec in (
        "bm25@30 | neighbours:1@10 | extractive",
        "bm25@30 | automerge@10 | extractive",
        "bm25@30 | collapse@10 | neighbours:2@10 | automerge:2@10 | extractive",
    ):
        r = client.post("/rag", json={"topic": topic, "pipeline": spec, "trace": True, "segments": True})
        assert r.status_code == 200, r.text
        body = r.json()
        first = body["trace"][0]["ranking"]
        for trace in body["trace"][1:-1]:
            assert set(trace["ranking"]) <= set(first)  # ids are input segments' ids
            assert trace["detail"]["in"] >= trace["detail"]["out"] and trace["latency_ms"] >= 0
        for docid, doc in body["segments"].items():
            base = docid.split("#")[0]
            assert doc["segment"] == demo_bodies[base][doc["start_char"] : doc["end_char"]], docid
    grown = client.post(
        "/rag", json={"topic": topic, "pipeline": "bm25@30 | neighbours:1@10 | extractive", "trace": True}
    ).json()["trace"][1]["detail"]
    assert grown["fetched"] > 0 and grown["chars_after"] > 0


def test_segments_route(client):
    r = client.post("/v1/segments", json={"prefixes": ["langref.compound#1_", "no-such-doc#0_"]})
    assert r.status_code == 200, r.text
    found = r.json()["segments"]
    assert list(found) == ["langref.compound#1_"] and found["langref.compound#1_"]["docid"].startswith(
        "langref.compound#1_"
    )
    assert client.post("/v1/segments", json={"prefixes": [""]}).status_code == 422
    assert client.post("/v1/segments", json={"prefixes": ["x"] * 2001}).status_code == 413
    assert client.post("/v1/segments", json={"prefixes": ["x"], "index": "nope"}).status_code == 404


@pytest.mark.parametrize(
    ("pipeline", "status", "words"),
    [
        ("bm25@10 | nosuch@5 | extractive", 404, "unknown reranker (the name is not echoed)"),
        ("bm25@10 | cutoff:7@5 | extractive", 422, "cutoff:T takes a number from 0 to 1, got (not echoed)"),
        ("bm25@10 | neighbours:0@5 | extractive", 422, "neighbours:W takes an integer from 1 to 3"),
        ("bm25@10 | cutoff:0.5@5~rrf | extractive", 422, "not fused with its input"),
        ("bm25@10 | hyde:smollm2@5 | extractive", 422, "hyde is a query stage: it goes before the retriever"),
        ("bm25@10 > hyde:smollm2 | extractive", 422, "a query stage comes before the retriever"),
        ("bm25@10 | reorder@0 | extractive", 422, "a positive integer"),
    ],
)
def test_bad_stages_are_4xx_naming_the_token(client, pipeline, status, words):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": pipeline})
    assert r.status_code == status, r.text
    assert words in str(r.json()["detail"])


def test_neighbours_far_apart_stay_separate_spans():
    segs = segments_of("d", BODY)
    assert len(segs) >= 8
    out, _ = run("neighbours", "1", ranked([segs[6], segs[0]]), 10, context({"d": segs}))
    assert [c.docid for c in out.candidates] == [segs[6].docid, segs[0].docid]
    assert_spans_of_body(out, {"d": BODY})
    a, b = out.candidates[1].doc, out.candidates[0].doc
    assert (a.start_char, a.end_char) == (0, segs[1].doc.end_char)
    assert (b.start_char, b.end_char) == (segs[5].doc.start_char, segs[7].doc.end_char)
