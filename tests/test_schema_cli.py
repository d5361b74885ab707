"""``ragnarok schema``: the schemas are what /openapi.json says for the same bodies, real objects (run lines of
both years, a /rag body, its answer, its stream's events, a --task r request line) validate against them, and
the run-line schemas accept what the official checkers accept."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient
from test_track_parity import SEGS, official_2024, official_2025, record_2025, write_lines
from typer.testing import CliRunner

from api.main import create_app
from ragnarok.cli.main import app
from ragnarok.cli.schema import SCHEMAS
from ragnarok.core.settings import Settings, get_settings

cli = CliRunner()


def schema(name: str) -> dict:
    got = cli.invoke(app, ["schema", name])
    assert got.exit_code == 0, got.output
    parsed = json.loads(got.stdout)
    jsonschema.Draft202012Validator.check_schema(parsed)
    return parsed


def inline(node: Any, defs: dict) -> Any:
    """``node`` with every ``$ref`` (``#/$defs/X`` or ``#/components/schemas/X``) replaced by ``X`` inlined."""
    if isinstance(node, dict):
        if "$ref" in node:
            return inline(defs[node["$ref"].rsplit("/", 1)[1]], defs)
        return {k: inline(v, defs) for k, v in node.items() if k not in ("$defs", "$schema", "$id")}
    return [inline(v, defs) for v in node] if isinstance(node, list) else node


def fastapi_form(node: Any, strict: bool = True) -> Any:
    """``node`` as FastAPI writes it in /openapi.json: no ``"default": null``; with ``strict`` false, no
    ``additionalProperties`` either (FastAPI leaves it out of RagBody's PipelineMapping, which refuses other
    keys all the same: test_real_objects_validate shows the API refusing one, as this schema does)."""
    if isinstance(node, dict):
        return {
            k: fastapi_form(v, strict)
            for k, v in node.items()
            if not (k == "default" and v is None) and (strict or k != "additionalProperties")
        }
    return [fastapi_form(v, strict) for v in node] if isinstance(node, list) else node


def ours(name: str) -> dict:
    got = schema(name)
    flat = fastapi_form(inline(got, got.get("$defs", {})))
    if flat.get("description") == SCHEMAS[name][0]:  # the command's own line, where the model has none
        del flat["description"]
    return flat


def test_the_schemas_are_the_apis(demo_settings):
    spec = create_app(Settings(data_dir=demo_settings.data_dir), arena=False).openapi()
    components = spec["components"]["schemas"]

    def route(path: str, part: str) -> dict:
        post = spec["paths"][path]["post"]
        body = post["requestBody"] if part == "body" else post["responses"]["200"]
        return inline(body["content"]["application/json"]["schema"], components)

    assert ours("request") == route("/v1/retrieve", "answer") == inline(components["Request"], components)
    assert fastapi_form(ours("rag-body"), strict=False) == fastapi_form(route("/rag", "body"), strict=False)
    assert ours("candidates")["type"] == "array"
    assert ours("candidates")["items"] == route("/v1/retrieve", "answer")["properties"]["candidates"]["items"]
    assert ours("answer") == inline(components["RagAnswer"], components)
    generated = route("/v1/generate", "answer")  # the answer and its notes
    assert {k: v for k, v in generated["properties"].items() if k not in ("notes", "spend")} == ours("answer")[
        "properties"
    ]
    done = next(e for e in ours("stream-events")["oneOf"] if e["properties"]["event"]["const"] == "done")
    assert done["properties"]["data"] == route("/rag", "answer")


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_real_objects_validate(demo_data_env, tmp_path):
    topics = tmp_path / "three.tsv"
    topics.write_text(
        "demo-01\thow do I parse command-line arguments\ndemo-02\tcompress a file with gzip\n"
        "demo-03\trun a shell command and capture its output\n"
    )
    for year, extra in ((2024, []), (2025, ["--with-prompt"])):
        out = tmp_path / f"run{year}.jsonl"
        got = cli.invoke(
            app,
            [
                "run",
                "--topics",
                str(topics),
                "--pipeline",
                "bm25@20 | extractive",
                "--year",
                str(year),
                "--output",
                str(out),
                *extra,
            ],
        )
        assert got.exit_code == 0, got.output
        for line in lines(out):
            jsonschema.validate(line, schema(f"run-line-{year}"))
    ranked = tmp_path / "bm25.run"
    got = cli.invoke(
        app, ["run", "--topics", str(topics), "--pipeline", "bm25@20", "--task", "r", "--output", str(ranked)]
    )
    assert got.exit_code == 0, got.output
    for line in lines(tmp_path / "bm25.run.requests.jsonl"):
        jsonschema.validate(line, schema("request"))
        jsonschema.validate(line["candidates"], schema("candidates"))

    body = {"topic": "compress a file with gzip", "topic_id": "demo-02", "pipeline": "bm25@20 | extractive"}
    jsonschema.validate(body, schema("rag-body"))
    extra = {**body, "pipeline": {"retrieve": "bm25", "generate": {"name": "extractive"}, "bogus": 1}}
    with pytest.raises(jsonschema.ValidationError, match="bogus"):
        jsonschema.validate(extra, schema("rag-body"))
    with TestClient(create_app(get_settings(), arena=False)) as client:
        refused = client.post("/rag", json=extra)
        assert refused.status_code == 422 and "Extra inputs are not permitted" in refused.text, refused.text
        answer = client.post("/rag", json=body)
        assert answer.status_code == 200, answer.text
        jsonschema.validate(answer.json(), schema("answer"))
        events = []
        with client.stream("POST", "/rag", json={**body, "stream": True}) as streamed:
            event = None
            for line in streamed.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    events.append({"event": event, "data": json.loads(line[6:])})
    assert {e["event"] for e in events} >= {"stage", "references", "delta", "sentence", "done"}
    for event in events:
        jsonschema.validate(event, schema("stream-events"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"event": "sentence", "data": {"text": "x"}}, schema("stream-events"))


def test_run_line_schemas_accept_what_the_official_checkers_accept(tmp_path):
    line_2025, line_2024 = schema("run-line-2025"), schema("run-line-2024")
    topics = {"1": "what is x"}
    bare = record_2025("1", "what is x")
    del bare["metadata"]["type"], bare["metadata"]["narrative"]
    repeated = record_2025("1", "what is x")
    repeated["references"] = SEGS * 4  # repeated and over 100: the 2025 validator fixes them
    numbered = record_2025("1", "what is x", narrative_id=1, extra_field="kept")
    for record in (bare, repeated, numbered, {"metadata": {"team_id": "t", "run_id": "r", "narrative_id": "1"}}):
        assert official_2025(write_lines(tmp_path / "run.jsonl", [record]), topics)[0] == []
        jsonschema.validate(record, line_2025)
    for value in ("semi-automatic", "Automatic", ""):  # the official validator's errors: the schema's too
        record = record_2025("1", "what is x", type=value)
        assert official_2025(write_lines(tmp_path / "run.jsonl", [record]), topics)[0]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(record, line_2025)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"metadata": {"team_id": "t", "run_id": "r"}}, line_2025)  # no narrative_id

    good = {
        "run_id": "r",
        "topic_id": "1",
        "topic": "what is x",
        "references": SEGS[:20],
        "response_length": 3,
        "answer": [{"text": "X is so.", "citations": [0, 19]}],
    }
    assert official_2024(write_lines(tmp_path / "run.jsonl", [good]), topics)[0] == []
    jsonschema.validate(good, line_2024)
    for broken in (
        {**good, "references": SEGS[:21]},
        {k: v for k, v in good.items() if k != "response_length"},
        {**good, "answer": [{"text": "X.", "citations": [-1]}]},
    ):
        assert official_2024(write_lines(tmp_path / "run.jsonl", [broken]), topics)[0]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, line_2024)


def test_unknown_schema_name():
    got = cli.invoke(app, ["schema", "run-line-2026"])
    assert got.exit_code == 2 and got.stderr.count("\n") == 1
    assert "unknown schema 'run-line-2026'" in got.stderr and "did you mean 'run-line-2025'?" in got.stderr
    listed = cli.invoke(app, ["schema"])
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert listed.exit_code == 0 and names[: len(SCHEMAS)] == list(SCHEMAS)
    assert names[len(SCHEMAS)] == "envelope" and set(names[len(SCHEMAS) + 1 :]) == {"result"}
