"""The judges end to end against the real llama.cpp server with SmolLM2-135M: whatever the small model
writes, the labels are parsed or counted as failed, the scores stay in range and a rerun comes from the
cache."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def smol_env(smollm2_server, monkeypatch, slowdown):
    # short answers keep it quick: a label list fits in 48 tokens, and a cut answer is only a malformed one;
    # the deadline scales with this machine's speed now (tests/speed.py): 180 s on an idle one
    config = {
        "name": "smol",
        "backend": "openai",
        "base_url": smollm2_server,
        "model": "smollm2",
        "timeout_s": 180 * slowdown,
        "max_retries": 0,
        "max_tokens": 48,
        "max_concurrency": 1,
    }
    monkeypatch.setenv("RAGNAROK_GENERATORS", json.dumps([config]))
    clear = getattr(get_settings, "cache_clear", lambda: None)
    clear()
    yield
    clear()


def _answers(path, topics):
    path.write_text(
        "".join(
            json.dumps(
                {"run_id": "r", "topic_id": q, "topic": t, "references": [], "answer": [{"text": a, "citations": []}]}
            )
            + "\n"
            for q, t, a in topics
        )
    )


def test_eval_rag_with_smollm2_as_judge(smol_env, tmp_path):
    run = tmp_path / "run.jsonl"
    _answers(
        run,
        [
            (
                "g1",
                "compress a file with gzip",
                "Use gzip.open(path, 'wb') and write the bytes; gzip.compress compresses bytes in memory.",
            ),
            (
                "g2",
                "what does the yield statement do",
                "yield makes a function a generator that produces values one at a time.",
            ),
        ],
    )
    nuggets = tmp_path / "n.jsonl"
    nuggets.write_text(
        json.dumps(
            {
                "qid": "g1",
                "query": "compress a file with gzip",
                "nuggets": [
                    {"text": "gzip.open opens a compressed file", "importance": "vital"},
                    {"text": "gzip.compress compresses bytes", "importance": "okay"},
                ],
            }
        )
        + "\n"
        + json.dumps(
            {
                "qid": "g2",
                "query": "what does the yield statement do",
                "nuggets": [{"text": "yield turns a function into a generator", "importance": "vital"}],
            }
        )
        + "\n"
    )
    out = tmp_path / "a.jsonl"
    args = ["eval-rag", str(run), "--nuggets", str(nuggets), "--judge", "smol", "--assignments", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    for record in map(json.loads, out.read_text().splitlines()):
        assert set(record["scores"]) == {"strict_vital", "vital", "strict_all", "all"}
        assert all(0.0 <= v <= 1.0 for v in record["scores"].values())
        assert all(n["assignment"] in ("support", "partial_support", "not_support") for n in record["nuggets"])
    stats = re.search(r"(\d+) judgments \((\d+) from the cache, (\d+) failed\), (\d+) model calls", first.output)
    assert stats and int(stats.group(1)) == 2 and int(stats.group(4)) >= 2, first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0
    assert "2 judgments (2 from the cache" in again.output and ", 0 model calls" in again.output
    assert again.output.split("means with")[1] == first.output.split("means with")[1]


def test_nuggets_pairwise_support_and_relevance_with_smollm2(smol_env, tmp_path):
    from ragnarok.judge.answers import Answer
    from ragnarok.judge.create import relevance_labels
    from ragnarok.judge.evalrag import evaluate_run
    from ragnarok.judge.service import make_judge

    candidates = tmp_path / "c.jsonl"
    candidates.write_text(
        json.dumps(
            {
                "query": {"qid": "c1", "text": "compress a file with gzip"},
                "candidates": [
                    {"docid": "d1", "doc": {"segment": "gzip.open(filename, mode) opens a gzip-compressed file."}}
                ],
            }
        )
        + "\n"
    )
    out = tmp_path / "n.jsonl"
    made = CliRunner().invoke(
        app,
        [
            "judge",
            "nuggets",
            "--candidates",
            str(candidates),
            "--output",
            str(out),
            "--judge",
            "smol",
            "--concurrency",
            "1",
        ],
    )
    assert made.exit_code == 0, made.output
    record = json.loads(out.read_text())
    assert record["qid"] == "c1" and len(record["nuggets"]) <= 30
    assert all(n["importance"] in ("vital", "okay") and n["text"] for n in record["nuggets"])

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _answers(a, [("1", "gzip", "Use gzip.open to write a compressed file.")])
    _answers(b, [("1", "gzip", "I do not know.")])
    pair = CliRunner().invoke(app, ["judge", "pairwise", str(a), str(b), "--judge", "smol", "--concurrency", "1"])
    # a 135M model may give no readable verdict: then the command says so and exits 1
    assert pair.exit_code == 0 or (
        pair.exit_code == 1 and "every verdict of the judge was unreadable" in pair.output
    ), pair.output
    assert re.search(r"over 1 topics: \d wins, \d losses, \d ties", pair.output)

    judge = make_judge(get_settings(), "smol")
    texts = {"s1": "gzip.open opens a gzip-compressed file."}
    ans = Answer("q", "gzip", [("gzip.open opens compressed files.", [0])], ["s1"])
    scores = evaluate_run("r", {"q": ans}, judge, segments=texts.get, concurrency=1).topics["q"].scores
    assert 0 <= scores["support_precision"] <= 1 and 0 <= scores["support_recall"] <= 1
    labels, problems = relevance_labels(judge, {"q": {"s1": 2.0}}, {}, {"q": "gzip"}, texts.get, 10, 1)
    assert all(g in (0, 1, 2, 3) for g in labels.get("q", {}).values())
    assert len(labels.get("q", {})) + len(problems) == 1  # labelled, or listed as not labelled


def test_arena_votes_and_the_evaluate_route_with_smollm2(smol_env, tmp_path):
    from fastapi.testclient import TestClient

    from api.main import create_app
    from ragnarok.arena.judge_log import judge_votes
    from ragnarok.arena.store import VoteStore

    url = f"sqlite:///{tmp_path / 'arena.db'}"
    store = VoteStore(url)
    pipeline = {"spec": "bm25@20 | extractive", "retriever": "bm25@20", "reranker": "none", "generator": "extractive"}
    other = {**pipeline, "spec": "bm25+rm3@20 | extractive", "retriever": "bm25+rm3@20"}
    answer = {"answer": [{"text": "Use gzip.open(path, 'wb') to write a compressed file.", "citations": []}]}
    battle = store.create_battle(
        "blinded",
        "g",
        "compress a file with gzip",
        pipeline,
        other,
        answer,
        {"answer": [{"text": "I do not know.", "citations": []}]},
        None,
        None,
        "s",
    )
    store.vote(battle, "a", "s", "k")
    voted = CliRunner().invoke(
        app, ["judge", "pairwise", "--arena", "--judge", "smol", "--database-url", url, "--concurrency", "1"]
    )
    assert voted.exit_code == 0, voted.output
    votes = judge_votes(store)
    if votes:  # the small model's two verdicts were read: one vote, marked as the judge's
        assert [(v.voter, v.battle_id, v.human) for v in votes] == [("judge:smol:openai:smollm2", battle, "a")]
        assert votes[0].winner in ("a", "b", "tie") and "1 battles judged" in voted.output
    else:  # unreadable: no vote, the battle listed
        assert f"battle {battle}" in voted.output and "0 battles judged" in voted.output
    store.engine.dispose()

    with TestClient(create_app(get_settings(), arena=False)) as client:
        r = client.post(
            "/v1/evaluate",
            json={
                "answer": {
                    "topic_id": "g",
                    "topic": "compress a file with gzip",
                    "references": [],
                    "answer": [{"text": "Use gzip.open to write a compressed file.", "citations": []}],
                },
                "nuggets": [{"text": "gzip.open opens a compressed file", "importance": "vital"}],
                "judge": "smol",
            },
        )
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["judge"] == "LLM judge smol:openai:smollm2" and out["proxy"] is False
    assert set(out["scores"]) == {"strict_vital", "vital", "strict_all", "all"}
    assert all(0.0 <= v <= 1.0 for v in out["scores"].values()) and out["failed"] in (0, 1)
