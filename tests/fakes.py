"""Local stand-ins for services that cannot run here, speaking their documented HTTP shapes.

* ``cohere_app``: Cohere's chat API v2 (``POST /v2/chat`` with ``documents``): it answers with two sentences
  quoted from the first two documents and span-level citations (``start``, ``end``, ``text``, ``sources``).
* ``flaky_openai_app``: an OpenAI-compatible ``/v1/chat/completions`` whose behaviour the model name picks:
  ``ok``, ``flaky-429`` (429 twice, then an answer), ``down-500`` (always 500), ``slow`` (sleeps 3 s),
  ``fixed-200ms`` (answers after 200 ms).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def cohere_app(api_key: str = "test-key") -> FastAPI:
    app = FastAPI()
    app.state.calls = Counter()

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v2/chat")
    async def chat(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"message": "invalid api token"}, status_code=401)
        body = await request.json()
        app.state.calls[body["model"]] += 1
        if body["model"] == "down-500":
            return JSONResponse({"message": "internal error"}, status_code=500)
        docs = body.get("documents") or []
        parts, citations, text = [], [], ""
        for doc in docs[:2]:
            snippet = doc["data"]["snippet"].split(". ")[0].rstrip(".")
            sentence = f"As documented, {snippet}."
            start = len(text) + len("As documented, ")
            citations.append({"start": start, "end": start + len(snippet), "text": snippet, "type": "TEXT_CONTENT",
                              "sources": [{"type": "document", "id": doc["id"], "document": doc["data"]}]})
            text += sentence + " "
            parts.append(sentence)
        text = text.strip() or "I found nothing."
        return JSONResponse({
            "id": "stub-1", "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "citations": citations},
            "usage": {"billed_units": {"input_tokens": 10, "output_tokens": 20}, "tokens": {"input_tokens": 10,
                                                                                          "output_tokens": 20}},
        })

    return app


def flaky_openai_app() -> FastAPI:
    app = FastAPI()
    app.state.calls = Counter()
    app.state.in_flight = 0
    app.state.max_in_flight = 0
    ids = itertools.count()

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": "ok", "object": "model", "owned_by": "test"}]}

    @app.get("/stats")
    def stats() -> dict:
        return {"calls": dict(app.state.calls), "max_in_flight": app.state.max_in_flight}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        model = body["model"]
        app.state.calls[model] += 1
        if model == "down-500":
            return JSONResponse({"error": {"message": "backend exploded", "type": "server_error"}}, status_code=500)
        if model == "flaky-429" and app.state.calls[model] <= 2:
            return JSONResponse({"error": {"message": "slow down", "type": "rate_limit"}}, status_code=429)
        if model == "slow":
            await asyncio.sleep(3)
        if model == "fixed-200ms":
            app.state.in_flight += 1
            app.state.max_in_flight = max(app.state.max_in_flight, app.state.in_flight)
            await asyncio.sleep(0.2)
            app.state.in_flight -= 1
        text = "Python parses arguments with argparse [1]. It can also compress files [2][1]."
        return JSONResponse({
            "id": f"chatcmpl-{next(ids)}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
        })

    return app
