"""The judges against a scripted OpenAI-compatible judge server (tests/judge_server.py): known labels ->
known scores, malformed answers, time-outs, the cache, and the CLI's bad-input paths."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app


def answer(qid: str, *sentences: str) -> str:
    return (
        json.dumps(
            {
                "run_id": "r",
                "topic_id": qid,
                "topic": f"question {qid}",
                "references": [],
                "answer": [{"text": s, "citations": []} for s in sentences],
            }
        )
        + "\n"
    )


def nuggets(qid: str, *items: tuple[str, str]) -> str:
    return (
        json.dumps(
            {"qid": qid, "query": f"question {qid}", "nuggets": [{"text": t, "importance": i} for t, i in items]}
        )
        + "\n"
    )


def invoke(*args: str):
    return CliRunner().invoke(app, list(map(str, args)))


@pytest.fixture
def files(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text(
        answer("q1", "A GOOD answer.", "More.") + answer("q2", "A plain answer.") + answer("q3", "No nuggets for me.")
    )
    nug = tmp_path / "nuggets.jsonl"
    nug.write_text(
        nuggets("q1", ("GOOD one", "vital"), ("HALF two", "vital"), ("three", "okay"), ("GOOD four", "okay"))
        + nuggets("q2", ("GOOD x", "vital"), ("y", "okay"))
        + nuggets("q9", ("unknown topic", "vital"))
    )
    return run, nug


def test_known_labels_give_known_scores_and_the_cache_makes_a_rerun_free(judge_env, files):
    server, tmp = judge_env
    run, nug = files
    out = tmp / "assigned.jsonl"
    result = invoke("eval-rag", run, "--nuggets", nug, "--judge", "scripted", "--assignments", out)
    assert result.exit_code == 0, result.output
    per_topic = {r["qid"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert per_topic["q1"]["scores"] == {"strict_vital": 0.5, "vital": 0.75, "strict_all": 0.5, "all": 0.625}
    assert per_topic["q2"]["scores"] == {"strict_vital": 0.0, "vital": 0.0, "strict_all": 0.0, "all": 0.0}
    assert [n["assignment"] for n in per_topic["q1"]["nuggets"]] == [
        "support",
        "partial_support",
        "not_support",
        "support",
    ]
    assert set(per_topic) == {"q1", "q2"}  # q3 has no nuggets: skipped, and said so
    assert "skipped 1 topics without nuggets/references: q3" in result.output
    assert "nuggets for 1 topics no run answers: q9" in result.output
    assert "0.2500 [" in result.output and "0.3125 [" in result.output  # mean strict_vital, all
    calls = server.state.calls
    assert calls == 2  # one assignment call per topic
    again = invoke("eval-rag", run, "--nuggets", nug, "--judge", "scripted", "--assignments", out)
    assert again.exit_code == 0 and server.state.calls == calls  # all from the cache
    assert "2 from the cache" in again.output
    assert again.output.split("means with")[1] == result.output.split("means with")[1]


def test_two_runs_get_a_row_each_and_a_paired_test(judge_env, files):
    run, nug = files
    other = run.with_name("other.jsonl")
    other.write_text(answer("q1", "A plain answer.") + answer("q2", "A GOOD one."))
    result = invoke(
        "eval-rag", run, other, "--nuggets", nug, "--judge", "scripted", "--run-name", "first", "--run-name", "second"
    )
    assert result.exit_code == 0, result.output
    # first: all = (0.625, 0); second: q1 -> HALF partial only: 0.5/4 = 0.125, q2 -> GOOD x: 1/2 = 0.5
    assert "first - second: +0.0000 over 2 topics" in result.output
    rows = [
        line
        for line in result.output.splitlines()
        if line.split()[0] in ("first", "second") and line.split()[1].isdigit()
    ]
    assert len(rows) == 2 and "0.3125" in rows[0] and "0.3125" in rows[1]


def test_malformed_labels_are_retried_then_counted_as_failed(judge_env, tmp_path):
    server, _ = judge_env
    run = tmp_path / "run.jsonl"
    run.write_text(answer("m1", "MALFORMED GOOD") + answer("m2", "RETRYFIX GOOD"))
    nug = tmp_path / "n.jsonl"
    nug.write_text(nuggets("m1", ("GOOD a", "vital"), ("b", "okay")) + nuggets("m2", ("GOOD a", "vital")))
    out = tmp_path / "a.jsonl"
    before = server.state.calls
    result = invoke("eval-rag", run, "--nuggets", nug, "--judge", "scripted", "--assignments", out)
    assert result.exit_code == 0, result.output
    assert server.state.calls - before == 4  # each asked twice (the reminder after a malformed answer)
    scores = {r["qid"]: r["scores"]["all"] for r in map(json.loads, out.read_text().splitlines())}
    assert scores == {"m1": 0.0, "m2": 1.0}  # m1's 2 labels failed (no credit), m2 read after the reminder
    assert "1 failed" in result.output  # one judgment (the m1 batch) failed
    row = next(line for line in result.output.splitlines() if line.startswith("run.jsonl"))
    assert row.split()[-1] == "2"  # failed labels in the table


def test_a_judge_that_times_out_stops_with_the_judgments_made_kept(judge_env, tmp_path):
    _, data = judge_env
    run = tmp_path / "run.jsonl"
    run.write_text(answer("a1", "GOOD") + answer("a2", "GOOD") + answer("z9", "SLOW"))
    nug = tmp_path / "n.jsonl"
    nug.write_text("".join(nuggets(q, ("GOOD", "vital")) for q in ("a1", "a2", "z9")))
    result = invoke("eval-rag", run, "--nuggets", nug, "--judge", "scripted", "--concurrency", "1")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no answer within 5 s" in errors[0], result.output
    assert "judgments made so far are cached" in errors[0]
    with sqlite3.connect(data / "data" / "judgments.db") as db:
        assert db.execute("SELECT count(*) FROM judgments").fetchone()[0] == 2  # a1 and a2 kept


@pytest.mark.parametrize(
    "judge, message",
    [
        ("down", "failed"),  # nothing listens there
        ("nope", "nope"),  # not configured
        ("extractive", "not an LLM"),
    ],
)
def test_an_unusable_judge_is_one_clear_error(judge_env, files, judge, message):
    run, nug = files
    result = invoke("eval-rag", run, "--nuggets", nug, "--judge", judge)
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.output


def test_bad_inputs(judge_env, files, tmp_path):
    run, nug = files
    other = tmp_path / "other.jsonl"
    other.write_text(nuggets("x1", ("a", "vital")))
    result = invoke("eval-rag", run, "--nuggets", other, "--judge", "scripted")
    assert result.exit_code == 2 and "no run answers" in result.output
    assert invoke("eval-rag", run).exit_code == 2  # nothing to score
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic_id": "q", "answer": 3}\n')
    result = invoke("eval-rag", bad, "--nuggets", nug)
    assert result.exit_code == 2 and "bad.jsonl:1" in result.output


def test_no_judge_given_uses_the_proxy_and_says_so(judge_env, files):
    run, nug = files
    result = invoke("eval-rag", run, "--nuggets", nug)
    assert result.exit_code == 0, result.output
    assert "PROXY" in result.output and "no --judge and no judge configured" in result.output


def test_nuggets_from_candidates_in_nuggetizer_shape(judge_env, tmp_path):
    candidates = tmp_path / "c.jsonl"
    candidates.write_text(
        json.dumps(
            {
                "query": {"qid": "c1", "text": "what"},
                "candidates": [
                    {"docid": "d1", "score": 2, "doc": {"segment": "GOOD fact one"}},
                    {"docid": "d2", "score": 1, "doc": {"segment": "an okay fact"}},
                    {"docid": "d3", "score": 0, "doc": {"segment": "noise"}},
                ],
            }
        )
        + "\n"
    )
    out = tmp_path / "n.jsonl"
    result = invoke("judge", "nuggets", "--candidates", candidates, "--output", out, "--judge", "scripted")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == {
        "qid": "c1",
        "query": "what",
        "nuggets": [{"text": "GOOD fact one", "importance": "vital"}, {"text": "an okay fact", "importance": "okay"}],
    }


def test_pairwise_judges_twice_with_sides_swapped(judge_env, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(answer("1", "GOOD") + answer("2", "plain") + answer("3", "plain"))
    b.write_text(answer("1", "plain") + answer("2", "GOOD") + answer("3", "plain"))
    out = tmp_path / "v.jsonl"
    result = invoke("judge", "pairwise", a, b, "--judge", "scripted", "--output", out)
    assert result.exit_code == 0, result.output
    # topic 3: the scripted judge always says B, so the two orders disagree: a tie
    assert "a.jsonl vs b.jsonl over 3 topics: 1 wins, 1 losses, 1 ties" in result.output
    assert [json.loads(x)["winner"] for x in out.read_text().splitlines()] == ["A", "B", "tie"]


def test_support_and_relevance_with_the_scripted_judge(judge_env):
    from ragnarok.core.settings import Settings
    from ragnarok.judge.answers import Answer
    from ragnarok.judge.create import relevance_labels, write_qrels
    from ragnarok.judge.evalrag import evaluate_run
    from ragnarok.judge.service import make_judge

    judge = make_judge(Settings(), "scripted")
    texts = {"s1": "GOOD passage", "s2": "HALF passage", "s3": "nothing"}
    ans = Answer("q", "question", [("one.", [0, 1]), ("two.", [2]), ("three.", [])], ["s1", "s2", "s3"])
    result = evaluate_run(
        "r", {"q": ans, "gone": Answer("gone", "x", [("x", [0])], ["missing"])}, judge, segments=texts.get
    )
    scores = result.topics["q"].scores
    assert scores["support_precision"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert scores["support_recall"] == pytest.approx((1 + 0 + 0) / 3)
    assert result.missing_segments == 1
    run = {"q": {"s1": 3.0, "s3": 2.0, "s2": 1.0, "zz": 0.5}}
    labels, problems = relevance_labels(judge, run, {"q": {"s2": 1}}, {"q": "question"}, texts.get, depth=10)
    assert labels == {"q": {"s1": 3, "s3": 0}}
    assert problems == ["q zz: segment not in the index"]
    path = judge_env[1] / "q.txt"
    assert write_qrels(path, {"q": {"s2": 1}}, labels) == 3
    assert path.read_text() == "q 0 s1 3\nq 0 s2 1\nq 0 s3 0\n"


def test_geval_scores_need_an_llm_judge(judge_env, files, tmp_path):
    run, _ = files
    out = tmp_path / "a.jsonl"
    result = invoke("eval-rag", run, "--geval", "--judge", "scripted", "--assignments", out)
    assert result.exit_code == 0, result.output
    scores = {r["qid"]: r["scores"] for r in map(json.loads, out.read_text().splitlines())}
    assert scores["q1"] == {f"geval_{k}": 5.0 for k in ("coherence", "consistency", "fluency", "relevance")}
    assert scores["q2"]["geval_fluency"] == 2.0 and set(scores) == {"q1", "q2", "q3"}
    assert "geval_coherence" in result.output
    proxy = invoke("eval-rag", run, "--geval")
    assert proxy.exit_code == 2 and "needs an LLM judge" in proxy.output
