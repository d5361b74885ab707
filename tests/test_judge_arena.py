"""The arena judge: judge votes on the arena's battles (each judged twice with the sides swapped) in their own
append-only table of the vote log, on a real SQLite file and a real PostgreSQL server; the CLI against the
scripted judge server (tests/judge_server.py); the judges' board and the judge-human agreement."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from ragnarok.arena.judge_log import board_rows, judge_votes, record, unjudged
from ragnarok.arena.store import VoteRefused, VoteStore
from ragnarok.cli.main import app
from ragnarok.core.settings import Settings
from ragnarok.judge.arena import JudgeVote, agreement

A = {"spec": "bm25@20 | extractive", "retriever": "bm25@20", "reranker": "none", "generator": "extractive"}
B = {"spec": "bm25+rm3@20 | extractive", "retriever": "bm25+rm3@20", "reranker": "none", "generator": "extractive"}


def rag(*sentences: str) -> dict:
    return {
        "topic_id": "t",
        "topic": "q",
        "references": ["d1"],
        "answer": [{"text": s, "citations": [0]} for s in sentences],
    }


def battle(store: VoteStore, a: str, b: str, mode: str = "blinded", error_b: str | None = None) -> str:
    return store.create_battle(
        mode, "demo-01", f"question about {a[:10]}", A, B, rag(a), None if error_b else rag(b), None, error_b, "s"
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'votes.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    store = VoteStore(url, votes_per_minute=1000)
    yield store
    store.engine.dispose()


def test_judge_votes_are_their_own_append_only_log(store):
    first, second = battle(store, "one", "two"), battle(store, "three", "four", mode="unblinded")
    failed = battle(store, "five", "", error_b="timeout")
    store.vote(first, "b", "s", "k")
    assert [b.id for b in unjudged(store, "judge:x")] == [first, second]  # the failed battle is not judged
    record(store, first, "judge:x", "a", "A/B")
    record(store, first, "judge:y", "tie", "A/A")
    with pytest.raises(VoteRefused, match="already"):
        record(store, first, "judge:x", "b", "B/A")  # one vote per battle and judge
    with pytest.raises(VoteRefused, match="does not exist"):
        record(store, "0" * 32, "judge:x", "a", "A/B")
    with pytest.raises(VoteRefused, match="judge:"):
        record(store, second, "someone", "a", "A/B")  # a judge's vote is always marked as one
    with pytest.raises(VoteRefused, match="one of a, b, tie"):
        record(store, second, "judge:x", "bothbad", "?/?")
    assert [b.id for b in unjudged(store, "judge:x")] == [second]
    assert unjudged(store, "judge:x", limit=0) == []
    record(store, second, "judge:x", "b", "B/A")
    votes = judge_votes(store, include_unblinded=True)
    assert [(v.voter, v.battle_id, v.winner, v.human) for v in votes] == [
        ("judge:x", first, "a", "b"),
        ("judge:y", first, "tie", "b"),
        ("judge:x", second, "b", None),
    ]
    assert len(judge_votes(store)) == 2  # blinded battles only, as the boards' default
    # the human boards never count judge votes, unless the judges are named
    assert [w for _, _, w in board_rows(store)] == ["b"] == [w for _, _, w in store.battles()]
    assert [w for _, _, w in board_rows(store, True, judges=["judge:x"])] == ["b", "a", "b"]
    assert [w for _, _, w in board_rows(store, judges=["judge:x", "judge:y"])] == ["b", "a", "tie"]
    assert store.vote_counts() == {tuple(sorted((A["spec"], B["spec"]))): 1}  # sampling counts people only
    for statement in ("UPDATE judge_votes SET winner = 'b'", "DELETE FROM judge_votes"):
        with pytest.raises(Exception, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
    assert len(judge_votes(store, include_unblinded=True)) == 3
    assert failed


def test_agreement_counts_battles_both_voted():
    def v(winner: str, human: str | None, voter: str = "judge:x") -> JudgeVote:
        return JudgeVote(voter, "id", A, B, winner, human)

    got = agreement(
        [v("a", "a"), v("a", "b"), v("tie", "bothbad"), v("b", "tie"), v("a", None), v("b", "b", "judge:y")]
    )
    x = got["judge:x"]
    assert (x.votes, x.both, x.same, x.decided, x.same_decided) == (5, 4, 2, 2, 1)
    assert x.rate == 0.5 and x.rate_decided == 0.5
    assert got["judge:y"].rate == 1.0
    assert agreement([v("a", None)])["judge:x"].rate is None


# ---- the CLI against the scripted judge ----


def invoke(*args: str):
    return CliRunner().invoke(app, list(map(str, args)))


def test_pairwise_on_the_arena_casts_judge_votes(judge_env):
    server, tmp = judge_env
    url = f"sqlite:///{tmp / 'arena.db'}"
    store = VoteStore(url)
    good_a = battle(store, "A GOOD answer.", "A plain one.")
    good_b = battle(store, "A plain one.", "A GOOD answer.")
    neither = battle(store, "plain", "also plain")  # the scripted judge always says B: the orders disagree
    broken = battle(store, "MALFORMED", "plain")  # unreadable twice, even after the reminder: no vote
    battle(store, "GOOD", "", error_b="the generator timed out")  # not judged: a side failed
    for battle_id, human in ((good_a, "a"), (good_b, "a"), (neither, "bothbad")):
        store.vote(battle_id, human, "s", "k")
    before = server.state.calls
    result = invoke("judge", "pairwise", "--arena", "--judge", "scripted", "--database-url", url, "--concurrency", "2")
    assert result.exit_code == 0, result.output
    assert "judge:scripted:openai:scripted: 3 battles judged (1 A, 1 B, 1 ties), 1 failed" in result.output
    assert f"no vote (the judge's verdict could not be read): battle {broken}" in result.output
    # good_a agrees with its human vote, good_b does not, neither's tie matches a both-bad vote
    assert "agreement with human votes on 3 battles both voted: 66.7%; without ties 50.0% of 2" in result.output
    assert server.state.calls - before == 3 * 2 + 2 * 2  # two orders each; the malformed ones asked twice
    votes = {v.battle_id: v for v in judge_votes(store, include_unblinded=True)}
    assert {k: v.winner for k, v in votes.items()} == {good_a: "a", good_b: "b", neither: "tie"}
    assert [w for _, _, w in store.battles()] == ["a", "a", "bothbad"]  # the human boards are unchanged
    with store.engine.connect() as conn:
        verdicts = dict(conn.execute(text("SELECT battle_id, verdicts FROM judge_votes")).all())
    assert verdicts == {good_a: "A/B", good_b: "B/A", neither: "B/B"}

    calls = server.state.calls
    again = invoke("judge", "pairwise", "--arena", "--judge", "scripted", "--database-url", url)
    assert again.exit_code == 0, again.output
    assert "0 battles judged (0 A, 0 B, 0 ties), 1 failed" in again.output  # only the failed one was tried
    assert server.state.calls == calls  # and its failure came from the cache
    store.engine.dispose()


def test_the_judges_pane_shows_the_board_and_the_agreement(judge_env):
    from webui.arena import Arena, database_url

    _, tmp = judge_env
    settings = Settings(data_dir=tmp / "data")
    from ragnarok.judge.arena import vote_log_url

    assert vote_log_url(settings) == database_url(settings)  # the arena's log by default
    arena = Arena(settings, client=None)  # type: ignore[arg-type]  # no battle is run here
    assert "No judge votes yet" in arena.leaderboards()[1]["judges"]
    one, two = battle(arena.store, "GOOD", "plain"), battle(arena.store, "plain", "GOOD")
    arena.store.vote(one, "a", "s", "k")
    record(arena.store, one, "judge:m", "a", "A/B")
    record(arena.store, two, "judge:m", "b", "B/A")
    summary, panes = arena.leaderboards()
    assert ">1<" in summary and "1 battle counted" in panes["rag"]  # the one human vote
    pane = panes["judges"]
    assert 'data-voter="judge:m"' in pane and "2 battles counted" in pane
    assert "on <strong>1</strong> battle both voted" in pane and ">100%<" in pane
    assert pane.count("rg-votes") == 2 and "<code>bm25@20 | extractive</code>" in pane


def test_a_judge_that_fails_keeps_the_votes_cast(judge_env):
    _, tmp = judge_env
    url = f"sqlite:///{tmp / 'arena.db'}"
    store = VoteStore(url)
    kept = battle(store, "GOOD", "plain")
    battle(store, "SLOW", "plain")  # past the judge's 5 s deadline
    result = invoke("judge", "pairwise", "--arena", "--judge", "scripted", "--database-url", url, "--concurrency", "1")
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no answer within 5 s" in errors[0], result.output
    assert [v.battle_id for v in judge_votes(store)] == [kept]
    down = invoke("judge", "pairwise", "--arena", "--judge", "down", "--database-url", url)
    assert down.exit_code == 2 and "error:" in down.output
    store.engine.dispose()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--arena", "a.jsonl"], "give no run files"),
        ([], "give two run files"),
        (["--arena", "--database-url", "mysql://x/y"], "SQLite and PostgreSQL"),
    ],
)
def test_bad_pairwise_arguments_are_one_line(judge_env, args, message):
    result = invoke("judge", "pairwise", *args, "--judge", "scripted")
    assert result.exit_code == 2 and message in result.output, result.output
