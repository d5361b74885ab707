"""The vote log on a real SQLite file and a real PostgreSQL server (tests/pg.py): append-only, one vote per
battle, an atomic rate limit per server-side key, migrations that are atomic and safe to race, votes per pair
kept by the database itself (pair_votes)."""

import json
import multiprocessing
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from servers import free_port
from sqlalchemy import create_engine, event, text
from sqlalchemy.exc import IntegrityError

from ragnarok.arena.migrations import MIGRATIONS, migrate, rebuild_pair_votes
from ragnarok.arena.store import StoreError, VoteRefused, VoteStore, make_engine, split_battles

A = {"spec": "bm25@100 | extractive", "retriever": "bm25@100", "reranker": "none", "generator": "extractive"}
B = {
    "spec": "dense:minilm@100 | extractive",
    "retriever": "dense:minilm@100",
    "reranker": "none",
    "generator": "extractive",
}
C = {"spec": "bm25@100 | smollm2", "retriever": "bm25@100", "reranker": "none", "generator": "smollm2"}
D = {"spec": "bm25+rm3@100 | smollm2", "retriever": "bm25+rm3@100", "reranker": "none", "generator": "smollm2"}
LATEST = [v for v, _ in MIGRATIONS]


def _versions(conn) -> list[int]:
    return [r[0] for r in conn.execute(text("SELECT version FROM schema_migrations ORDER BY version"))]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    """A fresh, empty database: a SQLite file, or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'votes.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(url):
    store = VoteStore(url, votes_per_minute=1000)
    yield store
    store.engine.dispose()


def _battle(store, a=A, b=B, mode="blinded", error_b=None):
    return store.create_battle(
        mode, "t1", "topic", a, b, {"answer": []}, None if error_b else {"answer": []}, None, error_b, "session-1"
    )


def test_one_vote_per_battle_and_unknown_battles(store):
    battle = _battle(store)
    assert store.vote(battle, "a", "s", "client:1").winner == "a"
    with pytest.raises(VoteRefused, match="voted on already") as info:
        store.vote(battle, "b", "s", "client:2")
    assert info.value.status == 409
    with pytest.raises(VoteRefused, match="unknown battle") as info:
        store.vote("nope", "a", "s", "client:1")
    assert info.value.status == 404
    with pytest.raises(VoteRefused, match="winner must be"):
        store.vote(_battle(store), "both", "s", "client:1")


def test_failed_battles_are_not_votable(store):
    battle = _battle(store, error_b="generator 'x' failed: HTTP 500")
    assert not store.get(battle).votable
    with pytest.raises(VoteRefused, match="not votable"):
        store.vote(battle, "a", "s", "client:1")


def test_rate_limit_counts_the_server_key_not_the_session(url):
    """The session id is the browser's choice: rotating it must not buy more votes."""
    store = VoteStore(url, votes_per_minute=2)
    for session in ("s1", "s2"):
        store.vote(_battle(store), "tie", session, "client:203.0.113.7")
    with pytest.raises(VoteRefused, match="too many votes") as info:
        store.vote(_battle(store), "tie", "a-brand-new-session", "client:203.0.113.7")
    assert info.value.status == 429
    store.vote(_battle(store), "tie", "s1", "client:203.0.113.8")  # another client is not limited by it
    store.engine.dispose()


def test_rate_limit_is_atomic_under_100_simultaneous_votes(url):
    """Count-then-insert runs serialised per rate key: exactly the limit is accepted, never more."""
    store = VoteStore(url, votes_per_minute=30)
    battles = [_battle(store) for _ in range(100)]
    start = threading.Barrier(100)

    def vote(i: int) -> str:
        start.wait()
        try:
            store.vote(battles[i], "a", f"session-{i}", "client:203.0.113.9")
            return "accepted"
        except VoteRefused as exc:
            return str(exc.status)

    with ThreadPoolExecutor(100) as pool:
        outcomes = list(pool.map(vote, range(100)))
    assert outcomes.count("accepted") == 30 and outcomes.count("429") == 70
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM votes")).scalar_one() == 30
    store.engine.dispose()


def test_log_is_append_only_in_the_database_itself(store, url):
    """A plain connection (not our code) cannot UPDATE, DELETE or TRUNCATE the log."""
    battle = _battle(store)
    store.vote(battle, "bothbad", "s", "client:1")
    plain = create_engine(url)
    statements = [
        "UPDATE votes SET winner = 'a'",
        "DELETE FROM votes",
        "DELETE FROM battles",
        "UPDATE battles SET topic = 'x'",
    ]
    if plain.dialect.name == "postgresql":
        statements += ["TRUNCATE votes", "TRUNCATE battles CASCADE"]
    for sql in statements:
        with plain.connect() as conn, pytest.raises(IntegrityError, match="append-only"):
            conn.execute(text(sql))
    with plain.connect() as conn:
        row = conn.execute(text("SELECT id, winner, mode, topic FROM battle_log")).one()
        assert tuple(row) == (battle, "bothbad", "blinded", "topic")
        assert _versions(conn) == LATEST
    plain.dispose()
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_are_idempotent(url):
    first = VoteStore(url)
    battle = _battle(first)
    second = VoteStore(url)  # re-opening applies nothing twice and keeps the data
    assert second.get(battle).topic == "topic"
    for store in (first, second):
        store.engine.dispose()


def _open(url: str, barrier, results) -> None:
    """One process's first start: connected already, every process migrates at the same moment."""
    engine = make_engine(url)
    engine.connect().close()  # the pool keeps it: the race is not spread out by connection set-up
    barrier.wait()
    try:
        migrate(engine)
        VoteStore(url).engine.dispose()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - the parent asserts on what each process saw
        results.put(f"{type(exc).__name__}: {exc}")
    engine.dispose()


def test_concurrent_first_migration_from_four_processes(url):
    """Four processes open a fresh store at the same moment: each migration runs once, every process opens."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, results)) for _ in range(4)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert outcomes == ["ok"] * 4
    engine = make_engine(url)
    with engine.connect() as conn:
        assert _versions(conn) == LATEST
    engine.dispose()


def _creates_then_fails(conn) -> None:
    conn.execute(text("CREATE TABLE half_done (x INTEGER)"))
    conn.execute(text("CREATE INDEX half_done_x ON half_done(x)"))
    raise RuntimeError("the migration stopped halfway")


def _creates(conn) -> None:
    conn.execute(text("CREATE TABLE half_done (x INTEGER)"))


def test_a_migration_that_fails_halfway_leaves_nothing_and_a_restart_works(url):
    engine = make_engine(url)
    with pytest.raises(StoreError, match="could not be migrated to version 99: RuntimeError: the") as info:
        migrate(engine, [*MIGRATIONS, (99, _creates_then_fails)])
    assert "\n" not in str(info.value) and "CREATE" not in str(info.value)
    with engine.connect() as conn:
        assert _versions(conn) == LATEST
    assert migrate(engine, [*MIGRATIONS, (99, _creates)]) == 99  # the half-made table was rolled back
    assert migrate(engine, [*MIGRATIONS, (99, _creates)]) == 99
    with pytest.raises(StoreError, match="schema version 99, newer than this ragnarok knows"):
        migrate(engine)  # an older ragnarok on a newer store says so
    engine.dispose()


def test_store_errors_are_one_line_without_sql(tmp_path):
    down = f"postgresql://someone:s3cret@127.0.0.1:{free_port()}/votes"
    for bad, expected in [
        (down, "could not be opened: OperationalError"),
        (f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}", "could not be opened"),
        ("mysql://u@h/db", "supports SQLite and PostgreSQL"),
        ("not a url", "not a database URL"),
    ]:
        with pytest.raises(StoreError, match=expected) as info:
            VoteStore(bad)
        message = str(info.value)
        assert "\n" not in message and "[SQL" not in message and "s3cret" not in message


def test_concurrent_votes_on_one_battle_record_exactly_one(store):
    battle = _battle(store)

    def vote(i):
        try:
            store.vote(battle, "a" if i % 2 else "b", f"s{i}", f"client:{i}")
            return True
        except VoteRefused:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(vote, range(16))) == 1


def test_vote_counts_per_pair_in_sql(store):
    for a, b, mode in [(A, B, "blinded"), (B, A, "blinded"), (A, C, "unblinded"), (B, C, "blinded")]:
        store.vote(_battle(store, a, b, mode=mode), "a", "s", "client:1")
    _battle(store, A, C)  # not voted: not counted
    expected = {}
    for a, b, _ in store.battles(include_unblinded=True):  # the definition: every vote, by unordered pair
        key = tuple(sorted((a["spec"], b["spec"])))
        expected[key] = expected.get(key, 0) + 1
    assert (
        store.vote_counts()
        == expected
        == {(A["spec"], B["spec"]): 2, (A["spec"], C["spec"]): 1, (C["spec"], B["spec"]): 1}
    )  # sorted pairs


def test_pair_key_migration_backfills_an_existing_log(url):
    """A log written before migration 5 is counted after it, and stays append-only."""
    engine = make_engine(url)
    migrate(engine, MIGRATIONS[:4])
    with engine.begin() as conn:
        for i, (a, b) in enumerate([(A, B), (B, A), (A, C)]):
            conn.execute(
                text(
                    "INSERT INTO battles (id, created_at, mode, topic_id, topic, pipeline_a, "
                    "pipeline_b, session_id) "
                    "VALUES (:id, '2026-01-01', 'blinded', 't', 'topic', :a, :b, 's')"
                ),
                {"id": f"b{i}", "a": json.dumps(a), "b": json.dumps(b)},
            )
            if i < 2:
                conn.execute(
                    text(
                        "INSERT INTO votes (battle_id, voted_at, winner, session_id) "
                        "VALUES (:id, '2026-01-01', 'a', 's')"
                    ),
                    {"id": f"b{i}"},
                )
    engine.dispose()
    store = VoteStore(url)
    assert store.vote_counts() == {(A["spec"], B["spec"]): 2}
    with store.engine.connect() as conn, pytest.raises(IntegrityError, match="append-only"):
        conn.execute(text("UPDATE battles SET topic = 'x'"))
    store.engine.dispose()


def _counted_in_the_log(engine) -> dict[tuple[str, str], int]:
    """The truth ``pair_votes`` is derived from: one GROUP BY over every vote."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT pair_key, COUNT(*) FROM votes GROUP BY pair_key")).all()
    return {tuple(json.loads(key)): n for key, n in rows}


def test_pair_votes_match_the_log_after_many_concurrent_votes(store):
    """16 threads with their own rate keys (nothing serialises them) vote on 120 battles over 6 pairs, each
    battle raced by two threads: every accepted vote is counted once, a refused one not at all."""
    pairs = [(A, B), (B, A), (A, C), (B, C), (C, D), (A, D)]
    battles = [_battle(store, *pairs[i % len(pairs)]) for i in range(120)]
    attempts = [(battle, racer) for battle in battles for racer in range(2)]
    start = threading.Barrier(16)

    def voter(worker: int) -> int:
        start.wait()
        accepted = 0
        for battle, racer in attempts[worker::16]:
            try:
                store.vote(battle, "ab"[racer], f"s{worker}", f"client:{worker}")
                accepted += 1
            except VoteRefused as exc:
                assert exc.status == 409
        return accepted

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(voter, range(16))) == 120
    counts = store.vote_counts()
    assert counts == _counted_in_the_log(store.engine)
    assert sum(counts.values()) == 120 and len(counts) == 5  # (A, B) and (B, A) are one pair
    assert counts[tuple(sorted((A["spec"], B["spec"])))] == 40


def test_pair_votes_migration_backfills_a_version_5_log(url):
    """A log written at schema version 5 (pair keys, no pair_votes) is counted after migration 6, and new
    votes add to the backfilled counts."""
    engine = make_engine(url)
    migrate(engine, MIGRATIONS[:5])
    log = [(A, B), (B, A), (A, C), (C, D), (A, B)]
    with engine.begin() as conn:
        for i, (a, b) in enumerate(log):
            key = json.dumps(sorted((a["spec"], b["spec"])))
            conn.execute(
                text(
                    "INSERT INTO battles (id, created_at, mode, topic_id, topic, pipeline_a, "
                    "pipeline_b, session_id, pair_key) "
                    "VALUES (:id, '2026-01-01', 'blinded', 't', 'topic', :a, :b, 's', :k)"
                ),
                {"id": f"b{i}", "a": json.dumps(a), "b": json.dumps(b), "k": key},
            )
            if i < 4:  # the last battle is not voted
                conn.execute(
                    text(
                        "INSERT INTO votes (battle_id, voted_at, winner, session_id, rate_key, "
                        "pair_key) VALUES (:id, '2026-01-01', 'a', 's', 'r', :k)"
                    ),
                    {"id": f"b{i}", "k": key},
                )
    engine.dispose()
    store = VoteStore(url)
    ab, ac, cd = (tuple(sorted((x["spec"], y["spec"]))) for x, y in [(A, B), (A, C), (C, D)])
    assert store.vote_counts() == {ab: 2, ac: 1, cd: 1} == _counted_in_the_log(store.engine)
    store.vote("b4", "tie", "s", "client:1")
    store.vote(_battle(store, B, D), "b", "s", "client:1")
    expected = {ab: 3, ac: 1, cd: 1, tuple(sorted((B["spec"], D["spec"]))): 1}
    assert store.vote_counts() == expected == _counted_in_the_log(store.engine)
    with store.engine.begin() as conn:  # derived: a rebuild from the log gives the same table
        conn.execute(text("UPDATE pair_votes SET votes = 0"))
        rebuild_pair_votes(conn)
    assert store.vote_counts() == expected
    with store.engine.connect() as conn:
        assert _versions(conn) == LATEST
        with pytest.raises(IntegrityError, match="append-only"):  # the log itself stays append-only
            conn.execute(text("UPDATE votes SET pair_key = NULL"))
    store.engine.dispose()


def test_vote_counts_do_not_read_the_log(tmp_path):
    """Sampling a battle's pair reads pair_votes (one row per pair), never the votes themselves: SQLite's
    authorizer names every table the statement reads."""
    store = VoteStore(f"sqlite:///{tmp_path / 'votes.db'}")
    for a, b in [(A, B), (A, C), (B, A)]:
        store.vote(_battle(store, a, b), "a", "s", "client:1")
    read: set[str] = set()

    def authorize(action, table, *_):
        if action == sqlite3.SQLITE_READ:
            read.add(table)
        return sqlite3.SQLITE_OK

    def watch(conn, *_):
        conn.connection.driver_connection.set_authorizer(authorize)

    event.listen(store.engine, "before_cursor_execute", watch)
    try:
        counts = store.vote_counts()
    finally:
        event.remove(store.engine, "before_cursor_execute", watch)
        with store.engine.connect() as conn:
            conn.connection.driver_connection.set_authorizer(None)
    assert counts == {tuple(sorted((A["spec"], B["spec"]))): 2, tuple(sorted((A["spec"], C["spec"]))): 1}
    assert read == {"pair_votes"}
    store.engine.dispose()


def test_leaderboard_splits(store):
    for a, b, w in [(A, B, "a"), (A, C, "b"), (B, C, "tie")]:
        store.vote(_battle(store, a, b), w, "s", "client:1")
    store.vote(_battle(store, A, B, mode="unblinded"), "b", "s", "client:1")
    rows = store.battles()
    assert len(rows) == 3 and len(store.battles(include_unblinded=True)) == 4
    assert [(x.a, x.b, x.winner) for x in split_battles(rows, "r")] == [
        ("bm25@100 | none", "dense:minilm@100 | none", "a")
    ]
    assert [(x.a, x.b) for x in split_battles(rows, "ag")] == [("extractive", "smollm2")]
    assert len(split_battles(rows, "rag")) == 3


def test_an_audit_batch_written_again_adds_no_row_twice(url):
    """A batch whose commit was applied but whose acknowledgement was lost (the database went away) is written
    again by the backlog: each row carries the id it was queued with, so the log keeps one of each."""
    from ragnarok.auth.store import AuthStore

    store = AuthStore(url)
    for status in (200, 429):
        store.audit(
            {
                "owner": "key:1",
                "key_name": "k",
                "method": "POST",
                "route": "/v1/generate",
                "status": status,
                "generators": "[]",
                "calls": 1,
                "tokens": 0,
                "ms": 1.0,
            }
        )
    store.flush()
    assert len(store.audit_rows()) == 2
    batch = [{**r, "row_id": row_id} for r, row_id in zip(store.audit_rows(), _row_ids(store))]
    store._write_audit(batch)  # the retry of a batch already committed
    store._write_audit(batch[:1])
    assert sorted(r["status"] for r in store.audit_rows()) == [200, 429]
    store.engine.dispose()


def _row_ids(store) -> list[str]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT row_id FROM audit_log ORDER BY id DESC"))]
