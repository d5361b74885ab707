"""A scripted OpenAI-compatible judge for the tests: its labels follow marker words in the prompt, so the
scores they lead to are known in advance. GOOD -> support / full_support / grade 3 / preferred; HALF ->
partial; MALFORMED -> an answer no parser reads; RETRYFIX -> malformed first, right after the reminder;
SLOW -> answers after 3 s."""

from __future__ import annotations

import ast
import asyncio
import json
import re

import pytest
from fastapi import FastAPI, Request
from servers import free_port, serve_app

from ragnarok.core.settings import get_settings


def _list_after(label: str, text: str) -> list[str]:
    found = re.search(re.escape(label) + r"\s*(\[.*?\])\s*\n", text, re.DOTALL)
    return ast.literal_eval(found.group(1)) if found else []


def judge_app() -> FastAPI:
    app = FastAPI()
    app.state.calls = 0

    @app.get("/healthz")
    def healthz() -> dict:
        return {}

    @app.get("/v1/models")
    def models() -> dict:
        return {"data": [{"id": "scripted"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        app.state.calls += 1
        body = await request.json()
        messages = body["messages"]
        prompt, system = messages[1]["content"], messages[0]["content"]
        retried = len(messages) > 2
        if "SLOW" in prompt:
            await asyncio.sleep(12)  # past every test judge's deadline (5 s; 8 s in test_api_evaluate)
        if "MALFORMED" in prompt or ("RETRYFIX" in prompt and not retried):
            text = "Well, it depends on what you mean."
        elif "NuggetizeAssignerLLM" in system:
            passage = prompt.split("Passage:", 1)[1].split("Nugget List:", 1)[0]
            labels = [
                "support" if "GOOD" in n and "GOOD" in passage else "partial_support" if "HALF" in n else "not_support"
                for n in _list_after("Nugget List:", prompt)
            ]
            text = f"Labels: {labels}"
        elif "NuggetizeScoreLLM" in system:
            text = str(["vital" if "GOOD" in n else "okay" for n in _list_after("Nugget List:", prompt)])
        elif "NuggetizeLLM" in system:
            context = prompt.split("Context:", 1)[1].split("Initial Nugget List:", 1)[0]
            old = _list_after("Initial Nugget List:", prompt)
            new = [
                line.split("] ", 1)[1][:60]
                for line in context.splitlines()
                if line.startswith("[") and ("GOOD" in line or "okay" in line)
            ]
            text = "```python\n" + str(list(dict.fromkeys(old + new))) + "\n```"
        elif "supports a statement" in system:
            passage = prompt.split("Passage:", 1)[1]
            text = (
                '["full_support"]'
                if "GOOD" in passage
                else '["partial_support"]'
                if "HALF" in passage
                else '["no_support"]'
            )
        elif "search quality rater" in system or "##final score" in prompt:  # ours or umbrela's (no system)
            text = "##final score: " + ("3" if "GOOD" in prompt.split("Passage:", 1)[1] else "0")
        elif "evaluator of answers" in system:
            text = "score: " + ("5" if "GOOD" in prompt.split("Answer:", 1)[1] else "2")
        elif "impartial judge" in system:
            a = prompt.split("[Answer A]", 1)[1].split("[Answer B]", 1)[0]
            text = "[[A]]" if "GOOD" in a else "[[B]]"
        else:
            text = "?"
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    return app


@pytest.fixture(scope="module")
def scripted():
    """The scripted judge served on a free port for one test module: (app, base URL)."""
    server = judge_app()
    with serve_app(server) as base:
        yield server, base


@pytest.fixture
def judge_env(scripted, monkeypatch, tmp_path):
    """RAGNAROK_GENERATORS naming the scripted judge ("scripted") and one that is down ("down")."""
    server, base = scripted
    config = {
        "name": "scripted",
        "backend": "openai",
        "base_url": base + "/v1",
        "model": "scripted",
        "timeout_s": 5,  # a loaded machine may take over 1 s to answer
        "max_retries": 0,
    }
    down = {
        "name": "down",
        "backend": "openai",
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "model": "x",
        "timeout_s": 1,
        "max_retries": 0,
    }
    monkeypatch.setenv("RAGNAROK_GENERATORS", json.dumps([config, down]))
    get_settings.cache_clear()  # the CLI's settings come from this env
    yield server, tmp_path
    get_settings.cache_clear()
