"""The defects found from outside, on a real uvicorn where it matters.

* A backend whose JSON holds a lone surrogate is a 502 naming the generator, not a 500, on ``/v1/generate``,
  ``/v1/write`` and ``/rag`` (the fake backend is served for real).
* A generator with ``max_concurrency`` 64 that hangs leaves the other generators and ``/healthz`` their
  throughput: each backend's calls hold threads of its own, never anyio's default 40 (measured on a real
  uvicorn, with and without the hang, in the same test).
* ``ragnarok serve`` answers the requests still in flight when SIGTERM's grace ends with the JSON 503.
* Input is taken as the JSON type it is, ids are bounded, index names are not empty, specs take ASCII digits
  only, and the R service searches NFKC-normalised text.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.testclient import TestClient
from servers import ragnarok_serve, serve_app

from api.errors import ErrorOut
from api.main import create_app
from api.shutdown import ShutdownAnswer
from ragnarok.core.spec import SpecError, parse
from ragnarok.core.spec_mapping import from_mapping
from ragnarok.runtime.cancel import CancelToken, InFlight, run_watched
from ragnarok.stages.generate.base import MAX_BACKEND_THREADS, GeneratorConfig, Guard, guard_of

CANDIDATES = [
    {"docid": f"d{i}", "score": 1.0 - i / 10, "doc": {"segment": f"gzip compresses files, part {i}."}} for i in range(3)
]
REQUEST = {"query": {"text": "gzip", "qid": "1"}, "candidates": CANDIDATES}
ANSWER = {
    "topic_id": "1",
    "topic": "gzip",
    "references": ["d0"],
    "answer": [{"text": "gzip compresses files.", "citations": [0]}],
}

# what the surrogate backend answers, by model name: the JSON text of a chat completion's content
CONTENT = {
    "escaped": rb'"Python parses arguments \ud800 with argparse [1]."',  # a lone high surrogate, escaped
    "low": rb'"a lone low surrogate \udfff here [1]."',
    "raw": b'"a surrogate encoded as UTF-8 \xed\xa0\x80 [1]."',  # invalid UTF-8 that json.loads lets through
    "pair": rb'"an emoji as a valid pair \ud83d\ude00 cites [1]."',  # not lone: a valid answer
}


def surrogate_app() -> FastAPI:
    """An OpenAI-compatible backend whose answers hold lone surrogates (the model name picks which)."""
    app = FastAPI()
    app.state.calls = Counter()

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        model = (await request.json())["model"]
        app.state.calls[model] += 1
        body = (
            b'{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [{"index": 0, '
            b'"finish_reason": "stop", "message": {"role": "assistant", "content": ' + CONTENT[model] + b"}}]}"
        )
        return Response(body, media_type="application/json")

    return app


def error(r: httpx.Response, status: int) -> object:
    """The ``detail`` of an error response: ``status``, JSON of the one error schema, short."""
    assert r.status_code == status, r.text[:2000]
    assert r.headers["content-type"].startswith("application/json"), r.text[:200]
    ErrorOut.model_validate(r.json())
    assert len(r.content) < 2_000, f"an error body of {len(r.content):,} bytes"
    return r.json()["detail"]


@pytest.fixture(scope="module")
def backend():
    app = surrogate_app()
    with serve_app(app) as base:
        yield app, base


@pytest.fixture(scope="module")
def client(demo_settings, backend):
    generators = [
        GeneratorConfig(
            name=f"s-{model}", backend="openai", base_url=backend[1] + "/v1", model=model, max_retries=2, timeout_s=10
        )
        for model in CONTENT
    ]
    settings = demo_settings.model_copy(update={"generators": generators})
    with TestClient(create_app(settings, arena=False), raise_server_exceptions=False) as c:
        yield c


# --- a lone surrogate from a backend: 502 naming the generator ------------------------------------------------


@pytest.mark.parametrize("model", ["escaped", "low", "raw"])
def test_a_lone_surrogate_from_a_backend_is_a_502_naming_it(client, backend, model):
    name = f"s-{model}"
    before = backend[0].state.calls[model]
    detail = error(client.post("/v1/generate", json={"request": REQUEST, "generator": name}), 502)
    assert detail["generator"] == name
    assert "not valid Unicode text: a lone surrogate in choices.0.message.content" in detail["error"], detail
    assert backend[0].state.calls[model] == before + 1  # not retried: the same model would answer the same

    detail = error(client.post("/v1/write", json={"task": "hyde", "generator": name, "query": "gzip"}), 502)
    assert detail["generator"] == name and "lone surrogate" in detail["error"], detail

    r = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": f"bm25@5 | {name}"})
    detail = error(r, 502)
    assert detail["stage"] == f"generate {name}" and "lone surrogate" in json.dumps(detail), detail


def test_a_valid_surrogate_pair_is_an_answer(client):
    r = client.post("/v1/generate", json={"request": REQUEST, "generator": "s-pair"})
    assert r.status_code == 200, r.text
    assert "\U0001f600" in json.dumps(r.json(), ensure_ascii=False)


# --- strict types, bounded ids, named indexes --------------------------------------------------------------------


def loc_of(detail: object) -> list[list]:
    assert isinstance(detail, list), detail
    return [item["loc"] for item in detail]


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/retrieve", {"query": "gzip", "qid": True}, ["body", "qid"]),
        ("/v1/retrieve", {"query": "gzip", "qid": 1.5}, ["body", "qid"]),
        ("/v1/retrieve", {"query": "gzip", "k": "5"}, ["body", "k"]),
        ("/v1/retrieve", {"query": "gzip", "k": True}, ["body", "k"]),
        ("/v1/rerank", {"request": REQUEST, "reranker": "mmr", "k": "2"}, ["body", "k"]),
        ("/v1/generate", {"request": REQUEST, "k": "5"}, ["body", "k"]),
        ("/v1/generate", {"request": REQUEST, "notes": "yes"}, ["body", "notes"]),
        (
            "/v1/generate",
            {"request": {**REQUEST, "query": {"text": "gzip", "qid": True}}},
            ["body", "request", "query", "qid"],
        ),
        (
            "/v1/generate",
            {"request": {**REQUEST, "candidates": [{**CANDIDATES[0], "score": True}]}},
            ["body", "request", "candidates", 0, "score"],
        ),
        (
            "/v1/generate",
            {"request": {**REQUEST, "candidates": [{**CANDIDATES[0], "score": "0.5"}]}},
            ["body", "request", "candidates", 0, "score"],
        ),
        (
            "/v1/generate",
            {"request": {**REQUEST, "candidates": [{**CANDIDATES[0], "doc": {"start_char": "3"}}]}},
            ["body", "request", "candidates", 0, "doc", "start_char"],
        ),
        ("/rag", {"topic": "gzip", "trace": "true"}, ["body", "trace"]),
        ("/rag", {"topic": "gzip", "segments": 1}, ["body", "segments"]),
        ("/v1/write", {"task": "multiquery", "generator": "g", "query": "gzip", "n": "2"}, ["body", "n"]),
        ("/v1/evaluate", {"answer": ANSWER, "gold_answers": ["x"], "geval": "false"}, ["body", "geval"]),
        (
            "/v1/evaluate",
            {"answer": {**ANSWER, "answer": [{"text": "t", "citations": [True]}]}, "gold_answers": ["x"]},
            ["body", "answer", "answer", 0, "citations", 0],
        ),
        (
            "/v1/evaluate",
            {"answer": {**ANSWER, "response_length": "3"}, "gold_answers": ["x"]},
            ["body", "answer", "response_length"],
        ),
    ],
)
def test_no_bool_or_string_is_coerced(client, path, body, loc):
    assert loc in loc_of(error(client.post(path, json=body), 422))


def test_integers_stay_numbers_where_a_float_is_expected(client):
    r = client.post("/v1/generate", json={"request": {**REQUEST, "candidates": [{**CANDIDATES[0], "score": 3}]}})
    assert r.status_code == 200, r.text
    r = client.post("/v1/retrieve", json={"query": "gzip", "qid": 7, "k": 2})
    assert r.status_code == 200 and r.json()["query"]["qid"] == 7, r.text


LONG = "x" * 257


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/rag", {"topic": "gzip", "topic_id": "x" * 1_000_000}, ["body", "topic_id"]),
        ("/rag", {"topic": "gzip", "topic_id": LONG}, ["body", "topic_id"]),
        ("/v1/generate", {"request": REQUEST, "topic_id": LONG}, ["body", "topic_id"]),
        (
            "/v1/generate",
            {"request": {**REQUEST, "query": {"text": "gzip", "qid": LONG}}},
            ["body", "request", "query", "qid"],
        ),
        ("/v1/retrieve", {"query": "gzip", "qid": LONG}, ["body", "qid"]),
        (
            "/v1/evaluate",
            {"answer": {**ANSWER, "topic_id": LONG}, "gold_answers": ["x"]},
            ["body", "answer", "topic_id"],
        ),
    ],
)
def test_ids_have_at_most_256_characters(client, path, body, loc):
    detail = error(client.post(path, json=body), 422)
    assert loc in loc_of(detail) and "at most 256 characters" in json.dumps(detail), detail


def test_ids_of_256_characters_are_echoed(client):
    r = client.post("/v1/generate", json={"request": REQUEST, "topic_id": "x" * 256})
    assert r.status_code == 200 and r.json()["topic_id"] == "x" * 256, r.text
    detail = error(client.get("/v1/demo/search", params={"query": "gzip", "qid": LONG}), 422)
    assert ["query", "qid"] in loc_of(detail)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/segments", {"index": "", "prefixes": ["a#0_"]}),
        ("/v1/retrieve", {"query": "gzip", "index": ""}),
        ("/rag", {"topic": "gzip", "index": ""}),
        ("/v1/evaluate", {"answer": ANSWER, "index": ""}),
    ],
)
def test_an_empty_index_name_is_refused_naming_it(client, path, body):
    detail = error(client.post(path, json=body), 422)
    assert ["body", "index"] in loc_of(detail) and "at least 1 character" in json.dumps(detail), detail


# --- ASCII digits in specs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "bm25@１０",
        "bm25@١٠",
        "bm25@१० | extractive",
        "bm25@10 | mmr@５ | extractive",
        "bm25:k1_１.２@10",
        "multiquery:g:３ > bm25@10",
        "rrf(bm25=０.５, bm25)@10",
    ],
)
def test_specs_take_ascii_digits_only(client, spec):
    with pytest.raises(SpecError, match="names and numbers are ASCII"):
        parse(spec)
    detail = error(client.post("/rag", json={"topic": "gzip", "pipeline": spec}), 422)
    assert "names and numbers are ASCII" in detail, detail


def test_structured_pipelines_and_arguments_take_ascii_digits_only(client):
    with pytest.raises(SpecError, match="ASCII"):
        from_mapping({"retrieve": "bm25", "rerank": [{"name": "neighbours", "arg": "２", "depth": 5}]})
    with pytest.raises(SpecError, match="depth"):
        from_mapping({"retrieve": "bm25", "depth": True})
    detail = error(client.post("/v1/rerank", json={"request": REQUEST, "reranker": "mmr:０.５", "k": 2}), 422)
    assert "mmr:LAMBDA takes a number from 0 to 1" in detail, detail
    detail = error(client.post("/v1/retrieve", json={"query": "gzip", "retriever": "bm25:k1_１.２"}), 422)
    assert "BM25 parameter k1 takes a number" in detail, detail
    assert (
        client.post("/rag", json={"topic": "gzip", "pipeline": "bm25:k1_1.2@10 | mmr:0.5@5 | extractive"}).status_code
        == 200
    )


# --- NFKC ---------------------------------------------------------------------------------------------------------


def test_queries_are_nfkc_normalised(client):
    def docids(r: httpx.Response) -> list[str]:
        assert r.status_code == 200, r.text
        return [c["docid"] for c in r.json()["candidates"]]

    plain = docids(client.post("/v1/retrieve", json={"query": "compress file", "k": 10}))
    assert plain
    assert docids(client.post("/v1/retrieve", json={"query": "ｃｏｍｐｒｅｓｓ ﬁle", "k": 10})) == plain
    assert docids(client.get("/v1/demo/search", params={"query": "ｃｏｍｐｒｅｓｓ ﬁle", "hits": 10})) == plain
    r = client.post("/rag", json={"topic": "ｃｏｍｐｒｅｓｓ ﬁle", "pipeline": "bm25@10 | extractive"})
    assert r.status_code == 200 and r.json()["references"], r.text
    detail = error(client.post("/v1/retrieve", json={"query": "\ufdfa" * 300}), 413)  # 18 characters each
    assert "once NFKC-normalised" in detail, detail


# --- each backend's own worker threads ----------------------------------------------------------------------------


def test_each_backend_has_threads_of_its_own_bounded():
    small, large = Guard("small", max_concurrency=3), Guard("large", max_concurrency=1_000)
    assert (small.slots, small.threads.total_tokens, small.callers.total_tokens) == (3, 3, 3)
    assert large.slots == large.threads.total_tokens == MAX_BACKEND_THREADS
    assert small.threads is not large.threads and small.threads is not anyio.to_thread.current_default_thread_limiter
    config = GeneratorConfig(name="g", backend="openai", model="m")
    from ragnarok.judge.llm import LLMJudge
    from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator
    from ragnarok.stages.rerank.listwise import ListwiseReranker

    generator = OpenAIChatGenerator(config)
    assert guard_of(generator) is generator.guard
    assert guard_of(ListwiseReranker("listwise:g", generator)) is generator.guard
    assert guard_of(LLMJudge("g", generator.complete, cache=None)) is generator.guard  # type: ignore[arg-type]
    assert guard_of(object()) is None

    async def main() -> None:  # run_watched takes its thread from the limiter it is given
        limiter = anyio.CapacityLimiter(1)
        seen: list[float] = []
        assert await run_watched(lambda: seen.append(limiter.borrowed_tokens) or 7, CancelToken(), limiter=limiter) == 7
        assert seen == [1]

    anyio.run(main)


@contextmanager
def hung_backend() -> Iterator[tuple[str, list[socket.socket], Callable[[], None]]]:
    """A server that accepts connections and never answers (no CPU spent); yields its ``/v1`` URL, the
    connections it accepted and ``reset()``, which resets them and stops listening (so the calls blocked on
    them end at once; done on exit too)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=256)
    accepted: list[socket.socket] = []

    def reset() -> None:
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below (a close alone would not)
        except OSError:
            pass
        listener.close()
        thread.join(5)
        for conn in accepted:
            try:  # closed with a linger of 0: a reset, not an orderly end
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            except OSError:
                pass

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted, reset
    finally:
        reset()


RAG = {"topic": "how do I compress a file with gzip", "pipeline": "bm25@10 | extractive"}
PHASE_S = 6.0


def rates(base: str, seconds: float) -> tuple[float, float]:
    """Extractive ``/rag`` (2 clients) and ``/healthz`` (1 client) completions per second over ``seconds`` (a
    request unanswered after ``2 x seconds`` counts for nothing and ends its client)."""
    done = Counter()
    failed: list[str] = []
    end = time.monotonic() + seconds

    def loop(kind: str) -> None:
        with httpx.Client(base_url=base, timeout=2 * seconds) as c:
            while time.monotonic() < end:
                try:
                    r = c.post("/rag", json=RAG) if kind == "rag" else c.get("/healthz")
                except httpx.TimeoutException:
                    return
                if r.status_code != 200:
                    failed.append(f"{kind}: {r.status_code} {r.text[:300]}")
                    return
                done[kind] += 1

    threads = [threading.Thread(target=loop, args=(kind,)) for kind in ("rag", "rag", "health")]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.monotonic() - start
    assert not failed, failed
    return done["rag"] / elapsed, done["health"] / elapsed


@pytest.mark.slow
def test_a_hanging_backend_at_max_concurrency_64_leaves_others_their_throughput(demo_settings):
    """Extractive /rag and /healthz on a real uvicorn, measured alone and then while 70 calls wait on a
    generator with max_concurrency 64 that never answers (64 in its slots, 6 waiting for one): the
    hanging backend holds 64 threads of its own, so the others keep most of their rate (before: it held all
    40 of anyio's default worker threads, and extractive /rag stopped)."""
    with hung_backend() as (url, accepted, reset):
        hang = GeneratorConfig(
            name="hang",
            backend="openai",
            base_url=url,
            model="m",
            max_concurrency=64,
            max_retries=0,
            timeout_s=90,
            slot_wait_s=90,
        )
        settings = demo_settings.model_copy(update={"generators": [hang]})
        with serve_app(create_app(settings, arena=False)) as base:
            for _ in range(2):  # warm: the JVM, the extractive generator's model
                assert httpx.post(f"{base}/rag", json=RAG, timeout=120).status_code == 200
            rag_alone, health_alone = rates(base, PHASE_S)

            hung: list[httpx.Response | Exception] = []

            async def hang_calls() -> None:
                async with httpx.AsyncClient(base_url=base, timeout=120, limits=httpx.Limits(max_connections=100)) as c:

                    async def one() -> None:
                        try:
                            hung.append(await c.post("/v1/generate", json={"request": REQUEST, "generator": "hang"}))
                        except httpx.HTTPError as exc:
                            hung.append(exc)

                    await asyncio.gather(*(one() for _ in range(70)))

            loader = threading.Thread(target=asyncio.run, args=(hang_calls(),), daemon=True)
            loader.start()
            deadline, seen, since = time.monotonic() + 30, -1, time.monotonic()
            while len(accepted) < 64:  # until every slot holds a call that the backend never answers
                if len(accepted) != seen:
                    seen, since = len(accepted), time.monotonic()
                elif seen >= 40 and time.monotonic() - since > 1:  # no more come (threads ran out)
                    break
                assert time.monotonic() < deadline, f"{len(accepted)} calls reached the backend"
                time.sleep(0.05)
            time.sleep(0.3)
            rag_hung, health_hung = rates(base, PHASE_S)
            in_backend, answered = len(accepted), list(hung)
            reset()  # the end of the hang: every call answers (502), and the server can stop
            loader.join(60)
    rag_ratio, health_ratio = rag_hung / rag_alone, health_hung / health_alone
    print(
        f"\nextractive /rag {rag_alone:.2f} -> {rag_hung:.2f} req/s ({rag_ratio:.0%}); "
        f"/healthz {health_alone:.0f} -> {health_hung:.0f} req/s ({health_ratio:.0%}) while 64 calls hang"
    )
    # the defect is a stop (a ratio near 0); /healthz answers in a millisecond, so beside other work on the
    # machine its rate halves by noise alone (0.497 once, in a fresh clone's suite beside a benchmark)
    assert rag_ratio >= 0.5, (rag_alone, rag_hung)
    assert health_ratio >= 0.3, (health_alone, health_hung)
    assert in_backend == 64 and not answered, (in_backend, answered[:3])  # all hung meanwhile, none more
    assert len(hung) == 70 and all(isinstance(r, httpx.Response) and r.status_code in (502, 504) for r in hung), [
        r if isinstance(r, Exception) else (r.status_code, r.text[:200]) for r in hung
    ][:5]


# --- SIGTERM: the JSON 503 for requests in flight -----------------------------------------------------------------


def shutdown_app() -> tuple[FastAPI, list[str]]:
    """An app behind :class:`ShutdownAnswer` whose route waits 1 s for a worker thread (not interruptible)."""
    app, events = FastAPI(), []
    app.state.inflight = InFlight()
    app.add_middleware(ShutdownAnswer)

    @app.get("/slow")
    async def slow() -> dict:
        try:
            await anyio.to_thread.run_sync(time.sleep, 1)
            return {"ok": True}
        finally:
            events.append("ended")

    return app, events


def test_a_request_cancelled_while_shutting_down_gets_the_json_503_at_once():
    app, events = shutdown_app()

    async def main() -> tuple[httpx.Response, float]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            request = asyncio.ensure_future(c.get("/slow"))
            await asyncio.sleep(0.2)
            app.state.inflight.cancel_all()  # what SIGTERM does; then uvicorn cancels the request's task
            start = time.monotonic()
            request.cancel("Task cancelled, timeout graceful shutdown exceeded")
            return await request, time.monotonic() - start

    r, answered_s = asyncio.run(main())
    assert r.status_code == 503 and r.json() == {"detail": "the server is shutting down"}, r.text
    assert answered_s < 0.3, answered_s  # not when the thread ends


def test_other_cancellations_reach_the_work_as_before():
    """A caller's deadline around a request made in process: cancelled, once the work has ended."""
    app, events = shutdown_app()

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            with anyio.fail_after(0.2):
                await c.get("/slow")

    with pytest.raises(TimeoutError):
        asyncio.run(main())
    assert events == ["ended"]


@pytest.mark.slow
def test_sigterm_answers_requests_in_flight_with_the_json_503(demo_settings, tmp_path):
    """A real ``ragnarok serve`` with 1 s of shutdown grace; a /v1/generate and a /rag wait on a backend that
    never answers (threads that cannot be interrupted) when SIGTERM comes: both get the JSON 503."""
    with hung_backend() as (url, accepted, _):
        hang = {"name": "hang", "backend": "openai", "base_url": url, "model": "m", "max_retries": 0, "timeout_s": 120}
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "HF_HUB_OFFLINE": "1",
            "RAGNAROK_SHUTDOWN_GRACE_S": "1",
            "RAGNAROK_GENERATORS": json.dumps([hang]),
        }
        started: list = []
        got: dict[str, httpx.Response | Exception] = {}
        with ragnarok_serve(env, output=tmp_path / "serve.log", started=started) as base:
            assert httpx.post(f"{base}/rag", json=RAG, timeout=120).status_code == 200  # warm

            def call(name: str, path: str, body: dict) -> None:
                try:
                    got[name] = httpx.post(base + path, json=body, timeout=60)
                except httpx.HTTPError as exc:
                    got[name] = exc

            calls = [
                threading.Thread(
                    target=call, args=("generate", "/v1/generate", {"request": REQUEST, "generator": "hang"})
                ),
                threading.Thread(target=call, args=("rag", "/rag", {"topic": "gzip", "pipeline": "bm25@5 | hang"})),
            ]
            for t in calls:
                t.start()
            deadline = time.monotonic() + 30
            while len(accepted) < 2:
                assert time.monotonic() < deadline, "the calls did not reach the backend"
                time.sleep(0.05)
            start = time.monotonic()
            started[0].send_signal(signal.SIGTERM)
            for t in calls:
                t.join(30)
            answered_s = time.monotonic() - start
            started[0].wait(30)
    log = (tmp_path / "serve.log").read_text(errors="replace")[-3000:]
    for name in ("generate", "rag"):
        r = got.get(name)
        assert isinstance(r, httpx.Response), (name, r, log)
        assert r.status_code == 503 and r.headers["content-type"] == "application/json", (name, r.text, log)
        assert r.json() == {"detail": "the server is shutting down"}, r.text
    assert answered_s < 10, answered_s  # 1 s of grace, then at once
