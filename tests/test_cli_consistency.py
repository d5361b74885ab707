"""Smaller CLI defects: eval-rag's --run-name and runs over different topics, validate on a
ranking file, outputs in topic order, the run tag of a --pipeline search, help that describes every option and
types no flag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.cli.search import run_tag
from ragnarok.core.spec import parse
from ragnarok.track.output import in_topic_order


def _answers(path: Path, qids: list[str]) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "run_id": "r",
                    "topic_id": q,
                    "topic": f"topic {q}",
                    "references": [],
                    "answer": [{"text": f"gzip compresses files {q}.", "citations": []}],
                }
            )
            + "\n"
            for q in qids
        )
    )
    return path


def _nuggets(path: Path, qids: list[str]) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {"qid": q, "query": f"topic {q}", "nuggets": [{"text": "gzip compresses files", "importance": "vital"}]}
            )
            + "\n"
            for q in qids
        )
    )
    return path


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_run_name_takes_one_name_per_option(tmp_path):
    a, b = _answers(tmp_path / "a.jsonl", ["1", "2"]), _answers(tmp_path / "b.jsonl", ["1", "2"])
    nuggets = _nuggets(tmp_path / "n.jsonl", ["1", "2"])
    out = CliRunner().invoke(app, ["eval-rag", str(a), str(b), "--nuggets", str(nuggets), "--run-name", "x", "y"])
    errors = _errors(out.output)
    assert out.exit_code == 2 and len(errors) == 1, out.output
    assert "1 --run-name for 3 runs" in errors[0] and "y: no such run file" in errors[0]
    assert "--run-name a --run-name b" in errors[0]
    out = CliRunner().invoke(
        app, ["eval-rag", str(a), str(b), "--nuggets", str(nuggets), "--run-name", "x", "--run-name", "x"]
    )
    assert out.exit_code == 2 and "distinct" in _errors(out.output)[0]
    out = CliRunner().invoke(
        app, ["eval-rag", str(a), str(b), "--nuggets", str(nuggets), "--run-name", "x", "--run-name", "y"]
    )
    assert out.exit_code == 0, out.output
    assert any(line.startswith("x ") for line in out.output.splitlines())


def test_eval_rag_compares_runs_on_their_shared_topics(tmp_path):
    many = _answers(tmp_path / "many.jsonl", [str(i) for i in range(1, 9)])
    few = _answers(tmp_path / "few.jsonl", ["2", "3", "4"])
    nuggets = _nuggets(tmp_path / "n.jsonl", [str(i) for i in range(1, 9)])
    out = CliRunner().invoke(app, ["eval-rag", str(many), str(few), "--nuggets", str(nuggets)])
    assert out.exit_code == 0, out.output
    assert "compared on the 3 topics all of them scored; left out: many.jsonl: 5 (1, 5, 6, 7, 8)" in out.output
    rows = [line.split() for line in out.output.splitlines() if line.startswith(("many.jsonl", "few.jsonl"))]
    assert [row[1] for row in rows[:2]] == ["3", "3"], rows  # the topics column: the same topics
    assert "over 3" in out.output  # the paired test too


def test_validate_says_a_ranking_file_is_one(tmp_path):
    ranking = tmp_path / "run.trec"
    ranking.write_text("".join(f"{q} Q0 doc{d} {d} {10 - d}.5 bm25\n" for q in range(1, 50) for d in range(1, 9)))
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "validate", str(ranking)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode != 0
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is a TREC ranking file" in lines[0], out.stderr[-2000:]
    assert "ragnarok eval" in lines[0]


def test_validate_still_checks_answer_files(tmp_path):
    from ragnarok.track.validate import validate

    result = validate(_answers(tmp_path / "a.jsonl", ["1"]))
    assert result.lines == 1


def test_a_log_is_rewritten_in_topic_order(tmp_path):
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps({"topic_id": q}) + "\n" for q in ["3", "1", "x", "2"]) + '{"topic_id": "4"')
    topic_of = lambda record: record.get("topic_id")  # noqa: E731
    assert in_topic_order(log, ["1", "2", "3", "4"], topic_of)
    lines = log.read_text().split("\n")
    assert [json.loads(line)["topic_id"] for line in lines[:4]] == ["1", "2", "3", "x"]  # unknown ones last
    assert lines[4] == '{"topic_id": "4"'  # a torn last line is left where it was
    assert not in_topic_order(log, ["1", "2", "3", "4"], topic_of)  # in order already: not rewritten
    assert not in_topic_order(tmp_path / "none.jsonl", ["1"], topic_of)


def test_run_tags_of_pipelines():
    assert run_tag(parse("bm25@10")) == "bm25-10"
    assert run_tag(parse("rrf(bm25, dense:minilm)@100 | mmr:0.5@10")) == "rrf-bm25-dense-minilm-100-mmr-0.5-10"
    long_a = run_tag(parse("rrf(bm25+rocchio, dense:minilm, dense:arctic-l)@1000 | monot5@100 | crossencoder@20"))
    long_b = run_tag(parse("rrf(bm25+rocchio, dense:minilm, dense:arctic-l)@1000 | monot5@100 | crossencoder@10"))
    assert len(long_a) <= 48 and long_a != long_b and " " not in long_a


@pytest.mark.parametrize(
    ("command", "wanted"),
    [
        (["search"], ["Java search threads"]),
        (["run"], ["Show a progress bar"]),
        (["judge", "nuggets"], ["lowest relevance grade", "most nuggets kept per topic"]),
    ],
)
def test_help_describes_options_and_types_no_flag(command, wanted):
    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    for phrase in wanted:
        assert phrase in text, out.output
    assert "<bool>" not in out.output, out.output


def test_search_pipeline_writes_topics_in_order_with_a_spec_tag(tmp_path):
    from test_index_lifecycle import docs

    from ragnarok.collection.lucene_index import index_documents

    index_documents(iter(docs(15)), tmp_path / "idx")
    topics = tmp_path / "t.tsv"
    topics.write_text(
        "".join(
            f"{q}\t{w} topic\n"
            for q, w in zip(["9", "3", "12", "1", "7", "5"], ["alpha", "bravo", "echo", "golf", "kilo", "lima"])
        )
    )
    outputs = []
    for n in range(2):
        outputs.append(tmp_path / f"run{n}.txt")
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "ragnarok.cli",
                "search",
                "--topics",
                str(topics),
                "--index",
                str(tmp_path / "idx"),
                "--pipeline",
                "rrf(bm25, bm25+rm3)@5",
                "--threads",
                "6",
                "--output",
                str(outputs[-1]),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-2000:]
    lines = outputs[0].read_text().splitlines()
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    assert list(dict.fromkeys(line.split()[0] for line in lines)) == ["9", "3", "12", "1", "7", "5"]
    assert {line.split()[5] for line in lines} == {"rrf-bm25-bm25+rm3-5"}


def test_run_writes_its_answers_in_topic_order(demo_settings, tmp_path, monkeypatch):
    from fakes import flaky_openai_app
    from servers import serve_app

    from ragnarok.core.settings import get_settings
    from ragnarok.core.topics import load_topics
    from ragnarok.track.cli import TOPICS_DIR

    with serve_app(flaky_openai_app()) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "slow200",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "fixed-200ms",
                        "max_concurrency": 16,
                    }
                ]
            ),
        )
        get_settings.cache_clear()
        try:
            outputs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
            for output in outputs:
                out = CliRunner().invoke(
                    app,
                    [
                        "run",
                        "--topics",
                        "demo",
                        "--pipeline",
                        "bm25@20 | slow200",
                        "--output",
                        str(output),
                        "--concurrency",
                        "16",
                    ],
                )
                assert out.exit_code == 0, out.output
        finally:
            get_settings.cache_clear()
    order = [t.qid for t in load_topics("demo", TOPICS_DIR)]
    written = [json.loads(line)["topic_id"] for line in outputs[0].read_text().splitlines()]
    assert written == order
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
