"""Every command with ``--output json`` writes the one envelope, its ``result`` valid against the command's JSON
Schema (``ragnarok schema result COMMAND``), and no two commands give a field of the same name different types."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from test_cli_consistency import _answers, _nuggets
from test_prompt_cli import stub  # noqa: F401 - the fixture: a generator on a local stub server
from typer.testing import CliRunner

from ragnarok.cli.describe import commands
from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings
from ragnarok.runtime.cli_schemas import RESULTS, envelope_schema, result_schema

#: commands whose results need the internet or an LLM judge: their schemas are checked, not their output
NOT_RUN_HERE = {"topics fetch", "prebuilt fetch", "judge nuggets"}


class Checked:
    """``ragnarok ARGS --output json`` run in this process; each envelope validated, its command noted."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.last: dict[str, Any] = {}

    def __call__(self, *args: object, code: int | None = 0) -> Any:
        got = CliRunner().invoke(app, [str(a) for a in args])
        assert code is None or got.exit_code == code, (args, got.exit_code, got.stdout[-2000:], got.stderr[-2000:])
        envelope = json.loads(got.stdout)
        jsonschema.validate(envelope, envelope_schema())
        jsonschema.validate(envelope["result"], result_schema(envelope["command"]))
        self.seen.add(envelope["command"])
        self.last = envelope
        return envelope["result"]


def test_every_result_schema_is_a_command_with_output_json():
    jsonschema.Draft202012Validator.check_schema(envelope_schema())
    for command in RESULTS:
        jsonschema.Draft202012Validator.check_schema(result_schema(command))
    import typer

    enveloped = {
        path
        for path, command in commands(typer.main.get_command(app))
        if any(p.name == "output_format" for p in command.params)
    }
    assert enveloped == set(RESULTS)
    for path, command in commands(typer.main.get_command(app)):  # --output is a file or the format, never both
        flags = [flag for p in command.params for flag in getattr(p, "opts", [])]
        assert len(flags) == len(set(flags)), (path, sorted(flags))


def field_types(schema: Any, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each property name under ``schema`` (at any depth) -> the JSON types it is given (null aside)."""
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            found.setdefault(name, set()).update(json_types(sub))
        for value in schema.values():
            field_types(value, found)
    elif isinstance(schema, list):
        for value in schema:
            field_types(value, found)
    return found


def json_types(schema: dict) -> set[str]:
    if "anyOf" in schema:
        return set().union(*(json_types(s) for s in schema["anyOf"]))
    if "enum" in schema:
        return {type(v).__name__.replace("str", "string") for v in schema["enum"]}
    return {schema["type"]} - {"null"} if "type" in schema else set()


def test_a_field_has_one_type_in_every_command():
    found: dict[str, set[str]] = {}
    for command in RESULTS:
        field_types(RESULTS[command], found)
    mixed = {name: types for name, types in found.items() if len(types) > 1}
    assert not mixed, mixed
    assert found["failed"] == {"array"} and found["period_s"] == {"integer"}


@pytest.fixture
def check() -> Checked:
    return Checked()


def test_every_command_gives_its_schema(demo_data_env, tmp_path, monkeypatch, check):
    run = tmp_path / "bm25.txt"
    check("search", "--topics", "demo", "--output", run, "--k", "20", "--output-format", "json")
    scored = check("eval", "demo", run, "--output", "json")
    assert isinstance(scored["runs"][0]["scores"]["nDCG@10"], float)
    check("compare", run, tmp_path / "bm25.txt", "--name", "a", "--name", "b", "--topics", "demo", "--qrels", "demo",
          "--save", tmp_path / "experiment.json", "--output", "json")  # fmt: skip
    differing = check("view", "--experiment", tmp_path / "experiment.json", "--output", "json")
    assert differing["metric"] and {row["name"] for row in differing["per_topic"]} == {"a", "b"}

    topics, answers = tmp_path / "two.tsv", tmp_path / "ext.jsonl"
    topics.write_text("demo-01\thow do I parse command-line arguments\ndemo-02\tcompress a file with gzip\n")
    ran = check("run", "--topics", topics, "--pipeline", "bm25@20 | extractive", "--output", answers,
                "--output-format", "json")  # fmt: skip
    assert ran["failed"] == []
    check("validate", answers, "--topics", topics, "--output", "json")
    viewed = check("view", answers, "--output", "json")
    assert [t["qid"] for t in viewed["topic_answers"]] == ["demo-01", "demo-02"]
    assert all(viewed["segment_texts"][d] for a in viewed["topic_answers"] for d in a["answers"][0]["references"])
    check("convert", "trec25-format", answers, tmp_path / "ext25.jsonl", "--output", "json")
    check("judge", "pairwise", answers, answers, "--output-format", "json")
    check("judge", "relevance", run, "--topics", "demo", "--output", tmp_path / "new.qrels", "--depth", "2",
          "--output-format", "json")  # fmt: skip

    a = _answers(tmp_path / "a.jsonl", ["1", "2", "3"])
    b = _answers(tmp_path / "b.jsonl", ["1", "2", "3"])
    rag = check("eval-rag", a, b, "--nuggets", _nuggets(tmp_path / "n.jsonl", ["1", "2"]), "--output", "json")
    assert rag["runs"][0]["topics"] == 2 and rag["paired_tests"][0]["run_b"] == "b.jsonl"
    assert any("skipped 1 topics without nuggets" in w for w in check.last["warnings"])  # said on stderr too

    listed = check("topics", "list", "--output", "json")
    assert {"name": "demo", "available": True, "aliases": []} in listed
    check("schema", "--output", "json")
    assert check("schema", "result", "keys", "list", "--output", "json")["items"]["properties"]["period_s"]
    described = check("describe", "--output", "json")
    assert {"search", "keys list", "describe"} <= {d["command"] for d in described}
    check("doctor", "--output", "json", code=None)
    check("index", "--demo", "--output", "json")
    check("prebuilt", "list", "msmarco-v2.1", "--output", "json")

    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"docid": f"d{i}", "title": "t", "body": "One. Two. Three."}) + "\n" for i in range(3))
    )
    check("collection", "segment", docs, tmp_path / "segments.jsonl", "--workers", "1", "--output", "json")
    check("collection", "dedup", docs, tmp_path / "kept.jsonl", "--workers", "1", "--output", "json")

    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(tmp_path / "keys"))  # keys of this test's own
    get_settings.cache_clear()
    search = tmp_path / "search.yaml"  # the demo index by its path: the preset is saved in this test's data dir
    search.write_text(
        f"index: {demo_data_env.demo_index_dir}\ntopics: demo\nqrels: demo\nobjective: nDCG@10\nbudget: {{trials: 2}}\n"
        "nodes:\n  - node: lexical\n    modules: [{module: bm25, k1: [0.9, 1.2]}]\n"
        "  - node: retrieval\n    modules: [{module: lexical, depth: 20}]\n"
    )
    best = check("optimize", search, "--output", tmp_path / "report", "--output-format", "json")
    assert best["best_spec"].startswith("bm25") and best["folds"][0]["topics"] == 25
    made = check("keys", "create", "--name", "team-a", "--scopes", "retrieve", "--output", "json")
    assert made["secret"].startswith(made["prefix"])
    keys = check("keys", "list", "--output", "json")
    assert keys[0]["period_s"] == 86400 and isinstance(keys[0]["period_s"], int)
    check("keys", "usage", "--output", "json")
    check("keys", "revoke", "team-a", "--output", "json")
    assert check.seen == set(RESULTS) - NOT_RUN_HERE - {"prompt"}


def test_prompt_lists_the_contexts_in_its_prompt(stub, check):  # noqa: F811 - the fixture
    sent = check("prompt", "--generator", "stub", "--topics", "demo", "--qid", "demo-02", "--pipeline", "bm25@20",
                 "--output", "json")  # fmt: skip
    assert len(sent["contexts"]) == 5 and "[5]" in sent["messages"][1]["content"]  # the generator's max_contexts


def test_describe_reads_the_commands():
    """``describe``: each command's options as data, read from the command itself (so always its --help's)."""
    runner = CliRunner()
    described = json.loads(runner.invoke(app, ["describe", "search", "--output", "json"]).stdout)["result"]
    assert [d["command"] for d in described] == ["search"] and described[0]["output_json"]
    options = {o["name"]: o for o in described[0]["options"]}
    assert options["topics"]["required"] and options["topics"]["flags"] == ["--topics"]
    assert options["retriever"]["default"] == "bm25" and options["k"]["type"].startswith("int")
    assert options["verbose"]["type"] == "flag" and options["verbose"]["default"] is False
    assert described[0]["examples"] and all(e.startswith("ragnarok search ") for e in described[0]["examples"])
    group = runner.invoke(app, ["describe", "keys"])  # a group: each of its commands, as text
    assert group.exit_code == 0 and "ragnarok keys list: " in group.stdout and "ragnarok keys create: " in group.stdout
    import typer

    from ragnarok.cli.describe import EXAMPLES

    assert set(EXAMPLES) == {path for path, _ in commands(typer.main.get_command(app))}  # one entry per command
    unknown = runner.invoke(app, ["describe", "serach"])
    assert unknown.exit_code == 2 and "did you mean 'search'?" in unknown.stderr
