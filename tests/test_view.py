"""``ragnarok view``: runs of both years shown with their citations resolved in the real demo index, nugget
labels, bad input as one ``error:`` line, and the ``--html`` page in Chromium (filters, expand, the diff of
two runs, untrusted text shown as text, no horizontal overflow at 420 px)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import chromium
from typer.testing import CliRunner

from ragnarok.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
NUGGETS = ROOT / "topics" / "eval" / "demo.nuggets.jsonl"
ARGPARSE, GETOPT, GZIP, SHUTIL = (
    "stdlib.argparse#0_0",
    "stdlib.getopt#0_0",
    "stdlib.gzip#0_0",
    "stdlib.shutil.copyfileobj#0_0",
)
MISSING = "stdlib.nosuch#9_9"
UNTRUSTED = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'


def invoke(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["view", *map(str, args)])
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def run_2024(qid: str, topic: str, refs: list[str], answer: list[tuple[str, list[int]]]) -> dict:
    return {
        "run_id": "A",
        "topic_id": qid,
        "topic": topic,
        "references": refs,
        "response_length": 9,
        "answer": [{"text": t, "citations": c} for t, c in answer],
    }


def run_2025(qid: str, topic: str, refs: list[str], answer: list[tuple[str, list[int]]]) -> dict:
    return {
        "metadata": {"team_id": "t", "run_id": "B", "type": "automatic", "narrative_id": qid, "narrative": topic},
        "references": refs,
        "answer": [{"text": t, "citations": c} for t, c in answer],
    }


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path, Path]:
    """Run A (2024), run B (2025) on demo-01, demo-02 (cited differently) and demo-03 (the same), and
    assignments for both runs on demo-01 and demo-02 (tagged by run id)."""
    a = write(
        tmp_path / "a.jsonl",
        [
            run_2024(
                "demo-01",
                "how do I parse command-line arguments",
                [ARGPARSE, GETOPT, MISSING],
                [(f"Use argparse {UNTRUSTED}.", [0]), ("getopt is the C-style one.", [1, 2])],
            ),
            run_2024("demo-02", "compress a file with gzip", [GZIP], [("Use gzip.open.", [0])]),
            run_2024("demo-03", "run a shell command and capture its output", [SHUTIL], [("Same.", [0])]),
        ],
    )
    b = write(
        tmp_path / "b.jsonl",
        [
            run_2025(
                "demo-01",
                "how do I parse command-line arguments",
                [ARGPARSE, GETOPT],
                [("Use argparse.", [0]), ("getopt is the C-style one.", [1])],
            ),
            run_2025(
                "demo-02",
                "compress a file with gzip",
                [GZIP, SHUTIL],
                [("Use gzip.open.", [0]), ("Copy with shutil.copyfileobj.", [1])],
            ),
            run_2025("demo-03", "run a shell command and capture its output", [SHUTIL], [("Same.", [0])]),
        ],
    )
    labels = []
    for run, verdicts in (("A", ("support", "not_support")), ("B", ("support", "support"))):
        for qid, verdict in zip(("demo-01", "demo-02"), verdicts):
            labels.append(
                {
                    "qid": qid,
                    "run_id": run,
                    "nuggets": [
                        {"text": f"{qid} vital nugget", "importance": "vital", "assignment": verdict},
                        {"text": f"{qid} okay nugget", "importance": "okay", "assignment": "partial_support"},
                    ],
                }
            )
    return a, b, write(tmp_path / "assignments.jsonl", labels)


def test_terminal_resolves_citations_in_the_index_and_marks_a_missing_docid(demo_data_env, runs):
    from ragnarok.judge.answers import lucene_segments

    a, b, _ = runs
    out = invoke(a, "--topics", "demo-01")
    flat = " ".join(out.split())
    segment = " ".join(lucene_segments(demo_data_env.index_sources()["demo"])(ARGPARSE).split())
    assert f"[0] {ARGPARSE}: {segment[:60]}" in flat  # the cited segment's text, from Lucene
    assert f"[2] {MISSING}: (not in the index)" in flat
    assert UNTRUSTED in flat and "demo-02" not in out  # the text as written; --topics kept one topic
    assert all(len(line) <= 80 for line in out.splitlines()), max(out.splitlines(), key=len)
    index_dir = demo_data_env.index_sources()["demo"]  # --index as `ragnarok search` takes it: a directory too
    two = invoke(a, b, "--topics", "demo", "--index", index_dir)  # a topic set; a 2025 run beside
    assert "b.jsonl: TREC RAG 2025 run 'B', 3 topics" in two and "== demo-03" in two
    assert two.count("≠ the runs differ: cites differently") == 2


def test_nugget_labels_and_scores(demo_data_env, runs):
    a, b, assignments = runs
    plain = invoke(a, "--nuggets", NUGGETS, "--topics", "demo-02")
    assert "nuggets:" in plain and "-               vital  use the gzip module" in plain
    assert "scores:" not in plain  # nuggets without labels: no score
    labelled = invoke(a, b, "--assignments", assignments)
    assert "not_support     vital  demo-02 vital nugget" in labelled
    assert "scores differ (0.25 vs 0.75)" in labelled  # run A's demo-02 vs run B's
    assert "strict_vital 1.00 · vital 1.00 · strict_all 0.50 · all 0.75" in labelled


@pytest.mark.parametrize(
    "case",
    [
        "not-jsonl",
        "empty",
        "labels-as-nuggets",
        "nuggets-as-run",
        "missing-run",
        "unknown-topic",
        "assignments",
        "unknown-index",
    ],
)
def test_bad_input_is_one_error_line(tmp_path, runs, case):
    a = runs[0]
    args, expected = {
        "not-jsonl": ([tmp_path / "x.tsv"], "x.tsv:1: not JSON"),
        "empty": ([tmp_path / "x.tsv"], "x.tsv: empty, or a line that is no JSON object: not a TREC RAG run"),
        "labels-as-nuggets": (
            [a, "--nuggets", runs[2]],
            "topic demo-01 appears twice; labels of several runs? give them with --assignments",
        ),
        "unknown-index": ([a, "--index", "nope"], "unknown index 'nope' (configured: "),
        "nuggets-as-run": ([NUGGETS], "it looks like a nugget file: give it with --nuggets"),
        "missing-run": (
            [tmp_path / "a.jsnl"],
            f"no such run file: {tmp_path / 'a.jsnl'}; did you mean {tmp_path / 'a.jsonl'}?",
        ),
        "unknown-topic": ([a, "--topics", "demo-1"], "topic 'demo-1' is not in a.jsonl; did you mean demo-01?"),
        "assignments": (
            [a, "--assignments", NUGGETS],
            "no nugget carries an assignment; a nugget file without labels goes to --nuggets",
        ),
    }[case]
    if case in ("not-jsonl", "empty"):
        args[0].write_text("demo-01\thow do I parse\n" if case == "not-jsonl" else "\n")
    result = CliRunner().invoke(app, ["view", *map(str, args)])
    assert result.exit_code == 2 and not result.stdout, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.output


@pytest.mark.slow
def test_html_page_in_chromium(demo_data_env, runs, tmp_path):
    from playwright.sync_api import expect

    a, b, assignments = runs
    page_path = tmp_path / "view.html"
    invoke(a, b, "--assignments", assignments, "--html", page_path)
    html = page_path.read_text(encoding="utf-8")
    assert "<script>window" not in html and "http://" not in html and "https://" not in html  # no network
    shots = tmp_path / "screenshots"
    with chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        topics = page.locator("details.topic")
        expect(topics).to_have_count(3)
        expect(page.locator("#count")).to_have_text("3 of 3 topics")
        expect(page.locator("details.topic.differs")).to_have_count(2)  # demo-03: the same in both
        expect(page.locator("details.topic .bar .num")).to_have_text(["0.75", "0.75", "0.25", "0.75", "–", "–"])
        page.check("#diffonly")
        expect(page.locator("#count")).to_have_text("2 of 3 topics")
        page.uncheck("#diffonly")
        page.fill("#filter", "gzip")  # by topic text
        expect(page.locator("details.topic:visible")).to_have_count(1)
        page.fill("#filter", "")
        page.eval_on_selector("#min", "e => { e.value = '0.5'; e.dispatchEvent(new Event('input')); }")
        expect(page.locator("#count")).to_have_text("2 of 3 topics")  # either run's score counts: B has 0.75
        page.eval_on_selector("#min", "e => { e.value = '0.8'; e.dispatchEvent(new Event('input')); }")
        expect(page.locator("details.topic:visible")).to_have_count(0)
        page.eval_on_selector("#min", "e => { e.value = '0'; e.dispatchEvent(new Event('input')); }")
        first = topics.nth(0)
        expect(first.locator(".cols")).to_have_count(0)  # built lazily, on expand
        first.locator("summary").click()
        expect(first.locator(".col")).to_have_count(2)
        expect(first.locator("ol.answer > li").first).to_contain_text(UNTRUSTED)  # text, not markup
        assert page.evaluate("() => window.__xss") is None
        expect(first.locator(".missing")).to_have_text(["not in the index"])
        expect(first.locator("li.only")).to_have_count(1)  # run A's MISSING is cited by A only
        expect(first.locator("li.only .docid")).to_contain_text(MISSING)
        topics.nth(1).locator("summary").click()
        expect(topics.nth(1).locator("li.only .docid")).to_contain_text(SHUTIL)
        page.evaluate("() => window.scrollTo(0, 0)")  # the sticky header back at the top
        page.screenshot(path=shots / "view-1280.png", full_page=True)
        page.set_viewport_size({"width": 420, "height": 900})
        page.screenshot(path=shots / "view-420.png", full_page=True)
        wide, inner = page.evaluate("() => [document.scrollingElement.scrollWidth, window.innerWidth]")
        assert wide <= inner, f"horizontal overflow at 420 px: {wide} > {inner}"
    assert all((shots / f"view-{w}.png").stat().st_size > 10_000 for w in (1280, 420))
