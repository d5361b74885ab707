"""Local stand-ins for services that cannot run here, speaking their documented HTTP shapes.

* ``cohere_app``: Cohere's chat API v2 (``POST /v2/chat`` with ``documents``): it answers with two sentences
  quoted from the first two documents and span-level citations (``start``, ``end``, ``text``, ``sources``).
  The faults below (by model name) are answered too, in Cohere's error shape ``{"message": ...}``.
* ``flaky_openai_app``: an OpenAI-compatible ``/v1/chat/completions`` whose behaviour the model name picks:
  ``ok``, ``flaky-429`` (429 twice, then an answer), ``down-500`` (always 500), ``slow`` (sleeps 3 s),
  ``fixed-200ms`` (answers after 200 ms), and the faults below. ``GET /hang/v1/models`` never answers. A request
with ``stream: true`` gets the same answer as chat completion chunks (Server-Sent Events: :func:`streamed`).

Faults, by model name (``NAME`` or ``NAME:ARG``; anything after a second ``:`` only makes the name unique, so
that a test has its own call count): ``retry-after:S`` (the first call: 429 with ``Retry-After: S``),
``retry-date:S`` (the same as an HTTP date), ``always-429:S`` (429 with ``Retry-After: S`` every time),
``hang`` (no answer until the client leaves; ``app.state.hanging[model]`` counts the requests waiting),
``drip:S`` (status and headers, then one byte of the body every S seconds), ``stall`` (half a body, then
nothing), ``invalid-json`` and ``html`` (a 200 whose body is not JSON), ``wrong-shape`` (JSON, not a chat
answer), ``empty`` (an answer with empty text), ``echo-key`` (401 whose message quotes the key it was sent),
``echo-key-500`` (500, plain text, quoting the key), ``echo-key-200`` (a chat answer quoting the key).
Each call's time is kept in ``app.state.times[model]``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from email.utils import formatdate

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse

#: The most any fault keeps a connection open (a client that never gives up still ends the test).
LONGEST_S = 60.0


async def until_disconnected(request: Request, limit_s: float = LONGEST_S) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end and not await request.is_disconnected():
        await asyncio.sleep(0.05)


def _key(request: Request) -> str:
    return request.headers.get("api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")


async def fault(
    app: FastAPI, model: str, request: Request, error: Callable[[str], dict], answer: dict
) -> Response | None:
    """The response of fault ``model`` (see the module's docstring), or None when the model is not one.
    ``error(message)`` is the API's error body; ``answer`` a well-formed answer, for the faults that corrupt one."""
    app.state.times[model].append(time.monotonic())
    calls = len(app.state.times[model])
    kind, _, rest = model.partition(":")
    arg = rest.partition(":")[0]
    if kind in ("retry-after", "retry-date", "always-429") and (calls == 1 or kind == "always-429"):
        seconds = float(arg or 1)
        after = formatdate(time.time() + seconds, usegmt=True) if kind == "retry-date" else f"{seconds:g}"
        return JSONResponse(error("rate limit reached, slow down"), status_code=429, headers={"retry-after": after})
    if kind == "hang":
        app.state.hanging[model] += 1
        try:
            await until_disconnected(request)
        finally:
            app.state.hanging[model] -= 1
        return JSONResponse(answer)
    if kind in ("drip", "stall"):
        interval, body = float(arg or 1), b'{"choices": [' + b" " * 4000 + b"]}"

        async def dribble() -> AsyncIterator[bytes]:
            end = time.monotonic() + LONGEST_S
            if kind == "stall":
                yield body[:20]
                await until_disconnected(request)
                return
            for i in range(len(body)):
                if time.monotonic() > end or await request.is_disconnected():
                    return
                yield body[i : i + 1]
                await asyncio.sleep(interval)

        return StreamingResponse(dribble(), media_type="application/json")
    if kind == "invalid-json":
        return Response('{"choices": [{"message": {"content": "unterminated', media_type="application/json")
    if kind == "html":
        return HTMLResponse(
            "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1>"
            "<p>The proxy could not reach the model.</p></body></html>"
        )
    if kind == "wrong-shape":
        return JSONResponse({"result": "hello", "status": "ok"})
    if kind == "empty":
        return JSONResponse(answer)
    if kind == "echo-key":
        return JSONResponse(error(f"Incorrect API key provided: {_key(request)}. Check your key."), status_code=401)
    if kind == "echo-key-500":
        return PlainTextResponse(f"upstream error: request with key={_key(request)} failed", status_code=500)
    return None


def streamed(model: str, text: str, usage: dict | None = None) -> StreamingResponse:
    """``text`` as an OpenAI-compatible streamed chat completion: a chunk per sentence, the finish reason, the
    usage, ``[DONE]``."""
    import json
    import re

    def chunk(delta: dict, finish: str | None = None, **extra: object) -> str:
        return (
            "data: "
            + json.dumps(
                {
                    "id": "chatcmpl-s",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    **extra,
                }
            )
            + "\n\n"
        )

    async def events() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        for piece in re.findall(r"[^.!?]*[.!?]?\s*", text):
            if piece:
                yield chunk({"content": piece})
        yield chunk({}, "stop")
        if usage is not None:
            yield (
                "data: "
                + json.dumps(
                    {
                        "id": "chatcmpl-s",
                        "object": "chat.completion.chunk",
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
                + "\n\n"
            )
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def cohere_app(api_key: str = "test-key") -> FastAPI:
    app = FastAPI()
    app.state.calls = Counter()
    app.state.times = defaultdict(list)
    app.state.hanging = Counter()
    app.state.bodies = []  # every chat request's JSON body, in order (what a generator sent)

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v2/chat")
    async def chat(request: Request) -> Response:
        body = await request.json()
        app.state.bodies.append(body)
        empty = {
            "id": "stub-0",
            "finish_reason": "COMPLETE",
            "message": {"role": "assistant", "content": [{"type": "text", "text": ""}], "citations": []},
        }
        if (found := await fault(app, body["model"], request, lambda m: {"message": m}, empty)) is not None:
            return found
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"message": "invalid api token"}, status_code=401)
        app.state.calls[body["model"]] += 1
        if body["model"] == "down-500":
            return JSONResponse({"message": "internal error"}, status_code=500)
        docs = body.get("documents") or []
        parts, citations, text = [], [], ""
        for doc in docs[:2]:
            snippet = doc["data"]["snippet"].split(". ")[0].rstrip(".")
            sentence = f"As documented, {snippet}."
            start = len(text) + len("As documented, ")
            citations.append(
                {
                    "start": start,
                    "end": start + len(snippet),
                    "text": snippet,
                    "type": "TEXT_CONTENT",
                    "sources": [{"type": "document", "id": doc["id"], "document": doc["data"]}],
                }
            )
            text += sentence + " "
            parts.append(sentence)
        text = text.strip() or "I found nothing."
        return JSONResponse(
            {
                "id": "stub-1",
                "finish_reason": "COMPLETE",
                "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "citations": citations},
                "usage": {
                    "billed_units": {"input_tokens": 10, "output_tokens": 20},
                    "tokens": {"input_tokens": 10, "output_tokens": 20},
                },
            }
        )

    return app


def flaky_openai_app() -> FastAPI:
    app = FastAPI()
    app.state.calls = Counter()
    app.state.times = defaultdict(list)
    app.state.hanging = Counter()
    app.state.in_flight = 0
    app.state.max_in_flight = 0
    app.state.bodies = []  # every chat request's JSON body, in order (what a generator sent)
    ids = itertools.count()

    def completion(model: str, text: str) -> dict:
        return {
            "id": f"chatcmpl-{next(ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
        }

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    app.state.probes = Counter()  # GET /v1/models and /hang/v1/models (apart from the chat calls)
    app.state.probes_in_flight = 0  # GET /hang/v1/models waiting now, and the most at once
    app.state.max_probes_in_flight = 0

    @app.get("/v1/models")
    def models() -> dict:
        app.state.probes["GET /v1/models"] += 1
        return {"object": "list", "data": [{"id": "ok", "object": "model", "owned_by": "test"}]}

    @app.get("/hang/v1/models")
    async def hanging_models(request: Request) -> dict:
        app.state.probes["GET /hang/v1/models"] += 1
        app.state.probes_in_flight += 1
        app.state.max_probes_in_flight = max(app.state.max_probes_in_flight, app.state.probes_in_flight)
        try:
            await until_disconnected(request)
        finally:
            app.state.probes_in_flight -= 1
        return {"object": "list", "data": []}

    @app.get("/stats")
    def stats() -> dict:
        return {"calls": dict(app.state.calls), "max_in_flight": app.state.max_in_flight}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        model = body["model"]
        app.state.calls[model] += 1
        app.state.bodies.append(body)

        def error(message: str) -> dict:
            return {"error": {"message": message, "type": "invalid_request_error"}}

        if (found := await fault(app, model, request, error, completion(model, ""))) is not None:
            return found

        def answer(text: str) -> Response:
            reply = completion(model, text)
            return streamed(model, text, reply["usage"]) if body.get("stream") else JSONResponse(reply)

        if model.partition(":")[0] == "echo-key-200":  # a 200 whose answer quotes the key it was sent
            return answer(f"Your key is {_key(request)} and it works [1].")
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
        return answer("Python parses arguments with argparse [1]. It can also compress files [2][1].")

    return app
