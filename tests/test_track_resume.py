"""Resumes and names: ``ragnarok run`` resumed with another pipeline is refused (the difference shown)
unless ``--restart``, which moves the old output aside and says so; a misspelt passage stage (``neighbors``)
gets a did-you-mean, from the command line and from ``POST /rag``."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from test_track_parity import GIVEN, write_lines
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings

cli = CliRunner()


@pytest.fixture(autouse=True)
def _fresh_settings():
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_another_pipeline_is_refused_and_restart_moves_the_old_output_aside(tmp_path):
    given = write_lines(tmp_path / "given.jsonl", GIVEN)
    out = tmp_path / "run.jsonl"
    base = ["run", "--requests", str(given), "--run-id", "r", "--output", str(out)]
    first = cli.invoke(app, [*base, "--pipeline", "extractive"])
    assert first.exit_code == 0, first.output
    out.write_bytes(out.read_bytes().splitlines(keepends=True)[0])  # one topic kept: a resume has one to run
    before = out.read_bytes()

    other = cli.invoke(app, [*base, "--pipeline", "given@1 | extractive"])
    errors = _errors(other.output)
    assert other.exit_code == 2 and len(errors) == 1, other.output
    assert "`given@10000 | extractive` -> `given@1 | extractive`" in errors[0], errors[0]
    assert "--restart" in errors[0]
    assert out.read_bytes() == before  # nothing mixed in

    same = cli.invoke(app, [*base, "--pipeline", "extractive"])  # the same pipeline resumes
    assert same.exit_code == 0 and "1 topics written, 1 already done" in same.output, same.output
    whole = out.read_bytes()

    restarted = cli.invoke(app, [*base, "--pipeline", "given@1 | extractive", "--restart"])
    assert restarted.exit_code == 0, restarted.output
    assert f"moved {out} aside to {out}.old" in restarted.output
    assert "2 topics written, 0 already done" in restarted.output
    assert (tmp_path / "run.jsonl.old").read_bytes() == whole  # the old output whole, beside the new one
    assert json.loads((tmp_path / "run.jsonl.pipeline.json").read_text())["pipeline"] == "given@1 | extractive"
    assert json.loads((tmp_path / "run.jsonl.old.pipeline.json").read_text())["pipeline"] == "given@10000 | extractive"

    again = cli.invoke(app, [*base, "--pipeline", "extractive", "--restart"])  # nothing is overwritten
    assert again.exit_code == 0 and f"moved {out} aside to {out}.old2" in again.output, again.output
    assert (tmp_path / "run.jsonl.old").read_bytes() == whole


def test_a_misspelt_passage_stage_gets_a_suggestion_in_the_cli(tmp_path):
    given = write_lines(tmp_path / "given.jsonl", GIVEN)
    out = tmp_path / "run.jsonl"
    result = cli.invoke(
        app,
        ["run", "--requests", str(given), "--pipeline", "given@10 | neighbors@5 | extractive", "--output", str(out)],
    )
    errors = _errors(result.output)
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert "unknown reranker 'neighbors'" in errors[0] and "did you mean 'neighbours'?" in errors[0], errors[0]
    assert not out.exists()


def test_a_misspelt_passage_stage_gets_a_suggestion_from_the_api(tmp_path):
    from test_index_lifecycle import docs

    from api.main import create_app
    from ragnarok.collection.lucene_index import index_documents
    from ragnarok.core.settings import Settings

    index_documents(iter(docs(4)), tmp_path / "idx")
    settings = Settings(data_dir=tmp_path / "data", indexes={"x": str(tmp_path / "idx")}, default_index="x")
    with TestClient(create_app(settings, arena=False)) as client:
        for spec, wanted in [
            ("bm25@10 | neighbors@5 | extractive", "'neighbours'"),
            ("bm25@10 | automerg@5 | extractive", "'automerge'"),
            ("bm25@10 | mono5@5 | extractive", "'monot5'"),
        ]:
            answer = client.post("/rag", json={"topic": "alpha", "pipeline": spec})
            assert answer.status_code == 404, answer.text
            assert f"did you mean {wanted}?" in answer.text, answer.text


def test_a_bad_request_line_names_what_is_wrong(tmp_path):
    from ragnarok.track.run import read_requests

    path = tmp_path / "given.jsonl"
    path.write_text(json.dumps({"query": {"text": "x", "qid": "q1"}, "candidates": "nope"}) + "\n")
    with pytest.raises(ValueError) as error:
        read_requests(path)
    assert f"{path}:1: not a rank_llm Request line (candidates: " in str(error.value), error.value
    path.write_text('{"query": \n')
    with pytest.raises(ValueError) as error:
        read_requests(path)
    assert "(Invalid JSON: " in str(error.value) and "\n" not in str(error.value), error.value
