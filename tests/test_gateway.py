"""POST /rag: the gateway composes the R and AG services over HTTP, in process or across hosts."""

import pytest
from fastapi.testclient import TestClient
from servers import serve_app

from api.main import create_app
from ragnarok.core.settings import Settings


@pytest.fixture(scope="module")
def client(demo_settings):
    with TestClient(create_app(demo_settings)) as c:
        yield c


def test_rag_in_process_with_trace(client):
    r = client.post(
        "/rag",
        json={
            "topic": "compress a file with gzip",
            "topic_id": "t1",
            "pipeline": "bm25@50 | extractive",
            "trace": True,
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["topic_id"], body["topic"]) == ("t1", "compress a file with gzip")
    assert body["references"] and any("gzip" in ref for ref in body["references"])
    assert [t["stage"] for t in body["trace"]] == ["bm25", "extractive"]
    assert body["trace"][0]["k"] == 50 and len(body["trace"][0]["ranking"]) == 50
    assert set(body["references"]) <= set(body["trace"][0]["ranking"])
    assert "trace" not in client.post("/rag", json={"topic": "gzip", "pipeline": "bm25 | extractive"}).json()
    cited = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@20 | extractive", "segments": True}).json()
    assert set(cited["segments"]) == set(cited["references"])
    assert all(doc["segment"] and doc["title"] for doc in cited["segments"].values())


def test_fusion_in_the_first_stage(client):
    r = client.post(
        "/rag",
        json={
            "topic": "parse command-line arguments",
            "trace": True,
            "pipeline": "rrf(bm25, bm25+rm3)@20 | extractive",
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["trace"][0]["stage"] == "rrf(bm25, bm25+rm3)"


def test_structured_pipeline(client):
    r = client.post(
        "/rag",
        json={"topic": "gzip", "pipeline": {"retrieve": "bm25", "depth": 10, "generate": {"name": "extractive"}}},
    )
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("pipeline", "status", "words"),
    [
        ("bm25 |", 422, "expected a reranker or generator name"),
        ("bm25@10", 422, "no generation stage"),
        ("splade@10 | extractive", 404, "unknown retriever (the name is not echoed)"),
        ("bm25@10 | gpt-9", 404, "unknown generator (the name is not echoed)"),
        ("bm25@10 | gpt-4o", 422, "OPENAI_API_KEY is not set"),
    ],
)
def test_bad_pipelines_name_the_problem(client, pipeline, status, words):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": pipeline})
    assert r.status_code == status, r.text
    assert words in str(r.json()["detail"])


def test_across_hosts_over_real_http(demo_settings, tmp_path):
    """R and AG on their own servers; the gateway reaches them by URL with the same client code."""
    with serve_app(create_app(demo_settings)) as r_url, serve_app(create_app(demo_settings)) as ag_url:
        gateway = Settings(data_dir=tmp_path, retrieval_url=r_url, generation_url=ag_url)
        with TestClient(create_app(gateway)) as c:
            r = c.post("/rag", json={"topic": "gzip compress", "pipeline": "bm25@20 | extractive"})
            assert r.status_code == 200, r.text
            assert r.json()["references"]
    down = Settings(data_dir=tmp_path, retrieval_url="http://127.0.0.1:9", generation_url=ag_url)
    with TestClient(create_app(down)) as c:
        r = c.post("/rag", json={"topic": "gzip", "pipeline": "bm25@20 | extractive"})
        assert r.status_code == 502 and r.json()["detail"]["stage"] == "retrieve bm25"


def test_rerank_stage_in_the_gateway(client):
    r = client.post(
        "/rag",
        json={"topic": "compress a file with gzip", "trace": True, "pipeline": "bm25@20 | mmr:0.5@5 | extractive"},
    )
    assert r.status_code == 200, r.text
    trace = r.json()["trace"]
    assert [t["stage"] for t in trace] == ["bm25", "mmr:0.5@5", "extractive"]
    assert len(trace[1]["ranking"]) == 5 and set(trace[1]["ranking"]) <= set(trace[0]["ranking"])
    assert all(t["service_ms"] > 0 for t in trace)


@pytest.mark.parametrize(
    ("pipeline", "words"),
    [
        ("bm25@20 | rankzephyr@10 | extractive", "rankzephyr needs a vLLM endpoint: set RAGNAROK_RANKZEPHYR_URL"),
        ("bm25@20 | splade@10 | extractive", "unknown reranker (the name is not echoed)"),
    ],
)
def test_missing_components_are_named(client, pipeline, words):
    r = client.post("/rag", json={"topic": "gzip", "pipeline": pipeline})
    assert 400 <= r.status_code < 500, r.text
    assert words in str(r.json()["detail"])


def test_stage_failures_name_the_stage(demo_settings, tmp_path, client):
    from fakes import flaky_openai_app

    from ragnarok.stages.generate.base import GeneratorConfig

    r = client.post("/rag", json={"topic": "gzip", "pipeline": "rrf(bm25, dense:gte-l)@20 | extractive"})
    detail = r.json()["detail"]  # the R service has no such index (503): the gateway says which stage, and how
    assert r.status_code == 503 and detail["stage"] == "retrieve dense:gte-l", r.text
    assert "build it with `ragnarok index --dense gte-l" in detail["error"]

    with serve_app(flaky_openai_app()) as llm:
        settings = demo_settings.model_copy(
            update={
                "generators": [
                    GeneratorConfig(
                        name="down", backend="openai", base_url=f"{llm}/v1", model="down-500", max_retries=0
                    ),
                    GeneratorConfig(
                        name="slow", backend="openai", base_url=f"{llm}/v1", model="slow", timeout_s=0.5, max_retries=0
                    ),
                ]
            }
        )
        with TestClient(create_app(settings, arena=False)) as c:
            r = c.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | down"})
            assert r.status_code == 502 and r.json()["detail"]["stage"] == "generate down", r.text
            assert "HTTP 500" in r.json()["detail"]["error"]["message"]
            r = c.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | slow"})
            assert r.status_code == 504 and r.json()["detail"]["stage"] == "generate slow", r.text
    unreachable = Settings(data_dir=tmp_path, retrieval_url="http://127.0.0.1:9")
    with TestClient(create_app(unreachable, arena=False)) as c:
        r = c.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | extractive"})
        assert r.status_code == 502 and r.json()["detail"]["stage"] == "retrieve bm25", r.text
        # the internal URL is named, never shown
        assert "cannot reach <retrieval service>" in r.json()["detail"]["error"] and "127.0.0.1:9" not in r.text
