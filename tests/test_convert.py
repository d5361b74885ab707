"""``ragnarok convert trec25-format``: 2024 answers in the 2025 format, prompts added from a file in castorini's
shape, the output passing our validator and the official 2025 checker (restated in test_track_parity), written
at once and never over its input."""

from __future__ import annotations

import json

import pytest
from test_track_parity import SEGS, official_2025, write_lines
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.topics import read_tsv
from ragnarok.core.types import CitedSentence, RagAnswer
from ragnarok.track.formats import answer_record
from ragnarok.track.validate import validate

cli = CliRunner()


def theirs(record: dict, prompts: dict[str, str], team_id: str) -> dict:
    """castorini/ragnarok's convert_record (trec25_conversion.py), restated, for a line with every field."""
    metadata = {
        "team_id": team_id,
        "run_id": record["run_id"],
        "type": "automatic",
        "narrative_id": record["topic_id"],
        "narrative": record["topic"],
    }
    if record["topic_id"] in prompts:
        metadata["prompt"] = prompts[record["topic_id"]]
    return {"metadata": metadata, "references": record["references"], "answer": record["answer"]}


def test_a_2024_run_converts_to_what_both_validators_accept(shared_data, tmp_path):
    topics = read_tsv(shared_data / "trec-rag" / "topics.rag24.test.txt")[:12]
    expected = {t.qid: t.text for t in topics}
    lines = [
        answer_record(
            RagAnswer(
                topic_id=t.qid,
                topic=t.text,
                references=SEGS[:5],
                answer=[CitedSentence(text=f"{t.text} is answered.", citations=[0, 2])],
            ),
            year=2024,
            run_id="r24",
            topic_text=t.text,
        )
        for t in topics
    ]
    lines[1]["references"] = SEGS[:3] + SEGS[:3]  # repeated: the 2025 validator would fix them
    lines[2]["answer"][0]["citations"] = [0, 9]  # 9 is outside references
    lines[3]["answer"] = [{"text": "word " * 150, "citations": [1]}] * 3  # 450 words
    run = write_lines(tmp_path / "run24.jsonl", lines)
    before = run.read_bytes()
    messages = [{"role": "system", "content": "You answer."}, {"role": "user", "content": "QUESTION: x"}]
    prompts = write_lines(
        tmp_path / "prompts.jsonl",
        [  # castorini's rag_exec_summary shape, messages or text
            {"query": {"qid": topics[0].qid, "text": topics[0].text}, "rag_exec_summary": {"prompt": messages}},
            {"query": {"qid": topics[4].qid}, "rag_exec_summary": {"prompt": "system: You answer.\n\nuser: y"}},
        ],
    )
    out = tmp_path / "run25.jsonl"
    got = cli.invoke(
        app, ["convert", "trec25-format", str(run), str(out), "--prompts", str(prompts), "--team-id", "team"]
    )
    assert got.exit_code == 0, got.output
    assert "12 lines converted to the 2025 format, 2 with a prompt, 1 out-of-range citations dropped" in got.stdout
    assert "warning: 10 of 12 topics have no prompt" in got.stderr
    assert run.read_bytes() == before
    converted = [json.loads(line) for line in out.read_text().splitlines()]
    assert converted[0]["metadata"]["prompt"] == "system: You answer.\n\nuser: QUESTION: x"
    ours = validate(out, expected)
    assert ours.ok and ours.year == 2025, [str(p) for p in ours.errors]
    assert [p.message for p in ours.warnings] == ["optional field 'prompt' is missing from metadata"] * 10
    assert official_2025(out, expected) == ([], [])  # nothing left for its fixes either
    clean = [i for i in range(12) if i not in (1, 2, 3)]  # as castorini's converter writes them
    given = {topics[0].qid: converted[0]["metadata"]["prompt"], topics[4].qid: "system: You answer.\n\nuser: y"}
    assert [converted[i] for i in clean] == [theirs(lines[i], given, "team") for i in clean]
    assert converted[1]["references"] == SEGS[:3] and converted[2]["answer"][0]["citations"] == [0]
    assert sum(len(s["text"].split()) for s in converted[3]["answer"]) == 400


def test_a_real_run_converts(shared_data, tmp_path):
    out = tmp_path / "gold25.jsonl"
    got = cli.invoke(
        app, ["convert", "trec25-format", str(shared_data / "judge-dev" / "runs" / "gold.jsonl"), str(out)]
    )
    assert got.exit_code == 0, got.output
    result = cli.invoke(app, ["validate", str(out), "--topics", "demo"])
    assert result.exit_code == 0 and "valid TREC RAG 2025 run, 16 lines, 0 errors" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"metadata": {"run_id": "r"}, "references": [], "answer": []}\n', "line 1 is already in the 2025 format"),
        (
            '{"run_id": "r", "topic_id": "1", "topic": "x", "references": []}\n',
            "line 1 is not a 2024 answer: no answer",
        ),
        (
            '{"run_id": "r", "topic_id": "1", "topic": "x", "references": [], "answer": []}\nnot json\n',
            "line 2 is not JSON",
        ),
    ],
)
def test_bad_input_writes_nothing(tmp_path, content, message):
    run = tmp_path / "in.jsonl"
    run.write_text(content)
    out = tmp_path / "out.jsonl"
    got = cli.invoke(app, ["convert", "trec25-format", str(run), str(out)])
    assert got.exit_code == 2 and got.stderr.startswith("error: ") and message in got.stderr, got.stderr
    assert not out.exists() and run.read_text() == content
    got = cli.invoke(app, ["convert", "trec25-format", str(run), str(run)])
    assert got.exit_code == 2 and "is the input" in got.stderr and run.read_text() == content
