"""``validate --fix`` (and ``--apply-fixes``) against the official checkers' fixes: castorini/ragnarok's 2024
checker (``rag24_validation.py``: its ``.fixed`` file) and 2025 validator (``rag25_validation.py`` with
``--fix-length --fix-citations``), restated here as test_track_parity restates their checks, applied to crafted
broken runs and compared line by line with ours."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from test_track_parity import SEGS, official_2025, record_2025, write_lines
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.track.validate import fix, validate

cli = CliRunner()
TOPICS = {"1": "what is x", "2": "what is y", "3": "what is z", "4": "what is w", "5": "what is v"}


def words(text: str) -> int:
    return len(unicodedata.normalize("NFKC", text.strip()).split())


def theirs_2024(path: Path, topics: dict[str, str]) -> list[dict]:
    """The lines of the 2024 checker's RUN.fixed."""
    out = []
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if any(f not in obj for f in ("run_id", "topic_id", "topic", "references", "response_length", "answer")):
            continue
        if obj["topic_id"] not in topics:
            continue
        length, refs = 0, len(obj["references"])
        for sent in obj["answer"]:
            length += words(sent["text"])
            sent["citations"] = list({c for c in sent["citations"] if 0 <= c < refs})  # a set: as theirs
        while length > 400 and obj["answer"]:
            length -= words(obj["answer"].pop()["text"])
        obj["response_length"] = length
        out.append(obj)
    return out


def theirs_2025(path: Path, topics: dict[str, str]) -> list[dict]:
    """The lines of the 2025 validator's RUN.fixed (citation format 1, --fix-length --fix-citations)."""
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        refs = list(dict.fromkeys(entry.get("references", [])))  # repeated ones dropped; citations kept as given
        if len(entry.get("references", [])) != len(refs):
            entry["references"] = refs
        if len(refs) > 100:
            entry["references"] = refs[:100]
            for answer in entry.get("answer", []):
                answer["citations"] = [c for c in answer["citations"] if isinstance(c, int) and 0 <= c < 100]
        length = sum(words(a.get("text", "")) for a in entry.get("answer", []))
        while length > 400 and entry["answer"]:
            length -= words(entry["answer"].pop()["text"])
        md = entry["metadata"]
        if "narrative" not in md:
            md["narrative"] = topics.get(str(md.get("narrative_id", "")), "")
        out.append(entry)
    return out


def ours(run: Path, topics: dict[str, str], year: int) -> list[dict]:
    out = run.with_name(f"{run.stem}.ours.jsonl")
    fix(validate(run, topics, year), out, topics)
    return [json.loads(line) for line in out.read_text().splitlines()]


def sentences(n: int, size: int, cites: list[int]) -> list[dict]:
    return [{"text": " ".join(["word"] * (size - 1)) + f" {i}.", "citations": cites} for i in range(n)]


def line_2024(tid: str, **changes) -> dict:
    return {
        "run_id": "r",
        "topic_id": tid,
        "topic": TOPICS[tid],
        "references": SEGS[:3],
        "response_length": 3,
        "answer": [{"text": "X is so.", "citations": [0, 1]}],
        **changes,
    }


def test_2024_fixes_are_the_official_checkers(tmp_path):
    run = write_lines(
        tmp_path / "run.jsonl",
        [
            line_2024("1"),
            line_2024("2", answer=[{"text": "X is so.", "citations": [0, 0, 1]}]),  # repeated citation
            line_2024("3", answer=[{"text": "X is so.", "citations": [0, 5]}]),  # outside references
            line_2024("4", answer=sentences(3, 150, [0]), response_length=450),  # 450 words
            line_2024("5", response_length=7),  # a wrong response_length
        ],
    )
    theirs = theirs_2024(run, TOPICS)
    assert ours(run, TOPICS, 2024) == theirs
    assert theirs[3]["response_length"] == 300 and len(theirs[3]["answer"]) == 2  # whole sentences went


def test_2025_fixes_are_the_official_validators(tmp_path):
    many = [f"msmarco_v2.1_doc_{i}_{i}#0_{i}" for i in range(120)]
    bare = record_2025("4", "what is w")
    del bare["metadata"]["narrative"]
    run = write_lines(
        tmp_path / "run.jsonl",
        [
            record_2025("1", "what is x"),
            {**record_2025("2", "what is y"), "references": SEGS[:3] + [SEGS[1]]},  # repeated after those cited
            {
                **record_2025("3", "what is z"),
                "references": many,  # 120: the first 100 kept, citation 105 dropped
                "answer": [{"text": "X is so.", "citations": [0, 105]}],
            },
            bare,  # no narrative: the topic's text added
            {**record_2025("5", "what is v"), "answer": sentences(3, 150, [1])},  # 450 words
        ],
    )
    theirs = theirs_2025(run, TOPICS)
    assert ours(run, TOPICS, 2025) == theirs
    assert len(theirs[2]["references"]) == 100 and theirs[2]["answer"][0]["citations"] == [0]
    assert theirs[3]["metadata"]["narrative"] == "what is w" and len(theirs[4]["answer"]) == 2


def test_where_ours_does_more(tmp_path):
    """A repeated reference before a cited one: theirs leaves the citation pointing past the shortened list
    (their own validator then refuses the line); ours remaps it. One sentence over 400 words: theirs leaves no
    answer, ours cuts it to 400."""
    record = {
        **record_2025("1", "what is x"),
        "references": [SEGS[0], SEGS[0], SEGS[1]],
        "answer": [{"text": "X is so.", "citations": [2]}, {"text": " ".join(["w"] * 450), "citations": [0]}],
    }
    run = write_lines(tmp_path / "run.jsonl", [record])
    theirs = write_lines(tmp_path / "theirs.jsonl", theirs_2025(run, TOPICS))
    assert official_2025(theirs, TOPICS)[0]  # citation 2 of 2 references
    mine = ours(run, TOPICS, 2025)
    assert mine[0]["references"] == SEGS[:2] and mine[0]["answer"][0]["citations"] == [1]
    assert official_2025(write_lines(tmp_path / "mine.jsonl", mine), TOPICS) == ([], [])
    one = write_lines(
        tmp_path / "one.jsonl", [line_2024("1", answer=[{"text": " ".join(["w"] * 450), "citations": [0]}])]
    )
    assert theirs_2024(one, TOPICS)[0]["answer"] == []
    assert ours(one, TOPICS, 2024)[0]["response_length"] == 400


def test_apply_fixes_writes_run_fixed(tmp_path):
    run = write_lines(tmp_path / "run.jsonl", [line_2024("3", answer=[{"text": "X is so.", "citations": [0, 5]}])])
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{k}\t{v}\n" for k, v in TOPICS.items()))
    got = cli.invoke(app, ["validate", str(run), "--topics", str(topics), "--apply-fixes"])
    assert got.exit_code == 0, got.output
    assert "fixed copy: " + str(run) + ".fixed (1 lines changed, 1 out-of-range citations dropped)" in got.stdout
    assert [json.loads(x) for x in Path(f"{run}.fixed").read_text().splitlines()] == theirs_2024(run, TOPICS)
    both = cli.invoke(app, ["validate", str(run), "--apply-fixes", "--fix", str(tmp_path / "other.jsonl")])
    assert both.exit_code == 2 and "give it or --fix OUT, not both" in both.stderr
