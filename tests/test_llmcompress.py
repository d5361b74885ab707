"""The LLM compressor (ragnarok/stages/passage/llmcompress.py): select, refine and tree_summarize.

Exact behaviour against a scripted OpenAI-compatible server (its summaries are the ``factN`` words of the
passages it is shown, so what each mode must hand on is known in advance), through the real AG service
(``POST /v1/write``, its cache) and the gateway; the contract against the real llama.cpp server with
SmolLM2 (whatever it writes: one candidate with an input id, text derived from the input, lengths in the
trace); failures name the stage."""

from __future__ import annotations

import asyncio
import re

import pytest
from fastapi import FastAPI
from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from servers import free_port, serve_app

from api.main import create_app
from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.spec import parse
from ragnarok.core.spec_mapping import from_mapping
from ragnarok.core.types import Candidate, Doc, Query, Request
from ragnarok.service.batch import local_services
from ragnarok.service.gateway import PipelineRunner, StageError
from ragnarok.stages.components import PASSAGE_STAGES
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.passage.base import StageContext
from ragnarok.stages.passage.compress import JOIN, sentences
from ragnarok.stages.passage.llmcompress import CHUNK_CHARS, LLMCompress, pack, tree_calls


def scripted_app() -> FastAPI:
    """Summaries are ``gzip`` and the sorted ``factN`` words in the prompt's passages (and summary so far); NOTHING -> only a
    reasoning block (no summary), SLOW -> 3 s, BROKEN -> HTTP 500. ``app.state.prompts`` records what was asked."""
    app = FastAPI()
    app.state.prompts = []

    @app.get("/healthz")
    def healthz() -> dict:
        return {}

    @app.post("/v1/chat/completions")
    async def chat(request: HttpRequest):
        prompt = (await request.json())["messages"][-1]["content"]
        app.state.prompts.append(prompt)
        if "BROKEN" in prompt:
            return JSONResponse({"error": "scripted failure"}, status_code=500)
        if "SLOW" in prompt:
            await asyncio.sleep(3)
        shown = prompt.split("\n\n", 1)[1]  # past the question line
        facts = sorted(set(re.findall(r"fact\d+", shown)), key=lambda f: int(f[4:]))
        text = (
            "<think>no idea</think>" if "NOTHING" in prompt else "gzip " + " ".join(facts) + "." if facts else "none."
        )
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    return app


@pytest.fixture(scope="module")
def scripted():
    app = scripted_app()
    with serve_app(app) as base:
        yield app, base


@pytest.fixture(scope="module")
def settings(demo_settings, scripted):
    _, base = scripted
    return demo_settings.model_copy(
        update={
            "generators": [
                GeneratorConfig(
                    name="scripted",
                    backend="openai",
                    base_url=base + "/v1",
                    model="s",
                    timeout_s=10,
                    max_retries=0,
                    max_concurrency=4,
                ),
                GeneratorConfig(
                    name="dead",
                    backend="openai",
                    base_url=f"http://127.0.0.1:{free_port()}/v1",
                    model="x",
                    timeout_s=2,
                    max_retries=0,
                ),
            ]
        }
    )


def given(n: int, chars: int = 900, marker: str = "") -> Request:
    """n segments, each ~``chars`` characters holding fact<i> (and ``marker`` in the first)."""

    def text(i: int) -> str:
        words = f"Segment {i} says fact{i} about gzip. " + (marker + " " if i == 0 and marker else "")
        return (words + "Filler words about nothing in particular. " * (chars // 40 + 1))[: chars - 1] + "."

    return Request(
        query=Query(text="gzip", qid="q1"),
        candidates=[
            Candidate(docid=f"d{i}#0_0", score=float(n - i), doc=Doc(segment=text(i), title=f"d{i}")) for i in range(n)
        ],
    )


_APPS: dict[int, PipelineRunner] = {}


def runner(settings) -> PipelineRunner:
    """One in-process app (and so one generation cache) per settings."""
    if id(settings) not in _APPS:
        _APPS[id(settings)] = PipelineRunner(local_services(settings)[0])
    return _APPS[id(settings)]


def run(settings, spec: str, request: Request):
    """``spec`` over the given candidates, through the gateway."""
    return asyncio.run(runner(settings).run(parse(spec), Query(text="gzip", qid="q1"), given=request))


def ctx(settings, stage: str = "passage llmcompress") -> StageContext:
    """A stage's context whose ``write`` is the gateway's call to the AG service (the others unused)."""

    async def write(fields: dict) -> dict:
        return await runner(settings)._write(stage, fields)

    async def unused(*_args):
        raise AssertionError("not used")

    return StageContext(Query(text="gzip"), unused, unused, write)


# --- the parts: arguments, packing, the call plan ---------------------------------------------------------


def test_modes_parse_and_print_back():
    for spec in (
        "given@20 | llmcompress:scripted:refine@5 | extractive",
        "bm25@20 | llmcompress:smollm2:tree_summarize@10 | smollm2",
        "bm25@20 | llmcompress:smollm2@3 | extractive",
    ):
        assert str(parse(spec)) == spec
    mapping = {"retrieve": "bm25", "depth": 20, "rerank": [{"name": "llmcompress", "depth": 5, "arg": "g:refine"}]}
    assert str(from_mapping(mapping)) == "bm25@20 | llmcompress:g:refine@5"
    assert PASSAGE_STAGES.create("llmcompress", arg="g:refine").mode == "refine"
    assert PASSAGE_STAGES.create("llmcompress", arg="g").mode == "select"
    with pytest.raises(ComponentArgumentError, match="takes a mode of select, refine, tree_summarize, got 'tree'"):
        PASSAGE_STAGES.create("llmcompress", arg="g:tree")


def test_packing_and_the_call_plan():
    chunks, cut = pack(given(5).candidates)
    assert [c.ids for c in chunks] == [["d0#0_0", "d1#0_0", "d2#0_0"], ["d3#0_0", "d4#0_0"]] and cut == 0
    assert all(len(c.text) <= CHUNK_CHARS for c in chunks)
    long, cut = pack(given(1, chars=5000).candidates)
    assert len(long[0].text) == CHUNK_CHARS and cut == 5000 - CHUNK_CHARS
    assert [tree_calls(n) for n in (1, 2, 4, 5, 16, 17)] == [1, 3, 5, 8, 21, 25]


# --- exact behaviour, scripted server, through the AG service and the gateway ------------------------------


def test_refine_walks_the_chunks_with_a_running_summary(settings, scripted):
    app, _ = scripted
    app.state.prompts.clear()
    out = run(settings, "given@20 | llmcompress:scripted:refine@8 | extractive", given(10))
    stage = out.traces[1]
    detail = stage.detail
    assert stage.stage == "llmcompress:scripted:refine@8" and stage.ranking == ["d0#0_0"]
    # 8 segments of 900 chars: chunks of 3, 3, 2 -> 1 summarize + 2 refine calls, summary grows each step
    assert detail["calls"] == 3 and detail["chunks"] == 3 and detail["cached"] == 0
    assert len(app.state.prompts) == 3 and "Summary so far:\ngzip fact0 fact1 fact2." in app.state.prompts[1]
    assert detail["derived_from"] == [f"d{i}#0_0" for i in range(8)] and not detail["fallback"]
    assert out.ranking.candidates[0].doc.segment == "gzip " + " ".join(f"fact{i}" for i in range(8)) + "."
    assert out.ranking.candidates[0].doc.model_extra["derived_from"] == detail["derived_from"]
    assert detail["chars_before"] == 8 * 900 and detail["chars_after"] == len(out.ranking.candidates[0].doc.segment)
    assert out.result.references == ["d0#0_0"]
    # the same generator, prompts and input again: every call from the cache
    again = run(settings, "given@20 | llmcompress:scripted:refine@8 | extractive", given(10)).traces[1].detail
    assert again["cached"] == 3 and len(app.state.prompts) == 3


def test_tree_summarize_summarises_the_summaries(settings, scripted):
    app, _ = scripted
    app.state.prompts.clear()
    out = run(settings, "given@20 | llmcompress:scripted:tree_summarize@20", given(20, chars=1400))
    detail = out.traces[1].detail
    # 20 segments of 1400 chars: 2 a chunk -> 10 leaves, then 3 groups, then 1: 14 calls
    assert detail["chunks"] == 10 and detail["steps"] == [10, 3, 1] and detail["calls"] == 14 == tree_calls(10)
    assert out.ranking.candidates[0].doc.segment == "gzip " + " ".join(f"fact{i}" for i in range(20)) + "."
    assert (
        sum("gzip fact0 fact1." in p and "gzip fact2 fact3." in p for p in app.state.prompts) == 1
    )  # a level-2 prompt


def test_the_call_cap_leaves_the_lowest_chunks_out(settings):
    out = run(settings, "given@100 | llmcompress:scripted:tree_summarize@100", given(60, chars=1400))
    detail = out.traces[1].detail
    # 30 chunks would take 41 calls; at most 16: 12 leaves (12 + 3 + 1 calls), 18 chunks left out
    assert detail["calls"] == 16 and detail["chunks"] == 12 and detail["chunks_skipped"] == 18
    assert detail["segments_skipped"] == 36 and detail["derived_from"] == [f"d{i}#0_0" for i in range(24)]
    refine = run(settings, "given@100 | llmcompress:scripted:refine@100", given(60, chars=1400)).traces[1].detail
    assert refine["calls"] == 16 and refine["segments_skipped"] == 28


def test_an_empty_summary_hands_the_input_on(settings):
    out = run(settings, "given@20 | llmcompress:scripted:refine@4", given(4, marker="NOTHING"))
    detail = out.traces[1].detail
    # the first chunk (with NOTHING) gives no summary; the second starts it: derived from it alone
    assert detail["derived_from"] == ["d3#0_0"] and out.ranking.candidates[0].doc.segment == "gzip fact3."
    out = run(settings, "given@20 | llmcompress:scripted:refine@3", given(3, marker="NOTHING"))
    assert out.traces[1].detail["fallback"] and [c.docid for c in out.ranking.candidates] == [
        "d0#0_0",
        "d1#0_0",
        "d2#0_0",
    ]


def test_select_mode_is_unchanged_and_capped(settings):
    out = run(settings, "given@20 | llmcompress:scripted@5", given(5))
    detail = out.traces[1].detail
    assert detail["mode"] == "select" and detail["calls"] == 5 and detail["out"] == 5
    # the scripted server answers "gzip fact<i>.": segment i keeps its sentence number i (0: none, kept whole)
    assert [c.docid for c in out.ranking.candidates] == [f"d{i}#0_0" for i in range(5)]
    texts = [c.doc.segment for c in given(5).candidates]
    assert out.ranking.candidates[0].doc.segment == JOIN.join(sentences(texts[0]))
    for i in range(1, 5):
        assert out.ranking.candidates[i].doc.segment == sentences(texts[i])[i - 1]
    # the cap in select mode: segments past it stay whole (and are counted)
    capped, detail = asyncio.run(LLMCompress(generator="scripted", max_calls=2).apply(given(5), 5, ctx(settings)))
    assert detail["calls"] == 2 and detail["segments_skipped"] == 3 and detail["cached"] == 2
    assert [c.doc.segment for c in capped.candidates[2:]] == texts[2:]


def test_deadline_and_failures_name_the_stage(settings):
    stage = LLMCompress(generator="scripted", mode="refine", deadline_s=1)
    with pytest.raises(StageError) as err:
        asyncio.run(stage.apply(given(3, marker="SLOW"), 3, ctx(settings, "passage llmcompress:scripted:refine")))
    assert err.value.status == 504 and err.value.stage == "passage llmcompress:scripted:refine"
    assert "did not finish within 1 s" in str(err.value.detail)
    with pytest.raises(StageError) as err:
        run(settings, "given@20 | llmcompress:scripted:tree_summarize@3", given(3, marker="BROKEN"))
    assert err.value.status == 502 and err.value.stage == "passage llmcompress:scripted:tree_summarize"


@pytest.fixture(scope="module")
def client(settings):
    with TestClient(create_app(settings, arena=False)) as c:
        yield c


@pytest.mark.parametrize(
    ("pipeline", "status", "words"),
    [
        ("bm25@10 | llmcompress:dead:refine@5 | extractive", 502, "passage llmcompress:dead:refine"),
        ("bm25@10 | llmcompress:scripted:tree@5 | extractive", 422, "takes a mode of select, refine, tree_summarize"),
        ("bm25@10 | llmcompress:nope:refine@5 | extractive", 404, "unknown generator (the name is not echoed)"),
        ("bm25@10 | llmcompress:extractive:refine@5 | extractive", 422, "writes no free text"),
        ("bm25@10 | smollm2:a:b", 422, "a generator stage takes one template"),
    ],
)
def test_bad_pipelines_over_http(client, pipeline, status, words):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": pipeline})
    assert r.status_code == status, r.text
    assert words in str(r.json()["detail"])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"task": "summarize", "generator": "scripted", "query": "q"}, 422),
        ({"task": "summarize", "generator": "scripted", "query": "q", "texts": ["x"] * 9}, 422),
        ({"task": "summarize", "generator": "scripted", "query": "q", "texts": ["x" * 12_001]}, 413),
        ({"task": "refine", "generator": "scripted", "query": "q", "texts": ["x"]}, 422),
        ({"task": "refine", "generator": "scripted", "query": "q", "texts": ["a", "b"], "summary": "s"}, 422),
    ],
)
def test_write_route_bounds(client, body, status):
    r = client.post("/v1/write", json=body)
    assert r.status_code == status, r.text


def test_write_route_summarizes(client):
    r = client.post(
        "/v1/write",
        json={
            "task": "refine",
            "generator": "scripted",
            "query": "q",
            "summary": "fact2.",
            "texts": ["fact1 and fact9"],
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["items"] == ["gzip fact1 fact2 fact9."]


# --- the real llama.cpp server with SmolLM2 -----------------------------------------------------------------


@pytest.fixture(scope="module")
def smol_client(settings, smollm2_server):
    # a summary is ~600 prompt tokens and at most max_tokens written (the stage asks for at most 128): seconds
    # on a quiet machine, minutes on a loaded one (one call passed 600 s at load average 30 on 2 cores)
    smol = GeneratorConfig(
        name="smol",
        backend="openai",
        base_url=smollm2_server,
        model="smollm2",
        timeout_s=600,
        max_retries=0,
        max_tokens=48,
        context_tokens=4096,
    )
    with TestClient(create_app(settings.model_copy(update={"generators": [smol]}), arena=False)) as c:
        yield c


@pytest.mark.slow
def test_summarising_modes_against_smollm2(smol_client):
    """Two segments (one chunk: one call; tree_summarize's leaf is refine's first prompt, so it is cached)."""
    topic = "compress a file with gzip"
    for mode in ("refine", "tree_summarize"):
        spec = f"bm25@10 | llmcompress:smol:{mode}@2 | extractive"
        r = smol_client.post("/rag", json={"topic": topic, "pipeline": spec, "trace": True, "segments": True})
        assert r.status_code == 200, r.text
        body = r.json()
        retrieved, stage = body["trace"][0]["ranking"], body["trace"][1]
        detail = stage["detail"]
        assert stage["stage"] == f"llmcompress:smol:{mode}@2" and 1 <= detail["calls"] <= 16
        assert detail["chars_before"] > 0 and detail["chars_after"] > 0 and stage["latency_ms"] > 0
        if detail["fallback"]:  # the model wrote nothing usable: the input's top 2, unchanged
            assert stage["ranking"] == retrieved[:2]
        else:  # one candidate: the best segment's id, a non-empty summary derived from the top 2
            assert stage["ranking"] == retrieved[:1] and detail["derived_from"]
            assert set(detail["derived_from"]) <= set(retrieved[:2])
            assert body["segments"][retrieved[0]]["segment"].strip()
        assert set(body["references"]) <= set(stage["ranking"])
        again = smol_client.post("/rag", json={"topic": topic, "pipeline": spec, "trace": True}).json()
        assert again["trace"][1]["detail"]["cached"] == again["trace"][1]["detail"]["calls"] == detail["calls"]
        assert again["trace"][1]["ranking"] == stage["ranking"]
