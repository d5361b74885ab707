"""The Python API (ragnarok.rag / retrieve / search / evaluate / Pipeline): the same answers, runs and scores as
``POST /rag`` and the CLI, a pipeline loaded once, the CLI's errors; and ``import ragnarok`` stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragnarok
from ragnarok.cli.main import app
from ragnarok.core.registry import UnknownComponentError
from ragnarok.core.topic_sets import UnknownTopicSetError

ROOT = Path(__file__).resolve().parent.parent
SPEC = "bm25@20 | extractive"


def test_import_ragnarok_is_cheap_and_the_submodules_still_work():
    code = (
        "import sys, ragnarok; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('ragnarok', 'pydantic', 'torch', 'httpx', 'jnius'))); "
        "import ragnarok.stages.retrieve.vectors as v, ragnarok.core.evaluation as e; "
        "from ragnarok import evaluate; import ragnarok.api as api; "
        "print(callable(ragnarok.retrieve), callable(ragnarok.evaluate), e.read_qrels.__name__, "
        "evaluate is api.evaluate, v.__name__, sorted(set(ragnarok.__all__) - set(dir(ragnarok))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        check=True,
    ).stdout.splitlines()
    assert out[0] == "['ragnarok']"  # nothing else loads, nothing is read
    assert out[1] == "True True read_qrels True ragnarok.stages.retrieve.vectors []"


@pytest.fixture(scope="module")
def pipeline(demo_settings):
    with ragnarok.Pipeline(SPEC, settings=demo_settings) as p:
        yield p


def test_rag_gives_what_post_rag_gives_and_loads_once(pipeline, demo_settings):
    from fastapi.testclient import TestClient

    from api.main import create_app

    topic = "how do I compress a file with gzip"
    answer = pipeline.rag(topic, topic_id="demo-01")
    services = pipeline._services
    assert pipeline.rag(topic, topic_id="demo-01") == answer and pipeline._services is services  # not reloaded
    with TestClient(create_app(demo_settings, arena=False)) as client:
        body = client.post("/rag", json={"topic": topic, "topic_id": "demo-01", "pipeline": SPEC})
    assert body.status_code == 200, body.text
    assert json.loads(answer.model_dump_json(exclude_none=True)) == body.json()
    assert answer.references and answer.answer[0].citations
    # the module's functions keep one pipeline per spec: a second call reuses it
    first = ragnarok.api.pipeline_for(SPEC, settings=demo_settings)
    assert ragnarok.rag(topic, pipeline=SPEC, topic_id="demo-01", settings=demo_settings) == answer
    assert ragnarok.api.pipeline_for(SPEC, settings=demo_settings) is first
    ranking = ragnarok.retrieve(topic, k=5, pipeline=pipeline)
    assert [c.docid for c in ranking.candidates][:1] == answer.references[:1] and len(ranking.candidates) == 5
    assert len(ragnarok.retrieve(topic, k=50, pipeline="bm25", settings=demo_settings).candidates) == 50


def test_search_and_evaluate_match_the_cli(pipeline, demo_settings, tmp_path, monkeypatch):
    from ragnarok.core.settings import get_settings
    from ragnarok.core.trec import write_run

    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
    get_settings.cache_clear()
    try:
        run = ragnarok.search("demo", pipeline="bm25@100", settings=demo_settings)
        assert len(run) == 50 and all(len(hits) == 100 for hits in run.values())
        cli_run = tmp_path / "cli.txt"
        out = CliRunner().invoke(
            app, ["search", "--topics", "demo", "--pipeline", "bm25@100", "--output", str(cli_run), "--run-id", "api"]
        )
        assert out.exit_code == 0, out.output
        write_run(tmp_path / "api.txt", {q: list(hits.items()) for q, hits in run.items()}, "api")
        assert (tmp_path / "api.txt").read_bytes() == cli_run.read_bytes()
        scores = ragnarok.evaluate(run, qrels="demo", settings=demo_settings)
        table = CliRunner().invoke(app, ["eval", "demo", str(cli_run), "--run-name", "api"]).output
        assert table.split("\n")[-2].split()[1:] == [
            f"{scores[m]:.4f}" for m in ("nDCG@10", "MAP@100", "Recall@100", "MAP")
        ]
        assert ragnarok.evaluate(cli_run, qrels=ROOT / "topics" / "qrels.demo.txt") == scores
    finally:
        get_settings.cache_clear()
    answers = [
        pipeline.rag(text, topic_id=qid)
        for qid, text in [("demo-01", "compress a file with gzip"), ("demo-02", "run a shell command")]
    ]
    nuggets = ragnarok.evaluate(
        answers, nuggets=ROOT / "topics" / "eval" / "demo.nuggets.jsonl", settings=demo_settings
    )
    assert set(nuggets) == {"strict_vital", "vital", "strict_all", "all"}
    assert all(0 <= v <= 1 for v in nuggets.values())


def test_bad_input_raises_the_clis_errors(pipeline, demo_settings):
    with pytest.raises(UnknownComponentError, match=r"did you mean 'extractive'\?"):
        ragnarok.Pipeline("bm25@20 | extractiv", settings=demo_settings)
    with pytest.raises(UnknownTopicSetError, match=r"did you mean 'demo'\?"):
        pipeline.search("dmeo")
    with pytest.raises(ValueError, match="no generation stage"):
        ragnarok.rag("a question", pipeline="bm25@10", settings=demo_settings)
    with pytest.raises(ValueError, match="give qrels= .* or nuggets="):
        ragnarok.evaluate({"q": {"d": 1.0}})
    with pytest.raises(ValueError, match="non-empty string"):
        pipeline.retrieve("  ")
