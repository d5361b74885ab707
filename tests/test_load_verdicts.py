"""Load is not a verdict: a topic whose stage times out is retried (with backoff) and completes;
one that always fails is named in one readable line while the others are written; timeouts halve the topics in
flight (not below 1). ``ragnarok search --pipeline`` and ``ragnarok run`` both."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest
from fastapi import FastAPI, Request
from servers import serve_app
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings
from ragnarok.service.batch import AdaptiveLimit, PipelineRefused, describe, refusal, with_retries
from ragnarok.service.gateway import StageError

cli = CliRunner()
TOPICS = [
    ("demo-01", "how do I parse command-line arguments"),
    ("demo-02", "compress a file with gzip"),
    ("demo-03", "run a shell command and capture its output"),
    ("demo-04", "what does the yield statement do"),
    ("demo-05", "read and write CSV files"),
]
SLOW_ONCE = "compress a file with gzip"  # the first call whose prompt names it outlasts the generator's timeout; later ones answer
ALWAYS_DOWN = "what does the yield statement do"  # every call whose prompt names it is a 500


def topic_llm_app() -> FastAPI:
    """An OpenAI-compatible chat server whose behaviour the topic (in the prompt) picks, not the model."""
    fake = FastAPI()
    fake.state.calls = Counter()

    @fake.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @fake.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": "topical", "object": "model", "owned_by": "test"}]}

    @fake.post("/v1/chat/completions")
    async def chat(request: Request):  # type: ignore[no-untyped-def]
        body = await request.json()
        prompt = json.dumps(body.get("messages"))
        for word in (SLOW_ONCE, ALWAYS_DOWN):
            if word in prompt:
                fake.state.calls[word] += 1
        if ALWAYS_DOWN in prompt:
            from fastapi.responses import JSONResponse  # noqa: PLC0415

            return JSONResponse({"error": {"message": "backend exploded", "type": "server_error"}}, status_code=500)
        if SLOW_ONCE in prompt and fake.state.calls[SLOW_ONCE] == 1:
            await asyncio.sleep(3)
        text = "Use the standard library module for this task [1]. It is documented with examples [2]."
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
        }

    return fake


@pytest.fixture
def topical(demo_settings, monkeypatch, tmp_path):
    """The CLI in this process on the demo index, a generator ``topical`` (1 s per attempt, no retries of its
    own) and retries 20 ms apart; yields the fake server's app and a five-topic file."""
    fake = topic_llm_app()
    with serve_app(fake) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv("RAGNAROK_TOPIC_BACKOFF_S", "0.02")
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "topical",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "topical",
                        "timeout_s": 1.0,
                        "max_retries": 0,
                        "max_concurrency": 8,
                    }
                ]
            ),
        )
        topics = tmp_path / "topics.tsv"
        topics.write_text("".join(f"{qid}\t{text}\n" for qid, text in TOPICS))
        get_settings.cache_clear()
        yield fake, topics
        get_settings.cache_clear()


def invoke(*args: object) -> tuple[int, str]:
    result = cli.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_search_retries_a_timeout_and_reports_a_failing_topic_in_one_line(topical, tmp_path):
    fake, topics = topical
    out = tmp_path / "run.txt"
    code, said = invoke(
        "search", "--topics", topics, "--pipeline", "hyde:topical > bm25@20", "--output", out, "--threads", "4"
    )
    assert code == 1, said
    assert fake.state.calls[SLOW_ONCE] == 2  # timed out once, then answered
    assert fake.state.calls[ALWAYS_DOWN] == 3  # the first try and 2 retries
    written = {line.split()[0] for line in out.read_text().splitlines()}
    assert written == {"demo-01", "demo-02", "demo-03", "demo-05"}  # the timed-out topic too
    failed = [line for line in said.splitlines() if line.startswith("topic demo-04 failed")]
    assert len(failed) == 1, said
    assert "stage 'query hyde:topical' answered 502" in failed[0] and "backend exploded" in failed[0], failed
    assert "{" not in failed[0] and "Traceback" not in said, said  # words, not a Python dict
    assert "1 of 5 topics failed: demo-04" in said.splitlines()[-1], said
    assert "topics in flight at once (was 4)" in said  # the timeout lowered the concurrency


def test_search_with_every_topic_written_exits_0(topical, tmp_path):
    _, topics = topical
    good = tmp_path / "good.tsv"
    good.write_text("".join(line + "\n" for line in topics.read_text().splitlines() if ALWAYS_DOWN not in line))
    code, said = invoke(
        "search", "--topics", good, "--pipeline", "hyde:topical > bm25@20", "--output", tmp_path / "run.txt"
    )
    assert code == 0, said
    assert "failed" not in said and "wrote" in said


def test_run_retries_a_timeout_records_a_failing_topic_and_goes_on(topical, tmp_path):
    fake, topics = topical
    out = tmp_path / "run.jsonl"
    args = (
        "run",
        "--topics",
        topics,
        "--pipeline",
        "bm25@5 | topical",
        "--run-id",
        "load",
        "--output",
        out,
        "--concurrency",
        "4",
        "--retries",
        "3",
        "--no-progress",
    )
    code, said = invoke(*args)
    assert code == 1, said
    assert fake.state.calls[SLOW_ONCE] == 2 and fake.state.calls[ALWAYS_DOWN] == 3
    kept = [json.loads(line)["topic_id"] for line in out.read_text().splitlines()]
    assert kept == ["demo-01", "demo-02", "demo-03", "demo-05"]  # in the topics' order
    assert "4 topics written, 0 already done, 1 failed" in said, said
    reason = [line for line in said.splitlines() if line.strip().startswith("demo-04:")]
    assert len(reason) == 1 and "answered 502" in reason[0] and "backend exploded" in reason[0], said
    assert "{" not in reason[0], reason
    assert "topics in flight at once (was 4)" in said
    # resuming runs only the failed topic (the written ones stay)
    code, said = invoke(*args)
    assert code == 1 and "0 topics written, 4 already done, 1 failed" in said, said


# ------------------------------------------------------------------ the policy, unit by unit


def test_timeouts_halve_the_limit_once_per_wave_and_never_below_one():
    changes: list[tuple[int, int]] = []
    limit = AdaptiveLimit(8, lambda old, new: changes.append((old, new)))
    wave = limit.epoch
    assert limit.overloaded(wave) and limit.limit == 4
    assert not limit.overloaded(wave) and limit.limit == 4  # the same wave's other timeouts: no second halving
    for expected in (2, 1, 1, 1):
        limit.overloaded(limit.epoch)
        assert limit.limit == expected
    assert changes == [(8, 4), (4, 2), (2, 1)]
    # successes in a row raise it by one at a time, back to where it started and no further
    for _ in range(200):
        limit.succeeded()
    assert limit.limit == 8 and changes[-1] == (7, 8)
    assert AdaptiveLimit(0).limit == 1


def test_the_limit_bounds_the_attempts_in_flight():
    changes: list[tuple[int, int]] = []

    async def main() -> int:
        limit = AdaptiveLimit(4, lambda old, new: changes.append((old, new)))
        now = most = 0
        timed_out = False

        async def call() -> None:
            nonlocal now, most, timed_out
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.01)
            now -= 1
            if not timed_out:
                timed_out = True
                raise StageError("generate topical", 504, "timed out")

        await asyncio.gather(*(with_retries(call, limit, retries=2, backoff_s=0.01) for _ in range(12)))
        return most

    assert asyncio.run(main()) <= 4
    assert changes[0] == (4, 2) and changes[1:] == [(2, 3), (3, 4)]  # halved, then back up as calls succeed


def test_retries_are_bounded_with_backoff_and_a_refusal_is_not_retried():
    async def main() -> None:
        calls = Counter()

        async def busy() -> None:
            calls["busy"] += 1
            raise StageError(
                "rerank mmr", 504, {"reranker": "mmr", "error": "timeout", "message": "no answer in 120 s"}
            )

        start = time.monotonic()
        with pytest.raises(StageError) as caught:
            await with_retries(busy, AdaptiveLimit(2), retries=2, backoff_s=0.05)
        assert calls["busy"] == 3 and time.monotonic() - start >= 0.15  # 0.05 s, then 0.1 s
        assert (
            str(describe("t1", caught.value)) == "topic t1 failed: stage 'rerank mmr' answered 504: no answer in 120 s"
        )

        async def refused() -> None:
            calls["refused"] += 1
            raise refusal(StageError("generate nope", 404, "unknown generator 'nope'"))  # type: ignore[misc]

        with pytest.raises(PipelineRefused, match="unknown generator 'nope'"):
            await with_retries(refused, AdaptiveLimit(2), retries=2, backoff_s=0.05)
        assert calls["refused"] == 1

    asyncio.run(main())
    assert refusal(StageError("x", 429, "slow down")) is None and refusal(StageError("x", 504, "t")) is None
