"""A small model's loop, end to end: an OpenAI-compatible server that answers as SmolLM2 was seen to answer (one
sentence nineteen times, no citation, cut mid-sentence) behind a generator with the small-model settings. The
answer keeps one sentence, cited after the fact, and /rag's trace says so; the settings reach the server."""

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from servers import serve_app

from api.main import create_app
from ragnarok.core.settings import Settings
from ragnarok.stages.generate.base import GeneratorConfig

LOOP = "The answer is to compress a file with gzip using the gzip module. " * 19 + "The answer is to"


def looping_llm_app(seen: list[dict]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        body = await request.json()
        seen.append(body)
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": LOOP}}],
        }

    return app


@pytest.fixture(scope="module")
def looping(demo_settings):
    seen: list[dict] = []
    with serve_app(looping_llm_app(seen)) as base:
        small = GeneratorConfig(
            name="looper",
            backend="openai",
            base_url=base + "/v1",
            model="loop",
            template="small",
            max_contexts=5,
            max_answer_words=60,
            repeat_penalty=1.1,
            attribution="check",
            max_retries=0,
        )
        settings = Settings(data_dir=demo_settings.data_dir, generators=[small])
        with TestClient(create_app(settings)) as client:
            yield client, seen


def test_the_loop_becomes_one_cited_sentence_and_the_trace_says_how(looping):
    client, seen = looping
    r = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": "bm25@20 | looper", "trace": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [s["text"] for s in body["answer"]] == ["The answer is to compress a file with gzip using the gzip module."]
    assert body["answer"][0]["citations"] == [0] and "gzip" in body["references"][0]
    detail = body["trace"][-1]["detail"]
    assert detail["repeats_dropped"] == 18 and detail["citations_attributed"] == 1
    assert detail["citations"] == "attributed" and detail["contexts"] == 5
    sent = seen[-1]
    assert sent["repeat_penalty"] == 1.1 and sent["max_tokens"] == 1024
    user = sent["messages"][1]["content"]
    assert "at most 60 words" in user and "[5]" in user and "[6]" not in user  # the small template, 5 contexts


def test_notes_only_when_asked_and_never_in_the_trec_answer(looping):
    client, _ = looping
    request = client.post("/v1/retrieve", json={"query": "compress a file with gzip", "k": 5}).json()
    plain = client.post("/v1/generate", json={"request": request, "generator": "looper"}).json()
    assert list(plain) == ["topic_id", "topic", "references", "response_length", "answer"]
    noted = client.post("/v1/generate", json={"request": request, "generator": "looper", "notes": True}).json()
    assert noted["notes"]["repeats_dropped"] == 18
    extractive = client.post("/v1/generate", json={"request": request, "notes": True}).json()
    assert extractive["notes"]["citations"] == "produced" and extractive["response_length"] <= 150
