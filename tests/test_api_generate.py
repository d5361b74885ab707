"""The AG service over HTTP: the standardized answer, generator listing, and every bad input."""

import json

import pytest
from fakes import flaky_openai_app
from fastapi.testclient import TestClient
from servers import serve_app
from test_generate_backends import CANDIDATES, TOPIC

from api.main import create_app
from ragnarok.core.settings import Settings
from ragnarok.stages.generate.base import GeneratorConfig
from ragnarok.stages.generate.cite import NO_ANSWER_TEXT

REQUEST = {
    "query": {"text": TOPIC.text, "qid": TOPIC.qid},
    "candidates": [c.model_dump(mode="json", exclude_none=True) for c in CANDIDATES],
}


@pytest.fixture(scope="module")
def flaky_base():
    with serve_app(flaky_openai_app()) as base:
        yield base + "/v1"


@pytest.fixture
def client(tmp_path, flaky_base):
    settings = Settings(
        data_dir=tmp_path,
        generators=[
            GeneratorConfig(name="broken", backend="openai", base_url=flaky_base, model="down-500", max_retries=0),
            GeneratorConfig(
                name="slow", backend="openai", base_url=flaky_base, model="slow", timeout_s=0.5, max_retries=0
            ),
            GeneratorConfig(name="offline", backend="openai", base_url="http://127.0.0.1:9/v1", model="x"),
        ],
    )
    with TestClient(create_app(settings)) as c:
        yield c


def test_generate_returns_the_trec_rag_answer(client):
    r = client.post("/v1/generate", json={"request": REQUEST, "generator": "extractive", "k": 20})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["topic_id", "topic", "references", "response_length", "answer"]
    assert body["topic_id"] == "demo-01" and body["topic"] == TOPIC.text
    assert body["references"] and all(isinstance(i, int) for s in body["answer"] for i in s["citations"])
    assert body["response_length"] == sum(len(s["text"].split()) for s in body["answer"])


def test_topic_overrides_and_k_limits_the_context(client):
    r = client.post("/v1/generate", json={"request": REQUEST, "topic": "compress a file", "topic_id": "t9", "k": 1})
    body = r.json()
    assert (body["topic_id"], body["topic"]) == ("t9", "compress a file")
    assert set(body["references"]) <= {"stdlib.argparse#0_0"}


def test_no_candidates_answers_that_the_context_lacks_it(client):
    r = client.post("/v1/generate", json={"request": {"query": {"text": "what is x", "qid": "1"}, "candidates": []}})
    assert r.status_code == 200
    assert r.json()["answer"] == [{"text": NO_ANSWER_TEXT, "citations": []}] and r.json()["references"] == []


def test_generators_say_what_is_available_and_why_not(client):
    listed = {g["name"]: g for g in client.get("/v1/generators").json()}
    assert listed["extractive"]["available"] and listed["smollm2"]["available"]
    assert listed["gpt-4o"]["reason"] == "OPENAI_API_KEY is not set"
    assert listed["command-r-plus"]["reason"] == "COHERE_API_KEY is not set"
    assert not listed["offline"]["available"] and "not reachable" in listed["offline"]["reason"]
    names = {t["name"] for t in client.get("/v1/templates").json()}
    assert {"chatqa", "ragnarok", "biogen", "report"} <= names


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"request": REQUEST, "generator": "gpt-5"}, 404, "unknown generator (the name is not echoed)"),
        ({"request": REQUEST, "template": "haiku"}, 404, "unknown prompt template (the name is not echoed)"),
        ({"request": REQUEST, "k": 0}, 422, "k must be"),
        ({"request": REQUEST, "k": 101}, 422, "k must be"),
        ({"request": REQUEST, "topic": "   "}, 422, "topic is empty"),
        ({"request": REQUEST, "topic": "x" * 5000}, 413, "limit"),
        ({"topic": "no request"}, 422, "request"),
        ({"request": {"query": {"text": "q"}, "candidates": [{"docid": "d", "score": 1.0}] * 1001}}, 413, "candidates"),
        (
            {
                "request": {
                    "query": {"text": "q"},
                    "candidates": [{"docid": "d", "score": 1, "doc": {"segment": "a" * 100_001}}],
                }
            },
            413,
            "characters",
        ),
        ({"request": REQUEST, "generator": "gpt-4o"}, 422, "OPENAI_API_KEY is not set"),
    ],
)
def test_bad_input(client, body, status, words):
    r = client.post("/v1/generate", json=body)
    assert r.status_code == status, r.text[:300]
    assert words in json.dumps(r.json())


def test_body_over_the_limit_is_refused_before_parsing(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path, max_body_bytes=1000))) as c:
        r = c.post("/v1/generate", content=b"{" + b" " * 2000 + b"}", headers={"content-type": "application/json"})
        assert r.status_code == 413


def test_backend_failures_are_502_and_504_naming_the_backend(client):
    r = client.post("/v1/generate", json={"request": REQUEST, "generator": "broken"})
    assert r.status_code == 502
    assert r.json()["detail"]["generator"] == "broken" and "HTTP 500" in r.json()["detail"]["error"]
    r = client.post("/v1/generate", json={"request": REQUEST, "generator": "slow"})
    assert r.status_code == 504 and r.json()["detail"]["generator"] == "slow"
    r = client.post("/v1/generate", json={"request": REQUEST, "generator": "offline"})
    assert r.status_code == 502 and "cannot reach" in r.json()["detail"]["error"]
