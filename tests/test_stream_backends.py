"""Streamed answers from each backend, against real servers on loopback ports speaking the
backends' documented stream shapes, and the real embedded SmolLM2: the events come in order (``references``,
``delta``s and ``sentence``s, ``done`` last), the sentences streamed are the final answer's, and ``done`` is the
answer the same request gives without streaming. A backend that fails mid-stream raises a GenerationError, the
first-token and stall deadlines raise a StreamDeadline naming them, and closing the stream stops the backend
(its HTTP stream, or the embedded model at its next token)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator

import anyio
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from servers import serve_app
from test_generate_backends import CANDIDATES, TOPIC  # the same three segments and topic

from ragnarok.core.meter import Meter, metering
from ragnarok.core.settings import Settings
from ragnarok.core.types import Candidate, Query, RagAnswer
from ragnarok.stages.generate.base import GenerationError, GeneratorConfig
from ragnarok.stages.generate.cohere_chat import CohereGenerator
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator
from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator
from ragnarok.stages.generate.prompts import get_template
from ragnarok.stages.generate.streaming import StreamDeadline, StreamEvent, sentence_texts

OPENAI_TEXT = (
    "Python parses arguments with argparse [1]. It can also compress files [2][1]. "
    "The getopt module is the older way [3]. That is all."
)


def pieces(text: str) -> list[str]:
    """``text`` as a model streams it: a word (and the space after it) at a time."""
    return re.findall(r"\S+\s*", text)


def sse(data: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


# --- an OpenAI-compatible server that streams (``stream: true``: chat completion chunks, then [DONE]) ---


def openai_stream_app() -> FastAPI:
    """The model name picks the behaviour: ``ok``; ``break`` (three chunks, then the connection breaks);
    ``garbage`` (three chunks, then an event that is not JSON); ``wrong-shape`` (an event that is no chunk);
    ``slow-first:S`` (S seconds before the first chunk); ``stall:S`` (three chunks, then S seconds);
    ``drip`` (200 chunks, one every 50 ms, counted in ``app.state.sent``)."""
    app = FastAPI()
    app.state.sent = Counter()

    def chunk(model: str, delta: dict, finish: str | None = None) -> dict:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        model = body["model"]
        kind, _, arg = model.partition(":")
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": OPENAI_TEXT}}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40},
                }
            )

        async def events() -> AsyncIterator[bytes]:
            if kind == "slow-first":
                await asyncio.sleep(float(arg))
            yield sse(chunk(model, {"role": "assistant", "content": ""}))
            if kind == "drip":
                for i in range(200):
                    yield sse(chunk(model, {"content": f"Word{i} "}))
                    app.state.sent[model] += 1
                    await asyncio.sleep(0.05)
                return
            for i, piece in enumerate(pieces(OPENAI_TEXT)):
                if i == 3:
                    if kind == "break":
                        raise RuntimeError("the backend fell over mid-stream")
                    if kind == "garbage":
                        yield b"data: {this is not json\n\n"
                    if kind == "wrong-shape":
                        yield sse({"choices": "nope"})
                    if kind == "stall":
                        await asyncio.sleep(float(arg))
                yield sse(chunk(model, {"content": piece}))
            yield sse(chunk(model, {}, "stop"))
            yield sse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": model,
                    "choices": [],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40},
                }
            )
            yield sse("[DONE]")

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


# --- a server in Cohere's documented chat v2 shape, streamed or not ---


def cohere_answer(docs: list[dict]) -> tuple[str, list[dict]]:
    """The scripted answer: a sentence quoting each of the first two documents (span citations, the second
    also citing the first document), then one that cites nothing."""
    text, citations = "", []
    for i, doc in enumerate(docs[:2]):
        snippet = doc["data"]["snippet"].split(". ")[0].rstrip(".")
        lead = "As documented, " if i == 0 else "Also, "
        start = len(text) + len(lead)
        sources = [{"type": "document", "id": doc["id"], "document": doc["data"]}]
        if i == 1:
            sources.append({"type": "document", "id": docs[0]["id"], "document": docs[0]["data"]})
        citations.append(
            {"start": start, "end": start + len(snippet), "text": snippet, "type": "TEXT_CONTENT", "sources": sources}
        )
        text += f"{lead}{snippet}. "
    return text + "That is what the documents say.", citations


def cohere_stream_app(api_key: str = "test-key") -> FastAPI:
    """``POST /v2/chat``; with ``stream: true`` the documented events. The model name picks how: ``fast``
    (each citation right after its span's text), ``accurate`` (every citation after the whole text), ``break``
    (three deltas, then the connection breaks), ``no-end`` (the stream ends without ``message-end``),
    ``slow-first:S`` (S seconds before the first delta)."""
    app = FastAPI()
    app.state.bodies = defaultdict(list)

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v2/chat")
    async def chat(request: Request) -> Response:
        body = await request.json()
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"message": "invalid api token"}, status_code=401)
        model = body["model"]
        kind, _, arg = model.partition(":")
        app.state.bodies[model].append(body)
        text, citations = cohere_answer(body.get("documents") or [])
        usage = {
            "billed_units": {"input_tokens": 11, "output_tokens": 22},
            "tokens": {"input_tokens": 111, "output_tokens": 22},
        }
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "c-1",
                    "finish_reason": "COMPLETE",
                    "usage": usage,
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": text}],
                        "citations": citations,
                    },
                }
            )

        def citation(i: int, c: dict) -> list[bytes]:
            return [
                sse({"type": "citation-start", "index": i, "delta": {"message": {"citations": c}}}, "citation-start"),
                sse({"type": "citation-end", "index": i}, "citation-end"),
            ]

        async def events() -> AsyncIterator[bytes]:
            yield sse(
                {
                    "type": "message-start",
                    "id": "c-1",
                    "delta": {
                        "message": {
                            "role": "assistant",
                            "content": [],
                            "tool_plan": "",
                            "tool_calls": [],
                            "citations": [],
                        }
                    },
                },
                "message-start",
            )
            yield sse(
                {"type": "content-start", "index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
                "content-start",
            )
            if kind == "slow-first":
                await asyncio.sleep(float(arg))
            written, cited = "", 0
            for i, piece in enumerate(pieces(text)):
                if kind == "break" and i == 3:
                    raise RuntimeError("the backend fell over mid-stream")
                yield sse(
                    {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": piece}}}},
                    "content-delta",
                )
                written += piece
                while kind != "accurate" and cited < len(citations) and citations[cited]["end"] <= len(written):
                    for event in citation(cited, citations[cited]):
                        yield event
                    cited += 1
            for i in range(cited, len(citations)):
                for event in citation(i, citations[i]):
                    yield event
            yield sse({"type": "content-end", "index": 0}, "content-end")
            if kind == "no-end":
                return
            yield sse({"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": usage}}, "message-end")

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


# --- helpers ---


def collect(stream: AsyncIterator[StreamEvent], meter: Meter | None = None) -> list[StreamEvent]:
    """Every event of a stream (failures raised), with ``meter`` as the request's."""

    async def run() -> list[StreamEvent]:
        with metering(meter or Meter()):
            return [event async for event in stream]

    return anyio.run(run)


def failure(stream: AsyncIterator[StreamEvent]) -> tuple[list[StreamEvent], BaseException]:
    """The events a stream gave before it failed, and its failure."""
    got: list[StreamEvent] = []

    async def run() -> BaseException:
        try:
            async for event in stream:
                got.append(event)
        except Exception as exc:  # noqa: BLE001 - returned to the test
            return exc
        raise AssertionError(f"the stream did not fail: {got}")

    return got, anyio.run(run)


def assert_streamed(events: list[StreamEvent], answer: RagAnswer, candidates: list[Candidate]) -> None:
    """In order: references (the candidates), deltas and sentences, done last with ``answer``; the sentences
    streamed are the answer's, once each, in order, with the segment ids of their citations."""
    names = [e.event for e in events]
    assert names[0] == "references" and names[-1] == "done", names
    assert set(names[1:-1]) <= {"delta", "sentence"} and "delta" in names, names
    assert events[0].data == {"docids": [c.docid for c in candidates]}
    done = events[-1].data
    assert done.model_dump() == answer.model_dump()
    assert sentence_texts(events) == [(s.text, s.citations) for s in done.answer]
    streamed = [e.data for e in events if e.event == "sentence"]
    assert [s["index"] for s in streamed] == list(range(len(done.answer)))
    assert all(s["docids"] == [done.references[i] for i in s["citations"]] for s in streamed)


# --- OpenAI-compatible ---


@pytest.fixture(scope="module")
def openai_server():
    app = openai_stream_app()
    with serve_app(app) as base:
        yield app, base + "/v1"


def _openai(base: str, model: str, **kw) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(
        GeneratorConfig(name=f"stream-{model}", backend="openai", base_url=base, model=model, max_retries=0, **kw)
    )


def test_openai_stream_is_the_answer_without_streaming(openai_server):
    _, base = openai_server
    gen = _openai(base, "ok")
    meter = Meter()
    events = collect(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")), meter)
    answer = gen.generate(TOPIC, CANDIDATES, get_template("ragnarok"))
    assert_streamed(events, answer, CANDIDATES)
    assert "".join(e.data["text"] for e in events if e.event == "delta") == OPENAI_TEXT
    assert len(answer.answer) == 4 and answer.references == [
        "stdlib.argparse#0_0",
        "stdlib.gzip#0_0",
        "stdlib.getopt#0_0",
    ]
    first_sentence = next(i for i, e in enumerate(events) if e.event == "sentence")
    last_delta = max(i for i, e in enumerate(events) if e.event == "delta")
    assert first_sentence < last_delta  # sentences come as they are written, not all at the end
    assert (meter.calls, meter.prompt_tokens, meter.completion_tokens) == (1, 10, 30)


@pytest.mark.parametrize(
    "model, cause",
    [("break", "the connection to"), ("garbage", "not JSON"), ("wrong-shape", "not a chat completion chunk")],
)
def test_openai_failure_mid_stream_is_a_generation_error(openai_server, model, cause):
    gen = _openai(openai_server[1], model)
    got, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, GenerationError) and not isinstance(exc, StreamDeadline), exc
    assert cause in exc.cause and exc.generator == f"stream-{model}"
    assert [e.event for e in got][:2] == ["references", "delta"]  # it had started
    assert gen.guard._slots.acquire(blocking=False)  # the slot is free again
    gen.guard._slots.release()


def test_openai_first_token_deadline(openai_server):
    gen = _openai(openai_server[1], "slow-first:5", first_token_s=0.5)
    start = time.monotonic()
    got, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, StreamDeadline) and exc.deadline == "first_token" and exc.timeout, exc
    assert "no first token within 0.5 s" in exc.cause
    assert time.monotonic() - start < 3
    assert [e.event for e in got] == ["references"]


def test_openai_stall_deadline(openai_server):
    gen = _openai(openai_server[1], "stall:5", stall_s=0.5)
    start = time.monotonic()
    got, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, StreamDeadline) and exc.deadline == "stall", exc
    assert time.monotonic() - start < 3
    assert "delta" in [e.event for e in got]


def test_openai_total_deadline(openai_server):
    gen = _openai(openai_server[1], "drip:total", timeout_s=1.0)
    _, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, StreamDeadline) and exc.deadline == "total", exc


def test_closing_the_stream_stops_the_backend(openai_server):
    """A client that goes away: the stream is closed, and the server notices and stops sending within 1 s."""
    app, base = openai_server
    model = "drip:close"
    gen = _openai(base, model)

    async def run() -> tuple[int, float]:
        stream = gen.astream(TOPIC, CANDIDATES, get_template("ragnarok"))
        deltas = 0
        async for event in stream:
            deltas += event.event == "delta"
            if deltas == 3:
                break
        start = time.monotonic()
        await stream.aclose()
        return app.state.sent[model], time.monotonic() - start

    at_close, took = anyio.run(run)
    assert took < 1 and 3 <= at_close < 20
    time.sleep(1.0)
    settled = app.state.sent[model]
    time.sleep(0.5)
    assert app.state.sent[model] == settled <= at_close + 20  # it stopped (after a few in flight), far from 200
    assert gen.guard._slots.acquire(blocking=False)
    gen.guard._slots.release()


# --- Cohere ---


@pytest.fixture(scope="module")
def cohere_server():
    app = cohere_stream_app()
    with serve_app(app) as base:
        yield app, base


def _cohere(base: str, model: str, monkeypatch, **kw) -> CohereGenerator:
    monkeypatch.setenv("COHERE_STREAM_KEY", "test-key")
    return CohereGenerator(
        GeneratorConfig(
            name=f"cohere-{model}",
            backend="cohere",
            model=model,
            base_url=base,
            api_key_env="COHERE_STREAM_KEY",
            max_retries=0,
            **kw,
        )
    )


@pytest.mark.parametrize("model", ["fast", "accurate"])
def test_cohere_stream_is_the_answer_without_streaming(cohere_server, monkeypatch, model):
    """Span citations that come after their text, or after all of it (``accurate``): either way each streamed
    sentence has every citation the answer gives it."""
    app, base = cohere_server
    gen = _cohere(base, model, monkeypatch)
    meter = Meter()
    events = collect(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")), meter)
    answer = gen.generate(TOPIC, CANDIDATES, get_template("ragnarok"))
    assert_streamed(events, answer, CANDIDATES)
    assert [s.citations for s in answer.answer] == [[0], [1, 0], []]
    assert answer.references == ["stdlib.argparse#0_0", "stdlib.gzip#0_0"]
    streamed, plain = app.state.bodies[model]
    assert streamed.pop("stream") is True and streamed == plain  # the same call, streamed
    assert (meter.calls, meter.prompt_tokens, meter.completion_tokens) == (1, 111, 22)
    if model == "fast":  # sentences come as their citations do, before the text ends
        first_sentence = next(i for i, e in enumerate(events) if e.event == "sentence")
        assert first_sentence < max(i for i, e in enumerate(events) if e.event == "delta")


def test_cohere_failure_mid_stream_is_a_generation_error(cohere_server, monkeypatch):
    gen = _cohere(cohere_server[1], "break", monkeypatch)
    got, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, GenerationError) and "the connection to" in exc.cause, exc
    assert "delta" in [e.event for e in got]


def test_cohere_stream_without_its_end_is_a_generation_error(cohere_server, monkeypatch):
    gen = _cohere(cohere_server[1], "no-end", monkeypatch)
    _, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, GenerationError) and "message-end" in exc.cause, exc


def test_cohere_first_token_deadline(cohere_server, monkeypatch):
    gen = _cohere(cohere_server[1], "slow-first:5", monkeypatch, first_token_s=0.5)
    start = time.monotonic()
    _, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, StreamDeadline) and exc.deadline == "first_token", exc
    assert time.monotonic() - start < 3


def test_cohere_stream_with_a_wrong_key(cohere_server, monkeypatch):
    gen = _cohere(cohere_server[1], "fast", monkeypatch)
    monkeypatch.setenv("COHERE_STREAM_KEY", "wrong")
    _, exc = failure(gen.astream(TOPIC, CANDIDATES, get_template("ragnarok")))
    assert isinstance(exc, GenerationError) and "HTTP 401" in exc.cause, exc


# --- the embedded model (the real SmolLM2, as tests/test_generate_backends.py) ---


@pytest.fixture(scope="module")
def smollm2():
    config = Settings().generator_configs()["smollm2"].model_copy(update={"timeout_s": 900})  # a busy machine
    gen = LlamaCppGenerator(config)
    assert gen.availability() is None
    return gen


TIMINGS = {"first_token_ms", "generate_ms"}


def test_the_embedded_model_answers_a_prompt_alike_whatever_it_answered_before(smollm2):
    """The same prompt twice in a row (the second time llama.cpp held it whole in its cache) and
    after another prompt gets the same answer: the stream below compares with the answer without streaming,
    which used to differ (57 words and 73) whatever the machine's load, by the cache it found."""
    template = get_template(smollm2.config.template or "small")
    other = Query(text="compress a file with gzip", qid="demo-02")
    first, again = smollm2.generate(TOPIC, CANDIDATES, template), smollm2.generate(TOPIC, CANDIDATES, template)
    smollm2.generate(other, CANDIDATES[::-1], template)
    after = smollm2.generate(TOPIC, CANDIDATES, template)
    assert first.model_dump() == again.model_dump() == after.model_dump()
    assert first.notes["completion_tokens"] == again.notes["completion_tokens"] == after.notes["completion_tokens"]


def test_embedded_stream_is_the_answer_without_streaming(smollm2):
    template = get_template(smollm2.config.template or "small")
    meter = Meter()
    events = collect(smollm2.astream(TOPIC, CANDIDATES, template), meter)
    answer = smollm2.generate(TOPIC, CANDIDATES, template)
    assert_streamed(events, answer, CANDIDATES[: smollm2.config.max_contexts])
    done = events[-1].data
    assert {k: v for k, v in done.notes.items() if k not in TIMINGS} == {
        k: v for k, v in answer.notes.items() if k not in TIMINGS
    }
    assert TIMINGS <= set(done.notes) and done.notes["stop"] in ("end", "words", "repeat", "max_tokens")
    assert meter.calls == 1 and meter.prompt_tokens > 0
    assert meter.completion_tokens == done.notes["completion_tokens"] > 0


def test_closing_the_embedded_stream_stops_the_model(smollm2, monkeypatch):
    """Closed after three pieces: the model stops at the token it is writing, and its one slot is free."""
    monkeypatch.setattr("ragnarok.stages.generate.streaming.secrets", list)  # no text held back: a delta a token
    template = get_template(smollm2.config.template or "small")
    meter = Meter()

    async def run() -> float:
        with metering(meter):
            stream = smollm2.astream(TOPIC, CANDIDATES, template)
            deltas = 0
            async for event in stream:
                deltas += event.event == "delta"
                if deltas == 3:
                    break
            start = time.monotonic()
            await stream.aclose()
            return time.monotonic() - start

    assert anyio.run(run) < 1
    assert 3 <= meter.completion_tokens <= 4  # the tokens streamed, and at most the one being written
    assert smollm2.guard._slots.acquire(blocking=False)
    smollm2.guard._slots.release()
