"""A scripted OpenAI-compatible chat server for arena tests: the model name sets how long it takes.

``POST /v1/chat/completions`` with model ``sleep:S`` answers after S seconds (``fast`` at once) with two
sentences citing the first two contexts, ``[1]`` and ``[2]``; ``GET /v1/models`` lists ``sleep`` and ``fast``.
It stands in for a slow self-hosted LLM (llama.cpp on a busy machine) so a test controls the latency.
With ``stream: true`` the same answer comes as chat completion chunks once the wait is over
(:func:`fakes.streamed`).
"""

from __future__ import annotations

import asyncio

from fakes import streamed
from fastapi import FastAPI, Request


def scripted_llm_app() -> FastAPI:
    app = FastAPI()
    app.state.requests = 0  # chat completions asked for so far (counted as each arrives)

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"} for m in ("sleep", "fast")]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):  # type: ignore[no-untyped-def]
        body = await request.json()
        app.state.requests += 1
        model = str(body.get("model", ""))
        kind, _, arg = model.partition(":")
        if kind == "sleep":
            await asyncio.sleep(min(float(arg or 1), 60.0))
        text = (
            "The gzip module compresses and decompresses files [1]. "
            "Open the file with gzip.open to write compressed data [2]."
        )
        if body.get("stream"):
            return streamed(model, text, {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
        }

    return app
