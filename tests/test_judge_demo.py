"""The judges' commands on the real demo index with the proxy judge: nuggets from qrels, citation support
of segments read from Lucene, relevance labels written as qrels, the shipped demo evaluation data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_the_demo_evaluation_data_covers_30_topics():
    from ragnarok.core.topics import load_topics
    from ragnarok.judge.nuggets import read_nuggets
    from ragnarok.judge.reference import read_references

    topics = {t.qid: t.text for t in load_topics(ROOT / "topics" / "demo.tsv")}
    nuggets = read_nuggets(ROOT / "topics" / "eval" / "demo.nuggets.jsonl")
    refs = read_references(str(ROOT / "topics" / "eval" / "demo.references.jsonl"))
    assert len(nuggets) >= 30 and set(nuggets) == set(refs) <= set(topics)
    for qid, topic in nuggets.items():
        assert topic.query == topics[qid]
        assert any(n.importance == "vital" for n in topic.nuggets)


def test_nuggets_from_document_level_qrels(demo_data_env, tmp_path):
    topics = tmp_path / "t.tsv"
    topics.write_text("demo-01\thow do I parse command-line arguments\ndemo-02\tcompress a file with gzip\n")
    out = tmp_path / "n.jsonl"
    result = invoke(
        "judge",
        "nuggets",
        "--topics",
        topics,
        "--qrels",
        ROOT / "topics" / "qrels.demo.txt",
        "--min-grade",
        2,
        "--output",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "PROXY" in result.output
    made = [json.loads(line) for line in out.read_text().splitlines()]
    assert [m["qid"] for m in made] == ["demo-01", "demo-02"]
    for m in made:
        assert 1 <= len(m["nuggets"]) <= 30 and m["nuggets"][0]["importance"] == "vital"
    assert any("argparse" in n["text"] for n in made[0]["nuggets"])


def test_support_reads_the_cited_segments(demo_data_env, tmp_path):
    from ragnarok.judge.answers import lucene_segments

    segments = lucene_segments(demo_data_env.demo_index_dir)
    argparse_text = segments("stdlib.argparse#0_0")
    assert argparse_text and segments("no-such-segment") is None
    gzip_id = "stdlib.gzip#0_0"
    assert segments(gzip_id)
    sentence = argparse_text.split(". ")[0]
    run = tmp_path / "run.jsonl"
    run.write_text(
        json.dumps(
            {
                "run_id": "r",
                "topic_id": "demo-01",
                "topic": "parse arguments",
                "references": ["stdlib.argparse#0_0", gzip_id, "missing#0"],
                "answer": [{"text": sentence, "citations": [0]}, {"text": sentence, "citations": [1, 2]}],
            }
        )
        + "\n"
    )
    out = tmp_path / "a.jsonl"
    result = invoke("eval-rag", run, "--support", "--assignments", out)
    assert result.exit_code == 0, result.output
    scores = json.loads(out.read_text())["scores"]
    # full for the argparse citation, none for gzip, none for the missing segment
    assert scores == {"support_precision": pytest.approx(1 / 3), "support_recall": 0.5}
    assert "1 cited segments not in the index" in result.output


def test_relevance_labels_become_qrels(demo_data_env, tmp_path):
    run = tmp_path / "run.txt"
    run.write_text(
        "demo-02 Q0 stdlib.gzip#0_0 1 9.0 r\ndemo-02 Q0 stdlib.csv#0_0 2 8.0 r\ndemo-02 Q0 missing#0 3 7.0 r\n"
    )
    given = tmp_path / "given.txt"
    given.write_text("demo-02 0 stdlib.csv#0_0 0\n")
    out = tmp_path / "qrels.txt"
    result = invoke("judge", "relevance", run, "--topics", "demo", "--qrels", given, "--output", out)
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert "demo-02 0 stdlib.csv#0_0 0" in lines and len(lines) == 2  # given kept, gzip labelled
    grade = int(next(line for line in lines if "gzip" in line).split()[3])
    assert grade >= 2  # the gzip module page answers "compress a file with gzip"
    assert "missing#0: segment not in the index" in result.output
