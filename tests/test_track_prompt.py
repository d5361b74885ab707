"""2025 ``metadata.prompt``: ``ragnarok validate`` warns about a missing optional field once per line,
in the official 2025 validator's words, and ``ragnarok run --with-prompt`` writes the prompt the generator was
given (compared here with the messages a real OpenAI-shaped server on loopback received). ``validate --fix``
drops citations outside ``references`` and says how many."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI, Request
from servers import serve_app
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings
from ragnarok.track.validate import fix, validate

cli = CliRunner()
SEGS = ["msmarco_v2.1_doc_51_766815931#2_1606878413", "msmarco_v2.1_doc_51_766815931#3_1606879999"]
#: The official 2025 validator's warnings (validate_trec_rag25_gen.py) for each optional field left out.
OFFICIAL = {
    "type": "optional field 'type' is missing from metadata",
    "narrative": "optional field 'narrative' is missing from metadata",
    "prompt": "optional field 'prompt' is missing from metadata",
}


def ragnarok(*args: object, code: int = 0) -> str:
    result = cli.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


def record(tid: str, **metadata: object) -> dict:
    meta = {"team_id": "t", "run_id": "r", "narrative_id": tid, **metadata}
    return {"metadata": meta, "references": SEGS, "answer": [{"text": "X is so.", "citations": [0, 1]}]}


def write(path, records: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_each_missing_optional_field_is_a_warning_per_line_worded_as_the_official_validator(tmp_path):
    topics = {str(i): f"what is {i}" for i in range(7)}
    run = write(tmp_path / "run.jsonl", [record(str(i)) for i in range(7)])
    result = validate(run, topics)
    assert result.ok and not result.errors
    assert sorted((p.line, p.message) for p in result.warnings) == sorted(
        (n, message) for n in range(1, 8) for message in OFFICIAL.values()
    )
    full = write(
        tmp_path / "full.jsonl",
        [record(str(i), type="automatic", narrative=f"what is {i}", prompt="p") for i in range(7)],
    )
    assert validate(full, topics).warnings == []
    bad = write(tmp_path / "bad.jsonl", [record("0", type="automatic", narrative="what is 0", prompt=["p"])])
    assert [p.message for p in validate(bad, topics).errors] == ["metadata.prompt must be a string"]


@pytest.mark.parametrize("year", [2024, 2025])
def test_fix_drops_out_of_range_citations_and_says_how_many(tmp_path, year):
    if year == 2025:
        line = record("1", type="automatic", narrative="what is x", prompt="p")
    else:
        line = {"run_id": "r", "topic_id": "1", "topic": "what is x", "references": SEGS, "response_length": 6}
    line["answer"] = [{"text": "X is so.", "citations": [0, 2, 1, -1]}, {"text": "Y is too.", "citations": [5, 5, 1]}]
    run = write(tmp_path / "run.jsonl", [line])
    result = validate(run, {"1": "what is x"})
    assert sum("outside references" in p.message for p in result.errors) == 2
    done = fix(result, tmp_path / "fixed.jsonl")
    assert (done.lines, done.citations_dropped) == (1, 4)
    again = validate(tmp_path / "fixed.jsonl", {"1": "what is x"})
    assert again.ok, [str(p) for p in again.problems]
    fixed = json.loads((tmp_path / "fixed.jsonl").read_text())
    assert [s["citations"] for s in fixed["answer"]] == [[0, 1], [1]]
    out = ragnarok("validate", run, "--fix", tmp_path / "cli.jsonl")
    assert "1 lines changed, 4 out-of-range citations dropped" in out
    assert "valid TREC RAG" in out.splitlines()[-1]


def recording_llm_app() -> FastAPI:
    """An OpenAI-compatible chat server that keeps the messages of each call (by their user message) and
    answers one sentence citing the first context."""
    app = FastAPI()
    app.state.prompts = []

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        body = await request.json()
        app.state.prompts.append(body["messages"])
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "It is in the first segment [1]."},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18},
        }

    return app


@pytest.fixture
def recording(demo_settings, monkeypatch):
    server = recording_llm_app()
    with serve_app(server) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "rec",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "rec",
                        "max_contexts": 4,
                        "max_prompt_tokens": 400,
                    }
                ]
            ),
        )  # a budget that cuts the segments: the written prompt is cut alike
        get_settings.cache_clear()
        yield server
        get_settings.cache_clear()


def test_run_with_prompt_writes_the_prompt_the_generator_was_given(recording, tmp_path):
    bare, with_prompt = tmp_path / "bare.jsonl", tmp_path / "prompt.jsonl"
    args = ["run", "--topics", "demo", "--pipeline", "bm25@20 | rec", "--run-id", "r25", "--year", "2025"]
    assert "50 topics written" in ragnarok(*args, "--output", bare)
    result = validate(
        bare,
        {
            t["metadata"]["narrative_id"]: t["metadata"]["narrative"]
            for t in map(json.loads, bare.read_text().splitlines())
        },
    )
    assert [p.message for p in result.warnings] == [OFFICIAL["prompt"]] * 50
    recording.state.prompts.clear()
    assert "50 topics written" in ragnarok(*args, "--with-prompt", "--output", with_prompt)
    out = ragnarok("validate", with_prompt, "--topics", "demo")
    assert "0 errors, 0 warnings" in out.splitlines()[-1]
    sent = {"\n\n".join(f"{m['role']}: {m['content']}" for m in messages) for messages in recording.state.prompts}
    written = [json.loads(line)["metadata"]["prompt"] for line in with_prompt.read_text().splitlines()]
    assert len(sent) == 50 and set(written) == sent


def test_with_prompt_needs_2025(tmp_path):
    out = ragnarok(
        "run",
        "--topics",
        "demo",
        "--pipeline",
        "bm25@20 | extractive",
        "--with-prompt",
        "--output",
        tmp_path / "o.jsonl",
        code=2,
    )
    assert "--with-prompt writes metadata.prompt, a field of 2025 answers" in out
    assert not (tmp_path / "o.jsonl").exists()
