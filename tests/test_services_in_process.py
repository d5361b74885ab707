"""The gateway's direct calls to the R and AG services of its own process give what the routes answer over
HTTP: the same retrieval bytes, the same answer and notes, and for every kind of failure the same stage error
(status and detail). Real parts: the demo Lucene index, the app's own routes through httpx's in-process
transport for the HTTP side."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from api.main import create_app
from ragnarok.core.trace import StageError
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.service.services import Services, json_body

TOPIC = "how do I compress a file with gzip"


@pytest.fixture(scope="module")
def app(demo_settings):
    return create_app(demo_settings.model_copy(update={"max_segment_chars": 20_000}), arena=False)


def _both(app) -> tuple[Services, Services]:
    direct = app.state.services
    assert direct.local_retrieve is not None and direct.local_generate is not None
    return direct, dataclasses.replace(direct, local_retrieve=None, local_generate=None)


def _outcome(call):
    """What ``call()`` (a coroutine function) gives: its value, or the stage error's status and detail."""

    async def run():
        try:
            return ("ok", await call())
        except StageError as exc:
            return ("error", exc.stage, exc.status, exc.detail, exc.retry_after)

    return anyio.run(run)


@pytest.mark.parametrize("retriever", ["bm25", "bm25+rocchio", "bm25+rm3"])
def test_retrieval_in_process_is_the_routes_bytes(app, retriever):
    direct, http = _both(app)
    fields = {"query": TOPIC, "qid": "q1", "retriever": retriever, "index": None, "k": 30}
    (_, (mine, ms)), (_, (theirs, _)) = (
        _outcome(lambda: s.retrieve(f"retrieve {retriever}", fields)) for s in (direct, http)
    )
    assert mine == theirs and Request.model_validate_json(mine).candidates and ms > 0


@pytest.mark.parametrize(
    "fields",
    [
        {"query": TOPIC, "retriever": "nosuchretriever", "k": 10},  # 404
        {"query": TOPIC, "retriever": "bm25", "k": 0},  # 422: k out of range
        {"query": "   ", "retriever": "bm25", "k": 10},  # 422: empty
        {"query": TOPIC, "retriever": "bm25", "index": "nosuchindex", "k": 10},  # unknown index
        {"query": "x" * 100_000, "retriever": "bm25", "k": 10},  # 413: too long
    ],
)
def test_a_retrieval_failing_in_process_is_the_routes_error(app, fields):
    direct, http = _both(app)
    fields = {"qid": "", "index": None, **fields}
    mine, theirs = (_outcome(lambda: s.retrieve("retrieve x", fields)) for s in (direct, http))
    assert mine[0] == "error" and mine == theirs


def _top(app, k: int = 20) -> Request:
    data = anyio.run(
        lambda: app.state.services.retrieve("retrieve bm25", {"query": TOPIC, "retriever": "bm25", "k": k})
    )
    return Request.model_validate_json(data[0])


def test_generation_in_process_is_the_routes_answer_and_notes(app):
    direct, http = _both(app)
    top = _top(app)
    topic = Query(text=TOPIC, qid="q1")
    body = json_body({"topic": TOPIC, "topic_id": "q1", "generator": "extractive", "k": 20, "notes": True}, request=top)
    mine, theirs = (
        _outcome(lambda: s.generate("generate extractive", topic, top, "extractive", None, body))
        for s in (direct, http)
    )
    assert mine[0] == theirs[0] == "ok", (mine, theirs)
    (answer, notes, _), (their_answer, their_notes, _) = mine[1], theirs[1]
    assert answer == their_answer and notes == their_notes and answer.answer and notes


@pytest.mark.parametrize(
    ("generator", "long_segment"),
    [("nosuchgenerator", False), ("gpt-4o", False), ("extractive", True)],  # 404; 422 (no OPENAI_API_KEY); 413
)
def test_a_generation_failing_in_process_is_the_routes_error(app, generator, long_segment, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    direct, http = _both(app)
    top = _top(app, 5)
    if long_segment:
        top.candidates.append(Candidate(docid="long", score=0.5, doc=Doc(segment="word " * 5000)))
    topic = Query(text=TOPIC, qid="q1")
    body = json_body({"topic": TOPIC, "topic_id": "q1", "generator": generator, "k": 20, "notes": True}, request=top)
    mine, theirs = (
        _outcome(lambda: s.generate(f"generate {generator}", topic, top, generator, None, body)) for s in (direct, http)
    )
    assert mine[0] == "error" and mine == theirs, (mine, theirs)
