"""Unknown component names: every spec `search` and `run` are given is checked as `/rag` checks it,
before anything slow, and an unknown name fails with one line that suggests the closest known name; the API's
404s for unknown components suggest it too."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from ragnarok.core.registry import UnknownComponentError, suggest


@pytest.mark.parametrize(
    ("name", "available", "expected"),
    [
        ("extractiv", ["extractive", "gpt-4o"], "extractive"),
        ("mono5", ["crossencoder", "mmr", "monot5"], "monot5"),
        ("bm25+rm4", ["bm25", "bm25+rm3", "bm25+rocchio", "dense:MODEL"], "bm25+rm3"),
        ("dens:minilm", ["bm25", "dense:MODEL"], "dense:MODEL"),
        ("nope", ["bm25", "bm25+rm3", "dense:MODEL"], None),
        ("x" * 10_000, ["bm25"], None),
    ],
)
def test_suggestions(name, available, expected):
    assert suggest(name, available) == expected
    message = str(UnknownComponentError("thing", name, available))
    assert ("did you mean" in message) == (expected is not None)
    if expected:
        assert message.endswith(f"did you mean {expected!r}?")


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.mark.parametrize(
    ("command", "spec", "message"),
    [
        ("search", "bm25@10 | extractiv", "unknown generator 'extractiv'"),
        ("search", "bm25@10 | mono5@5", "unknown reranker 'mono5'"),
        ("search", "hide:extractive > bm25@10", "unknown query stage 'hide'"),
        ("search", "rrf(bm25, dense:minlm)@10", "unknown embedding model 'minlm'"),
        ("run", "bm25@10 | extractiv", "unknown generator 'extractiv'"),
        ("run", "rrf(bm25, dense:minlm)@10 | extractive", "unknown embedding model 'minlm'"),
    ],
)
def test_cli_refuses_unknown_names_with_a_suggestion(command, spec, message, tmp_path):
    (tmp_path / "t.tsv").write_text("1\talpha\n")
    output = tmp_path / "out.txt"
    out = _cli(command, "--topics", str(tmp_path / "t.tsv"), "--pipeline", spec, "--output", str(output), cwd=tmp_path)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert message in errors[0] and "did you mean" in errors[0], errors[0]
    assert not output.exists()
    assert "running the pipeline" not in out.stderr  # refused before anything ran


def test_api_404s_suggest_names(tmp_path):
    from test_index_lifecycle import docs

    from api.main import create_app
    from ragnarok.collection.lucene_index import index_documents
    from ragnarok.core.settings import Settings

    index_documents(iter(docs(4)), tmp_path / "idx")
    settings = Settings(data_dir=tmp_path / "data", indexes={"x": str(tmp_path / "idx")}, default_index="x")
    with TestClient(create_app(settings, arena=False)) as client:
        for spec, wanted in [
            ("bm25@10 | extractiv", "'extractive'"),
            ("bm25+rm4@10 | extractive", "'bm25+rm3'"),
            ("bm25@10 | mono5@5 | extractive", "'monot5'"),
        ]:
            answer = client.post("/rag", json={"topic": "alpha", "pipeline": spec})
            assert answer.status_code == 404, answer.text
            assert f"did you mean {wanted}?" in answer.text, answer.text
        answer = client.post("/v1/retrieve", json={"query": "alpha", "retriever": "bm2"})
        assert answer.status_code == 404 and "did you mean 'bm25'?" in answer.json()["detail"]
        answer = client.post("/v1/retrieve", json={"query": "alpha", "index": "z"})
        assert answer.status_code == 404 and "did you mean" not in answer.json()["detail"]


def test_saved_presets_are_listed_with_the_built_in_ones(tmp_path):
    """GET /v1/pipelines lists the presets `ragnarok optimize` saved in the data directory."""
    from fastapi.testclient import TestClient

    from api.main import create_app
    from ragnarok.core.presets import PRESETS, save_preset
    from ragnarok.core.settings import Settings

    settings = Settings(data_dir=tmp_path)
    save_preset("my-best", "bm25@50 | extractive", tmp_path)
    with TestClient(create_app(settings, arena=False)) as client:
        listed = client.get("/v1/pipelines").json()
    assert listed["my-best"] == "bm25@50 | extractive" and all(listed[k] == v for k, v in PRESETS.items())
