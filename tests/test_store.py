"""The vote log on a real SQLite file: append-only, one vote per battle, rate limits, migrations."""

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from ragnarok.arena.store import MIGRATIONS, VoteRefused, VoteStore, split_battles

A = {"spec": "bm25@100 | extractive", "retriever": "bm25@100", "reranker": "none", "generator": "extractive"}
B = {"spec": "dense:minilm@100 | extractive", "retriever": "dense:minilm@100", "reranker": "none",
     "generator": "extractive"}
C = {"spec": "bm25@100 | smollm2", "retriever": "bm25@100", "reranker": "none", "generator": "smollm2"}


@pytest.fixture
def store(tmp_path):
    return VoteStore(f"sqlite:///{tmp_path / 'votes.db'}", votes_per_minute=1000)


def _battle(store, a=A, b=B, mode="blinded", error_b=None):
    return store.create_battle(mode, "t1", "topic", a, b, {"answer": []}, None if error_b else {"answer": []},
                               None, error_b, "session-1")


def test_one_vote_per_battle_and_unknown_battles(store):
    battle = _battle(store)
    assert store.vote(battle, "a", "s").winner == "a"
    with pytest.raises(VoteRefused, match="voted on already") as info:
        store.vote(battle, "b", "s")
    assert info.value.status == 409
    with pytest.raises(VoteRefused, match="unknown battle") as info:
        store.vote("nope", "a", "s")
    assert info.value.status == 404
    with pytest.raises(VoteRefused, match="winner must be"):
        store.vote(_battle(store), "both", "s")


def test_failed_battles_are_not_votable(store):
    battle = _battle(store, error_b="generator 'x' failed: HTTP 500")
    assert not store.get(battle).votable
    with pytest.raises(VoteRefused, match="not votable"):
        store.vote(battle, "a", "s")


def test_rate_limit_per_session(tmp_path):
    store = VoteStore(f"sqlite:///{tmp_path / 'v.db'}", votes_per_minute=2)
    for _ in range(2):
        store.vote(_battle(store), "tie", "flooder")
    with pytest.raises(VoteRefused, match="too many votes") as info:
        store.vote(_battle(store), "tie", "flooder")
    assert info.value.status == 429
    store.vote(_battle(store), "tie", "someone-else")


def test_log_is_append_only_on_disk(store, tmp_path):
    battle = _battle(store)
    store.vote(battle, "bothbad", "s")
    conn = sqlite3.connect(tmp_path / "votes.db")
    for sql in ("UPDATE votes SET winner = 'a'", "DELETE FROM battles", "UPDATE battles SET topic = 'x'"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(sql)
    row = conn.execute("SELECT id, winner, mode, topic FROM battle_log").fetchone()
    assert row == (battle, "bothbad", "blinded", "topic")
    assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == \
        [v for v, _ in MIGRATIONS]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_are_idempotent(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    first = VoteStore(url)
    battle = _battle(first)
    second = VoteStore(url)  # re-opening applies nothing twice and keeps the data
    assert second.get(battle).topic == "topic"


def test_concurrent_votes_on_one_battle_record_exactly_one(store):
    battle = _battle(store)

    def vote(i):
        try:
            store.vote(battle, "a" if i % 2 else "b", f"s{i}")
            return True
        except VoteRefused:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(vote, range(16))) == 1


def test_leaderboard_splits(store):
    for a, b, w in [(A, B, "a"), (A, C, "b"), (B, C, "tie")]:
        store.vote(_battle(store, a, b), w, "s")
    store.vote(_battle(store, A, B, mode="unblinded"), "b", "s")
    rows = store.battles()
    assert len(rows) == 3 and len(store.battles(include_unblinded=True)) == 4
    assert [(x.a, x.b, x.winner) for x in split_battles(rows, "r")] == [("bm25@100 | none", "dense:minilm@100 | none", "a")]
    assert [(x.a, x.b) for x in split_battles(rows, "ag")] == [("extractive", "smollm2")]
    assert len(split_battles(rows, "rag")) == 3
