"""Query stages (ragnarok/stages/query/) in the pipeline grammar, against the real llama.cpp server with SmolLM2:
whatever the model writes, the queries are non-empty text, the rankings hold only retrieved segments, the
generated text is cached per (generator, prompt, query) and shown in the trace; failures name the stage."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from servers import free_port

from api.main import create_app
from ragnarok.core.spec import SpecError, parse
from ragnarok.core.spec_mapping import from_mapping
from ragnarok.stages.components import QUERY_STAGES
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.query.stages import HYDE, MULTIQUERY, QUERY2DOC, Expansion, parse_selection

# --- the grammar ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "hyde:smollm2 > dense:minilm@100 | extractive",
        "multiquery:smollm2:3 > rrf(bm25, dense:minilm)@100 | neighbours:1@20 | extractive",
        "bm25@100 | cutoff:0.3@20 | compress@20 | reorder@20 | smollm2",
        "decompose:gpt-4o:2~dbsf > hyde:smollm2 > bm25+rm3@50 | automerge:3@20 | simcutoff:0.25@10 | gpt-4o:chatqa",
        "query2doc:smollm2 > bm25@1000 | percentile:75@100 | collapse:0.9@20 | llmcompress:smollm2@20",
    ],
)
def test_every_spec_prints_back_as_it_parses(spec):
    parsed = parse(spec)
    assert str(parsed) == spec and parse(str(parsed)) == parsed


def test_the_structured_form_has_query_stages():
    pipeline = from_mapping(
        {
            "query": [{"name": "multiquery", "generator": "smollm2", "n": 2}],
            "retrieve": "bm25",
            "depth": 50,
            "rerank": [{"name": "reorder", "depth": 20}],
            "generate": {"name": "extractive"},
        }
    )
    assert str(pipeline) == "multiquery:smollm2:2 > bm25@50 | reorder@20 | extractive"
    with pytest.raises(SpecError, match="pipeline.query.0.n"):
        from_mapping({"query": [{"name": "multiquery", "generator": "x", "n": 9}], "retrieve": "bm25"})


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("hyde > bm25", "a query stage names its generator"),
        ("multiquery:smollm2:9 > bm25", "a query stage writes 1 to 8 queries, found '9'"),
        ("multiquery:smollm2:0 > bm25", "a query stage writes 1 to 8 queries, found '0'"),
        ("multiquery:a:8 > multiquery:a:1 > bm25", "would retrieve 18 queries; at most 16"),
        ("hyde:a > hyde:a > hyde:a > bm25", "at most 2 query stages"),
        ("hyde:a~xyz > bm25", "unknown fusion"),
        ("bm25@10 > hyde:a", "a query stage comes before the retriever"),
    ],
)
def test_bad_query_stages_point_at_the_token(spec, words):
    with pytest.raises(SpecError, match=words):
        parse(spec)


# --- what a stage makes of the text a model writes ----------------------------------------------------------


def test_parsing_generated_queries():
    raw = 'Here you go:\n1. gzip compression in python\n- "How to gzip a file"\n\n2) compress a file with gzip\n1. gzip compression in python\n3. ok'
    assert MULTIQUERY.parse(raw, "compress a file with gzip", 3) == ["gzip compression in python", "How to gzip a file"]
    assert MULTIQUERY.parse("   \n\n", "q", 3) == []
    assert HYDE.parse("<think>hmm</think>  Gzip   compresses\nfiles. ", "q", 1) == ["Gzip compresses files."]
    e = Expansion.of("gzip")
    assert HYDE.expand(e, ["Passage."]) == [Expansion("gzip", "gzip Passage.", "Passage.")]
    assert QUERY2DOC.expand(e, ["Passage."]) == [
        Expansion("gzip", "gzip gzip gzip gzip gzip Passage.", "gzip Passage.")
    ]
    assert HYDE.expand(e, []) == [e]
    assert MULTIQUERY.expand(e, ["a b", "c d"]) == [e, Expansion.of("a b"), Expansion.of("c d")]
    assert parse_selection("2, 3 and [7]; 0", 5) == [1, 2]
    assert set(QUERY_STAGES.names()) == {"hyde", "multiquery", "decompose", "query2doc"}


# --- against the real llama.cpp server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(demo_settings, smollm2_server):
    settings = demo_settings.model_copy(
        update={
            "generators": [
                GeneratorConfig(
                    name="smol",
                    backend="openai",
                    base_url=smollm2_server,
                    model="smollm2",
                    timeout_s=120,
                    max_tokens=400,
                    context_tokens=4096,
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
    with TestClient(create_app(settings, arena=False)) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["hyde:smol", "query2doc:smol", "multiquery:smol:3", "decompose:smol:2"])
def test_query_stages_against_smollm2(client, stage):
    topic = "how do I compress a file with gzip"
    spec = f"{stage} > rrf(bm25, bm25+rm3)@30 | extractive"
    r = client.post("/rag", json={"topic": topic, "pipeline": spec, "trace": True})
    assert r.status_code == 200, r.text
    body = r.json()
    query_trace, retrieval = body["trace"][0], body["trace"][1]
    assert query_trace["stage"] == stage and retrieval["stage"] == "rrf(bm25, bm25+rm3)"
    queries = query_trace["detail"]["queries"]
    assert queries and query_trace["k"] == len(queries)
    for q in queries:
        texts = [q] if isinstance(q, str) else [q["lexical"], q["dense"]]
        assert all(isinstance(t, str) and t.strip() for t in texts)
    if stage.startswith(("multiquery", "decompose")):
        assert queries[0] == topic and len(queries) <= 1 + int(stage.rsplit(":", 1)[1])
    assert query_trace["detail"]["generated"] and query_trace["latency_ms"] > 0
    assert 0 < len(retrieval["ranking"]) <= 30 and set(body["references"]) <= set(retrieval["ranking"])
    # the same generator, prompt and query again: from the cache, and the trace says so
    again = client.post("/rag", json={"topic": topic, "pipeline": spec, "trace": True}).json()
    assert again["trace"][0]["detail"]["cached"] == [True] * len(again["trace"][0]["detail"]["cached"])
    assert again["trace"][0]["detail"]["generated"] == query_trace["detail"]["generated"]
    assert again["trace"][1]["ranking"] == retrieval["ranking"]


@pytest.mark.slow
def test_hyde_and_query2doc_share_one_generation(client):
    first = client.post("/v1/write", json={"task": "hyde", "generator": "smol", "query": "what is a tarball"}).json()
    second = client.post("/v1/write", json={"task": "query2doc", "generator": "smol", "query": "what is a tarball"})
    assert second.status_code == 200 and second.json()["cached"] is True
    assert second.json()["text"] == first["text"]


@pytest.mark.slow
def test_llm_compressor_against_smollm2(client):
    spec = "bm25@10 | llmcompress:smol@3 | extractive"
    r = client.post(
        "/rag", json={"topic": "compress a file with gzip", "pipeline": spec, "trace": True, "segments": True}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    stage = body["trace"][1]
    assert stage["stage"] == "llmcompress:smol@3" and stage["ranking"] == body["trace"][0]["ranking"][:3]
    assert stage["detail"]["chars_after"] <= stage["detail"]["chars_before"]
    original = client.post("/v1/retrieve", json={"query": "compress a file with gzip", "k": 10}).json()
    texts = {c["docid"]: c["doc"]["segment"] for c in original["candidates"]}
    for docid, doc in body["segments"].items():
        assert all(part in texts[docid] for part in doc["segment"].split(" … "))


@pytest.mark.parametrize(
    ("pipeline", "status", "words"),
    [
        ("hyde:dead > bm25@10 | extractive", 502, "query hyde:dead"),
        ("bm25@10 | llmcompress:dead@5 | extractive", 502, "passage llmcompress:dead"),
        ("hyde:nope > bm25@10 | extractive", 404, "unknown generator (the name is not echoed)"),
        ("hyde:extractive > bm25@10 | extractive", 422, "writes no free text"),
        ("rewrite:smol > bm25@10 | extractive", 404, "unknown query stage (the name is not echoed)"),
        ("hyde:smol:2 > bm25@10 | extractive", 422, "hyde writes one passage"),
        ("multiquery:smol:12 > bm25@10 | extractive", 422, "a query stage writes 1 to 8 queries"),
    ],
)
def test_query_stage_failures_name_the_stage(client, pipeline, status, words):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": pipeline})
    assert r.status_code == status, r.text
    assert words in str(r.json()["detail"])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"task": "hyde", "generator": "smol", "query": " "}, 422),
        ({"task": "hyde", "generator": "smol", "query": "x" * 5000}, 413),
        ({"task": "multiquery", "generator": "smol", "query": "x", "n": 0}, 422),
        ({"task": "select", "generator": "smol", "query": "x", "sentences": []}, 413),
        ({"task": "nope", "generator": "smol", "query": "x"}, 404),
    ],
)
def test_write_route_bad_input(client, body, status):
    r = client.post("/v1/write", json=body)
    assert r.status_code == status, r.text
