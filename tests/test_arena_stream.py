"""Streamed battles: both panes fill as the answers are written, the votes open when both are done.

Over the real API (demo index, real Lucene) with a local OpenAI-compatible server that streams its answer
piece by piece (tests/sse_fakes.py) as a generator of the pool:

* the in-process transport hands each event over as the app sends it, in the caller's principal, and a
  reader that leaves tells the app so;
* :meth:`RagClient.stream` gives the events, then the answer ``run`` gives, or one error event (never raises);
* a battle's views: the written pane's text grows; the final view is the non-streamed answer; nothing sent
  before the vote names a pipeline (stage events are never shown) or times a side (the reveal does);
  a stream that breaks is an error pane and a battle that cannot be voted on;
* the arena's daily call budget holds while streaming: each battle is reserved, metered and settled as the
  arena's principal (audit rows, calls left, a race for the last call);
* the Gradio updates a page receives (its queue's stream) grow and name no pipeline;
* in a real browser (chromium + playwright): a pane's text grows while the votes are closed, then they open.
"""

from __future__ import annotations

import asyncio
import html
import json
import random
import re
import time

import httpx
import pytest
from fastapi import FastAPI, Request
from servers import free_port, serve_app
from sse_fakes import Script, streaming_openai_app
from test_arena_browser import browser_context  # noqa: F401 - the fixture (chromium, or skip / fail in CI)

from api.main import create_app
from ragnarok.arena.pool import identify
from ragnarok.auth.principal import Principal, acting_as, current
from ragnarok.stages.generate.base import GeneratorConfig
from webui import render
from webui.arena import Arena, arena_principal
from webui.asgi_stream import StreamingASGITransport
from webui.client import PaneResult, RagClient

pytestmark = [
    # pandas deprecations raised inside Gradio's queue, not ours
    pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

TOPIC = "parse command line arguments"
FAST, WRITER = "bm25@20 | extractive", "bm25@20 | zeta-llm"
NAMES = ["bm25", "extractive", "zeta", "@20"]  # every pool pipeline's spec contains some of these
PIECES = [
    "Use the argparse module",
    " to parse",
    " command line",
    " arguments [1].",
    " It builds",
    " help",
    " messages",
    " and usage text [2].",
    " The getopt module",
    " is the C-style",
    " alternative [2].",
]


@pytest.fixture(scope="module")
def writer():
    """The streaming fake LLM: yields its app (``app.state.script`` says what it writes) and its /v1 URL."""
    app = streaming_openai_app()
    with serve_app(app) as base:
        yield app, f"{base}/v1"


def _script(app, **kw) -> Script:
    app.state.script = Script(pieces=list(PIECES), **kw)
    return app.state.script


def _settings(demo_settings, tmp_path, url, paid=False, **update):
    llm = GeneratorConfig(
        name="zeta-llm",
        backend="openai",
        base_url=url,
        model="fake",
        api_key_env=None,
        max_retries=0,
        timeout_s=30,
        paid=paid,
    )
    return demo_settings.model_copy(
        update={
            "generators": [llm],
            "arena_pool": [FAST, WRITER],
            "database_url": f"sqlite:///{tmp_path / 'v.db'}",
            **update,
        }
    )


def _arena(settings) -> Arena:
    app = create_app(settings, arena=False)
    client = RagClient("http://ragnarok.test", transport=httpx.ASGITransport(app=app), timeout_s=60)
    return Arena(settings, client, rng=random.Random(3))


async def _collect(stream) -> list:
    return [item async for item in stream]


def _leaks(parts: list[str]) -> list[str]:
    blob = "\n".join(parts).lower()
    return [n for n in NAMES if n in blob]


def _written(pane: str | None) -> str | None:
    """The text so far of a pane being written (None for any other pane)."""
    found = re.search(r'rg-stream-text">(.*?)<span class="rg-caret"', pane or "", re.S)
    return html.unescape(found.group(1)) if found else None


def _sides(arena: Arena, battle_id: str) -> dict[str, str]:
    stored = arena.store.get(battle_id)
    return {"a": stored.pipeline_a["spec"], "b": stored.pipeline_b["spec"]}


# ---- the in-process transport ----


def test_the_in_process_transport_streams_runs_as_the_caller_and_reports_a_reader_that_left():
    seen: dict[str, object] = {}

    async def app(scope, receive, send):
        await receive()
        seen["principal"] = current()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        if scope["path"] == "/forever":  # sends until the reader goes away
            while True:
                await send({"type": "http.response.body", "body": b"x", "more_body": True})
                if (await asyncio.wait_for(receive(), 5))["type"] == "http.disconnect":
                    await asyncio.sleep(0.2)  # winding up (the spend settled): the close waits for it
                    seen["wound up"] = True
                    return
        for i in range(3):
            await send({"type": "http.response.body", "body": str(i).encode(), "more_body": True})
            await asyncio.sleep(0.3)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def first_chunk_at(transport) -> tuple[float, bytes]:
        start = time.monotonic()
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://t") as client,
            client.stream("POST", "/", content=b"{}") as response,
        ):
            async for chunk in response.aiter_bytes():
                return time.monotonic() - start, chunk
        raise AssertionError("no body")

    async def main() -> None:
        me = Principal(owner="arena", name="arena")
        with acting_as(me):
            at, chunk = await first_chunk_at(StreamingASGITransport(app))
        assert chunk == b"0" and at < 0.25 and seen["principal"] == me
        buffered, chunk = await first_chunk_at(httpx.ASGITransport(app))  # httpx's own: all of it at the end
        assert chunk == b"012" and buffered >= 0.85
        async with httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://t") as client:
            async with client.stream("POST", "/forever", content=b"{}") as response:
                async for _ in response.aiter_bytes():
                    break
            # the app heard the disconnect and wound up before the close returned
            assert seen.get("wound up") is True

    asyncio.run(main())


# ---- the client ----


def test_the_client_streams_events_then_the_answer_run_gives(demo_settings, tmp_path, writer):
    app, url = writer
    _script(app, each_wait_s=0.05)
    settings = _settings(demo_settings, tmp_path, url)
    arena = _arena(settings)
    events = asyncio.run(_collect(arena.client.stream(identify(WRITER), TOPIC, "t1")))
    kinds = [e.event for e in events]
    assert kinds[-1] == "done" and "references" in kinds and kinds.count("delta") == len(PIECES)
    assert {e.data["stage"] for e in events if e.event == "stage"} == {"bm25", "zeta-llm"}
    assert "".join(e.data["text"] for e in events if e.event == "delta") == "".join(PIECES)
    streamed = events[-1].data
    assert isinstance(streamed, PaneResult) and streamed.ok
    plain = asyncio.run(arena.client.run(identify(WRITER), TOPIC, "t1"))
    assert streamed == plain  # the same answer and cited segments as the non-streamed /rag
    assert [s["text"] for s in streamed.answer["answer"]] == [e.data["text"] for e in events if e.event == "sentence"]


def test_the_client_never_raises_a_failure_is_its_last_event(demo_settings, tmp_path, writer):
    _, url = writer
    settings = _settings(demo_settings, tmp_path, url)
    down = RagClient(f"http://127.0.0.1:{free_port()}", timeout_s=5)
    events = asyncio.run(_collect(down.stream(identify(FAST), TOPIC)))
    assert [e.event for e in events] == ["error"] and "cannot reach" in events[0].data
    unknown = asyncio.run(_collect(_arena(settings).client.stream(identify("bm25@20 | no-such-llm"), TOPIC)))
    assert [e.event for e in unknown] == ["error"] and unknown[0].data.startswith("HTTP 4")

    old = FastAPI()  # gateways from before streaming: a strict body refuses the field, a lenient one ignores it

    @old.post("/rag")
    async def rag(request: Request):  # type: ignore[no-untyped-def]
        body = await request.json()
        if "stream" in body and body["topic"] == "strict":
            from fastapi.responses import JSONResponse

            return JSONResponse(
                {
                    "detail": [
                        {"type": "extra_forbidden", "loc": ["body", "stream"], "msg": "Extra inputs are not permitted"}
                    ]
                },
                status_code=422,
            )
        return {
            "topic_id": "",
            "topic": body["topic"],
            "references": ["d1"],
            "response_length": 2,
            "answer": [{"text": "An answer.", "citations": [0]}],
            "segments": {"d1": {"title": "T"}},
        }

    for topic in ("strict", "lenient"):
        events = asyncio.run(
            _collect(RagClient("http://old", transport=httpx.ASGITransport(old)).stream(identify(FAST), topic))
        )
        assert [e.event for e in events] == ["done"] and events[0].data.segments == {"d1": {"title": "T"}}


# ---- battles ----


def test_a_blinded_battle_streams_its_panes_and_ends_as_the_non_streamed_answers(demo_settings, tmp_path, writer):
    app, url = writer
    _script(app, first_wait_s=0.3, each_wait_s=0.25)
    arena = _arena(_settings(demo_settings, tmp_path, url))
    asyncio.run(arena.client.run(identify(FAST), TOPIC))  # warm: MiniLM loads for the extractive answer
    views = asyncio.run(_collect(arena.battle_stream(TOPIC, "", "s", tick_s=0.25)))
    progress, final = views[:-1], views[-1]
    assert final.done and final.votable and final.battle_id and not final.revealed
    assert all(not v.done and not v.votable and v.battle_id is None and v.raw == {} for v in progress)
    side = next(k for k, spec in _sides(arena, final.battle_id).items() if spec == WRITER)
    texts = [t for v in progress if (t := _written(getattr(v, f"pane_{side}"))) is not None]
    assert len(set(texts)) >= 3, texts  # the text so far, growing piece by piece
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:])) and "".join(PIECES).startswith(texts[-1])
    panes = [getattr(v, f"pane_{side}") for v in progress]
    assert any(_written(pane) for pane in panes)
    # nothing before the vote names a pipeline or times a side: panes, status, JSON
    sent = [p for v in views for p in (v.pane_a or "", v.pane_b or "", v.status, json.dumps(v.raw))]
    assert _leaks(sent) == []
    assert not [p for p in sent if "first token" in p or "rg-timing" in p or re.search(r"\bA in \d", p)]
    # the final view: the non-streamed answers, no timing line
    for key, spec in _sides(arena, final.battle_id).items():
        plain = asyncio.run(arena.client.run(identify(spec), TOPIC))
        assert final.raw[key.upper()] == {**plain.answer, "segments": plain.segments}
        assert getattr(final, f"pane_{key}") == render.answer_html(plain.answer, plain.segments)
    assert "Both answers are in" in final.status
    # the vote reveals the pipelines with each side's timing (the written side's time to its first token)
    reveal = arena.vote(final.battle_id, "a", "s", "client:test").status
    assert reveal.count("rg-reveal-timing") == 2 and "first token" in reveal
    assert set(arena.latency.medians()) == {FAST, WRITER}


def test_a_stream_that_breaks_is_an_error_pane_and_the_battle_cannot_be_voted_on(demo_settings, tmp_path, writer):
    app, url = writer
    _script(app, each_wait_s=0.3, break_after=4)
    arena = _arena(_settings(demo_settings, tmp_path, url))
    views = asyncio.run(_collect(arena.compare_stream(identify(FAST), identify(WRITER), TOPIC, "", "s", tick_s=0.2)))
    progress, final = views[:-1], views[-1]
    written = [t for v in progress if (t := _written(v.pane_b))]
    assert written and "".join(PIECES[:4]).startswith(written[-1])  # written until it broke
    assert final.battle_id and not final.votable and final.revealed
    assert "rg-error" in final.pane_b and "This pipeline failed" in final.pane_b and "HTTP 50" in final.pane_b
    assert "rg-answer" in final.pane_a and "cannot be voted" in final.status
    assert WRITER not in arena.latency.medians()  # it failed (within the budget): not a latency


def test_streamed_battles_spend_the_arena_budget_as_before(demo_settings, tmp_path, writer):
    """In process, both sides' /rag run as the arena's principal and spend the battle's reservation (both
    sides' worst case, reserved before either streams), settled and audited when the battle ends; past the
    day's calls nothing runs."""
    app, url = writer
    script = _script(app, each_wait_s=0.02)
    settings = _settings(demo_settings, tmp_path, url, paid=True, arena_calls_per_day=3, arena_battles_per_minute=100)
    arena = _arena(settings)
    principal = arena_principal(settings, asyncio.run(arena.pool()))
    first = asyncio.run(arena.battle(TOPIC, "", "s"))
    assert first.votable and script.calls == 1 and arena.auth_store.left(principal) == 2
    arena.auth_store.flush()
    rows = arena.auth_store.audit_rows("arena")
    assert [r["route"] for r in rows] == ["arena battle (blinded)"] and sum(r["calls"] for r in rows) == 1
    assert {r["status"] for r in rows} == {200}
    asyncio.run(arena.battle(TOPIC, "", "s"))
    assert script.calls == 2 and arena.auth_store.left(principal) == 1

    async def race() -> list:  # one call left, three battles at once: the reservations decide
        return await asyncio.gather(*(arena.battle(TOPIC, "", f"s{i}") for i in range(3)))

    raced = asyncio.run(race())
    assert script.calls == 3 and sum(v.votable for v in raced) == 1
    assert all("spent its backend calls" in v.status for v in raced if not v.votable)  # refused: nothing ran
    late = asyncio.run(arena.battle(TOPIC, "", "s"))
    assert "spent its backend calls" in late.status and script.calls == 3


# ---- what a page receives ----


def test_the_gradio_updates_grow_and_name_no_pipeline(demo_settings, tmp_path, writer):
    from gradio_client import Client

    app, url = writer
    _script(app, first_wait_s=0.3, each_wait_s=0.3)
    served = create_app(_settings(demo_settings, tmp_path, url))
    with serve_app(served) as base:
        httpx.post(f"{base}/rag", json={"topic": TOPIC, "pipeline": FAST}, timeout=300).raise_for_status()
        client = Client(f"{base}/arena/", verbose=False, httpx_kwargs={"timeout": 120})
        job = client.submit(TOPIC, api_name="/battle")
        job.result(timeout=120)
        updates = job.outputs()
    assert len(updates) >= 4
    blob = [json.dumps(u, default=str) for u in updates]
    assert _leaks(blob) == [], _leaks(blob)
    # each update: pane A, pane B, the JSON, the status, the four votes, New round (the battle id is state)
    texts = [t for u in updates for pane in u[:2] if isinstance(pane, str) and (t := _written(pane))]
    assert len(set(texts)) >= 2 and all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    writing = [u for u in updates if any(isinstance(p, str) and _written(p) for p in u[:2])]
    assert all(vote["props"]["interactive"] is False for u in writing for vote in u[4:8])
    assert "Both answers are in" in updates[-1][3]
    assert all(vote["props"]["interactive"] is True for vote in updates[-1][4:8])


# ---- in a real browser ----


SNAPSHOT = """() => {
  const text = document.querySelector('.rg-streaming .rg-stream-text');
  const vote = document.querySelector('#rg-vote-a');
  const button = vote.tagName === 'BUTTON' ? vote : vote.querySelector('button');
  return [text ? text.innerText : null, button.disabled, document.body.innerText];
}"""


@pytest.mark.slow
def test_a_pane_grows_in_the_browser_before_the_votes_open(demo_settings, tmp_path, writer, browser_context):  # noqa: F811
    from playwright.sync_api import expect

    app, url = writer
    _script(app, first_wait_s=0.5, each_wait_s=0.7)  # about 8 s of writing
    settings = _settings(demo_settings, tmp_path, url)
    with serve_app(create_app(settings)) as base:
        httpx.post(f"{base}/rag", json={"topic": TOPIC, "pipeline": FAST}, timeout=300).raise_for_status()
        page = browser_context.new_page()
        page.set_default_timeout(90_000)
        expect.set_options(timeout=90_000)
        page.goto(f"{base}/arena/")
        page.locator("#rg-topic textarea").fill(TOPIC)
        page.locator("#rg-go").click()
        page.locator(".rg-streaming .rg-stream-text").first.wait_for()
        page.screenshot(path=tmp_path / "battle-writing.png", full_page=True)
        seen = []
        for _ in range(40):  # the page as it is now, in one go, every 400 ms while a pane is written
            text, disabled, body = page.evaluate(SNAPSHOT)
            if text is None:
                break
            seen.append((text, disabled, body))
            page.wait_for_timeout(400)
        texts = [t for t, _, _ in seen]
        assert len(seen) >= 2 and len(set(texts)) >= 2, texts  # polled while writing: it grew
        assert all(b.startswith(a) for a, b in zip(texts, texts[1:])), texts
        assert all(disabled for _, disabled, _ in seen)  # the votes stay closed while a pane is written
        assert all(_leaks([body]) == [] for _, _, body in seen)
        assert all("first token" not in body for _, _, body in seen)  # no side timed before the vote
        expect(page.locator("#rg-vote-a")).to_be_enabled()
        expect(page.locator("#rg-status")).to_contain_text("Both answers are in")
        assert page.locator(".rg-streaming").count() == 0 and page.locator(".rg-answer").count() == 2
        assert _leaks([page.locator("body").inner_text()]) == []
        page.screenshot(path=tmp_path / "battle-written.png", full_page=True)
        assert "first token" not in page.locator("body").inner_text()
        page.locator("#rg-vote-b").click()
        expect(page.locator("#rg-status .rg-reveal")).to_contain_text("zeta-llm")
        expect(page.locator("#rg-status .rg-reveal")).to_contain_text("first token")  # timed after the vote
    for name in ("battle-writing", "battle-written"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
