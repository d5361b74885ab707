"""``ragnarok prompt``: the messages it prints are those the generator sends (captured by a local
OpenAI-compatible stub), and a bad name fails in one line with a suggestion."""

from __future__ import annotations

import json

import pytest
from fakes import cohere_app, flaky_openai_app
from servers import serve_app
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.cli.prompt import render
from ragnarok.core.settings import get_settings


@pytest.fixture
def stub(demo_settings, monkeypatch):
    """The demo index, and a generator ``stub`` on a local OpenAI-compatible server that records each body:
    a prompt budget small enough that the contexts are cut to fit it."""
    fake = flaky_openai_app()
    with serve_app(fake) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "stub",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "ok",
                        "max_contexts": 5,
                        "max_prompt_tokens": 700,
                        "max_answer_words": 120,
                    }
                ]
            ),
        )
        get_settings.cache_clear()
        yield fake
        get_settings.cache_clear()


def invoke(*args: object, code: int = 0):
    got = CliRunner().invoke(app, [str(a) for a in args])
    assert got.exit_code == code, (got.exit_code, got.stdout, got.stderr)
    return got


def test_printed_messages_are_those_sent(stub, tmp_path):
    shown = invoke(
        "prompt",
        "--generator",
        "stub",
        "--template",
        "chatqa",
        "--topics",
        "demo",
        "--qid",
        "demo-02",
        "--pipeline",
        "bm25@20",
        "--output",
        "json",
    )
    result = json.loads(shown.stdout)["result"]
    assert [m["role"] for m in result["messages"]] == ["system", "user"] and len(result["contexts"]) == 5
    user = result["messages"][1]["content"]  # the contexts listed are those in the prompt (max_contexts 5)
    assert "[5]" in user and "[6]" not in user
    assert " …" in result["messages"][1]["content"]  # the budget cut the contexts, as the generator cuts them
    text = invoke(
        "prompt",
        "--generator",
        "stub",
        "--template",
        "chatqa",
        "--topics",
        "demo",
        "--qid",
        "demo-02",
        "--pipeline",
        "bm25@20",
    )
    assert text.stdout.rstrip("\n") == render(result) and "stub (openai, template chatqa)" in text.stderr

    one = tmp_path / "one.tsv"
    one.write_text("demo-02\tcompress a file with gzip\n")
    invoke("run", "--topics", one, "--pipeline", "bm25@20 | stub:chatqa", "--output", tmp_path / "run.jsonl")
    assert len(stub.state.bodies) == 1 and stub.state.bodies[0]["messages"] == result["messages"]


def test_cohere_messages_and_documents_are_those_sent(demo_settings, monkeypatch, tmp_path):
    """Cohere sends the contexts apart from the messages (``documents``): both shown, both as sent."""
    fake = cohere_app()
    with serve_app(fake) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv("COHERE_TEST_KEY", "test-key")
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "co",
                        "backend": "cohere",
                        "base_url": url,
                        "model": "command-r",
                        "api_key_env": "COHERE_TEST_KEY",
                    }
                ]
            ),
        )
        get_settings.cache_clear()
        try:
            shown = invoke(
                "prompt",
                "--generator",
                "co",
                "--topic",
                "compress a file with gzip",
                "--pipeline",
                "bm25@20",
                "--output",
                "json",
            )
            one = tmp_path / "one.tsv"
            one.write_text("topic\tcompress a file with gzip\n")
            invoke("run", "--topics", one, "--pipeline", "bm25@20 | co", "--output", tmp_path / "run.jsonl")
        finally:
            get_settings.cache_clear()
    result = json.loads(shown.stdout)["result"]
    assert len(fake.state.bodies) == 1 and len(result["sent_documents"]) == 20
    sent = fake.state.bodies[0]
    assert sent["messages"] == result["messages"] and sent["documents"] == result["sent_documents"]
    assert "test-key" not in shown.stdout + shown.stderr  # the key is never shown


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--generator", "stb"],
            "unknown generator 'stb'; available: "
            "command-r-plus, extractive, gpt-4o, smollm2, stub; did you mean 'stub'?",
        ),
        (["--generator", "stub", "--template", "chatq"], "did you mean 'chatqa'?"),
        (["--generator", "extractive"], "prompts no model"),
        (["--generator", "stub", "--qid", "demo-2"], "unknown topic of demo 'demo-2'"),
        (["--generator", "stub", "--topic", "x"], "give --topic TEXT, or --topics"),
    ],
)
def test_bad_names_fail_in_one_line(stub, args, message):
    base = ["prompt", "--topics", "demo", "--qid", "demo-02", "--pipeline", "bm25@20"]
    got = invoke(*base, *args, code=2)
    assert got.stderr.count("\n") == 1 and got.stderr.startswith("error: ") and message in got.stderr, got.stderr
    assert not stub.state.bodies
