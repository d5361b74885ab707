"""The service's stores going away under load, at the instance level: two ``ragnarok serve`` instances
on one real PostgreSQL that is stopped (``pg_ctl stop -m fast``) and started again while keyed requests and arena
votes go on, and a real Redis (the per-minute limits' store) stopped, paused and started again.

What must hold: every route that needs the database answers 503 with ``Retry-After`` (never 500) while it is
gone, routes that need none keep answering, the service is back when the database is; no vote answered as
recorded is lost and none refused is recorded; the backend calls never pass the key's budget and every one is
counted (the reservations of the requests cut by the outage settled afterwards); the audit log loses no row.
Redis down: a request that must be counted is refused (503 naming the rate-limit store), within a bound, and
nothing is spent. The recovery times are printed (``-s``) for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections import Counter

import httpx
import pytest
from servers import ragnarok_serve, redis_server, serve_app
from test_keys import KEY_ENV, KEY_VALUE, _bearer, _generate, _paid

pytestmark = pytest.mark.slow
MODEL = "ok:faults"
BUDGET = 60
TOPIC = {"query": "gzip compression", "retriever": "bm25", "k": 3}


def _until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Load:
    """Clients that send keyed ``/v1/generate`` requests to the instances and vote on stored battles, each
    in a loop, until :meth:`stop`; every answer is kept with the time it came."""

    def __init__(self, urls: list[str], secret: str, votes, battles: list[str], clients: int = 4):
        self.urls, self.secret, self.votes = urls, secret, votes
        self.answers: list[tuple[float, httpx.Response]] = []
        self.voted: list[tuple[float, str, bool, str]] = []  # (when, battle, recorded, what the visitor saw)
        self._stop = threading.Event()
        self.errors: list[BaseException] = []
        self._battles = iter(battles)
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._guard, args=(self._ask, i)) for i in range(clients)]
        self.threads += [threading.Thread(target=self._guard, args=(self._vote, i)) for i in range(2)]
        for thread in self.threads:
            thread.start()

    def _guard(self, work, i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - seen by until()
            self.errors.append(exc)
            raise

    def until(self, condition, timeout_s: float, what: str) -> None:
        _until(lambda: self.errors or condition(), timeout_s, what)
        assert not self.errors, self.errors

    def _ask(self, i: int) -> None:
        while not self._stop.is_set():
            answer = _generate(self.urls[i % len(self.urls)], self.secret, generator="paid")
            self.answers.append((time.monotonic(), answer))
            self._stop.wait(0.1)

    def _vote(self, i: int) -> None:
        while not self._stop.is_set():
            with self._lock:
                battle = next(self._battles, None)
            if battle is None:
                return
            view = self.votes.vote(battle, "a", f"session-{i}", f"client-{i}")
            self.voted.append((time.monotonic(), battle, view.voted, view.status))
            self._stop.wait(0.05)

    def count(self, status: int, since: float = 0.0) -> int:
        return sum(r.status_code == status and at >= since for at, r in list(self.answers))

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join()


def _battles(store, n: int) -> list[str]:
    from ragnarok.arena.pool import PipelineId

    answer = {"text": "gzip compresses files.", "references": []}
    a, b = (PipelineId(f"bm25@5 | {g}", "bm25@5", "none", g).as_dict() for g in ("extractive", "other"))
    return [store.create_battle("blinded", "q1", "gzip", a, b, answer, answer, None, None, "setup") for _ in range(n)]


def _rows(url: str, sql: str) -> list:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql)))
    finally:
        engine.dispose()


def test_postgresql_restarted_under_load(own_postgres, demo_settings, tmp_path):
    """Keyed requests on two instances and votes go on while PostgreSQL stops and starts again."""
    from fakes import flaky_openai_app

    from api.main import create_app
    from ragnarok.arena.store import VoteStore
    from ragnarok.auth.store import AuthStore
    from ragnarok.core.settings import Settings
    from webui.votes import VoteLog

    url = own_postgres.url
    backend = flaky_openai_app()
    _, secret = AuthStore(url).create("loaded", ["retrieve", "generate"], budget_calls=BUDGET)
    owner = f"key:{AuthStore(url).find('loaded').id}"
    battles = _battles(VoteStore(url), 600)
    votes = VoteLog(Settings(data_dir=tmp_path / "votes", database_url=url, arena_votes_per_minute=100_000))
    open_app = create_app(Settings(data_dir=demo_settings.data_dir, auth="off", database_url=url), arena=False)
    with serve_app(backend) as base, serve_app(open_app) as open_url:
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "RAGNAROK_AUTH": "keys",
            "RAGNAROK_DATABASE_URL": url,
            KEY_ENV: KEY_VALUE,
            "RAGNAROK_GENERATORS": json.dumps([_paid("paid", base, MODEL)]),
        }
        with ragnarok_serve(env, tmp_path / "a.log") as a, ragnarok_serve(env, tmp_path / "b.log") as b:
            load = Load([a, b], secret, votes, battles)
            try:
                load.until(
                    lambda: load.count(200) >= 4 and sum(ok for *_, ok, _ in load.voted) >= 4,
                    120,
                    "answers before the outage",
                )
                own_postgres.stop()
                down = time.monotonic()
                load.until(
                    lambda: load.count(503, down) >= 8 and sum(not ok for at, _, ok, _ in load.voted if at > down) >= 3,
                    60,
                    "503s while it is gone",
                )
                # a route that needs no database still answers; an unknown key cannot be checked: 503
                assert httpx.post(open_url + "/v1/retrieve", json=TOPIC, timeout=60).status_code == 200
                unknown = httpx.get(a + "/v1/templates", headers=_bearer("rk_" + "x" * 43), timeout=60)
                assert unknown.status_code == 503 and unknown.headers["retry-after"] == "5", unknown.text
                _usage_fails_cleanly(url)
                own_postgres.start()
                up = time.monotonic()
                load.until(lambda: load.count(200, up) >= 2, 60, "a keyed answer after PostgreSQL's return")
                keyed_s = min(at for at, r in load.answers if at >= up and r.status_code == 200) - up
                load.until(lambda: any(ok for at, _, ok, _ in load.voted if at >= up), 60, "a vote after it")
                vote_s = min(at for at, _, ok, _ in load.voted if at >= up and ok) - up
                load.until(lambda: load.count(429, up) >= 1, 120, "the budget spent")
            finally:
                load.stop()
            print(
                f"\nPostgreSQL back: first keyed 200 after {keyed_s:.2f} s, first vote after {vote_s:.2f} s; "
                f"while it was gone {load.count(503, down)} of "
                f"{sum(down <= at < up for at, _ in load.answers)} keyed requests were 503"
            )
            store = AuthStore(url)
            _every_audit_row(url, load.answers, [tmp_path / "a.log", tmp_path / "b.log"])
    statuses = Counter(r.status_code for _, r in load.answers)
    assert set(statuses) <= {200, 429, 503}, statuses  # never a 500
    for _, r in load.answers:
        if r.status_code == 503:
            assert r.headers["retry-after"] == "5" and "service database is unavailable" in r.json()["detail"]
        if r.status_code == 429:
            assert "budget has" in r.json()["detail"], r.text
    # every call counted, none past the budget, no reservation left behind
    spent = sum(int(r.headers["ragnarok-backend-calls"]) for _, r in load.answers if r.status_code == 200)
    assert backend.state.calls[MODEL] == spent == BUDGET
    assert [u["calls"] for u in store.usage(owner)] == [BUDGET]
    assert _rows(url, f"SELECT * FROM key_reservations WHERE owner = '{owner}'") == []
    # a vote answered as recorded is recorded, one refused is not, and the visitor was told to try again
    recorded = {battle for (battle,) in _rows(url, "SELECT battle_id FROM votes")}
    assert recorded == {battle for _, battle, ok, _ in load.voted if ok}
    refused = [html for *_, ok, html in load.voted if not ok]
    assert refused and all("try again in a few seconds" in html and "postgresql" not in html for html in refused)


def _every_audit_row(url: str, answers: list, logs: list) -> None:
    """One audit row per answer the clients got (those of the outage included), within 60 s; when not, the
    statuses on each side and what the servers logged about the audit say which rows are missing or extra."""
    sql = "SELECT status FROM audit_log WHERE route = '/v1/generate'"
    try:
        _until(lambda: len(_rows(url, sql)) == len(answers), 60, "every audit row (those of the outage included)")
    except AssertionError as exc:
        rows = Counter(status for (status,) in _rows(url, sql))
        seen = Counter(r.status_code for _, r in answers)
        said = [
            line
            for log in logs
            for line in log.read_text(errors="replace").splitlines()
            if "audit" in line or "Traceback" in line or "Error" in line
        ]
        raise AssertionError(
            f"{exc}: audit rows by status {dict(rows)}, answers by status {dict(seen)}; "
            f"the servers said:\n" + "\n".join(said[-40:])
        ) from None


def _usage_fails_cleanly(url: str) -> None:
    """``ragnarok keys usage`` without its database: one ``error:`` line, exit 2."""
    from typer.testing import CliRunner

    from ragnarok.auth.cli import keys_app
    from ragnarok.core.settings import get_settings

    get_settings.cache_clear()  # the command reads its settings from this environment
    try:
        out = CliRunner().invoke(keys_app, ["usage"], env={"RAGNAROK_DATABASE_URL": url})
    finally:
        get_settings.cache_clear()
    assert out.exit_code == 2 and out.output.startswith("error: ") and "Traceback" not in out.output, out.output


def test_a_spend_cut_by_the_outage_is_recorded_when_the_database_is_back(own_postgres):
    """A request reserved before PostgreSQL went away and ended while it was gone: its spend waits (its
    reservation still counted) and is recorded once when the database is back; settled again (an answer lost),
    it adds nothing. The audit row queued meanwhile is written too."""
    from ragnarok.auth.store import AuthStore

    store = AuthStore(own_postgres.url)
    key, _ = store.create("cut", ["generate"], budget_calls=10)
    principal = key.principal()
    reservation = store.reserve(principal, 3)
    own_postgres.stop()
    store.settle(reservation, 2, 20)  # no error: it waits
    store.audit(
        {
            "owner": principal.owner,
            "key_name": "cut",
            "method": "POST",
            "route": "/v1/generate",
            "status": 200,
            "generators": "{}",
            "calls": 2,
            "tokens": 20,
            "ms": 1.0,
        }
    )
    own_postgres.start()
    store.flush(30)
    assert store.usage(principal.owner)[0]["calls"] == 2 and store.left(principal) == 8
    store.settle(reservation, 2, 20)  # again: already settled
    assert store.usage(principal.owner)[0]["calls"] == 2 and store.left(principal) == 8
    assert [r["status"] for r in store.audit_rows(principal.owner)] == [200]


def test_a_store_made_while_the_database_is_down_keeps_its_audit_rows(own_postgres):
    """An instance whose first request came during an outage: its store could not be opened then. The rows of
    what it answered meanwhile (503s) wait in the backlog, and are written once the database is back and the
    store opens (they were lost when opening the store was a precondition of queueing them)."""
    from ragnarok.arena.db import StoreError
    from ragnarok.auth.store import AuthStore

    row = {
        "owner": "key:made-while-down",
        "key_name": "rk_down",
        "method": "POST",
        "route": "/v1/generate",
        "status": 503,
        "generators": "{}",
        "calls": 0,
        "tokens": 0,
        "ms": 1.0,
    }
    own_postgres.stop()
    try:
        store = AuthStore(own_postgres.url)  # no connection yet
        with pytest.raises(StoreError, match="be opened"):
            store.lookup("rk_" + "x" * 43)
        store.audit(row)
        store.audit({**row, "status": 401})
        assert not store.flush(0.5) and store._audit.waiting == 2
    finally:
        own_postgres.start()
    store.flush(30)
    assert sorted(r["status"] for r in store.audit_rows("key:made-while-down")) == [401, 503]


def test_rows_queued_while_another_thread_opens_the_store_wait_for_it(own_postgres):
    """The audit thread finds another thread still opening the store (migrating a slow database) past the
    connect deadline: its batch fails as unreachable and is tried again, never dropped."""
    from ragnarok.arena.db import CONNECT_TIMEOUT_S, StoreError
    from ragnarok.auth.backlog import unreachable
    from ragnarok.auth.store import AuthStore

    store = AuthStore(own_postgres.url)
    row = {
        "owner": "key:opened-late",
        "key_name": "rk_late",
        "method": "POST",
        "route": "/v1/generate",
        "status": 200,
        "generators": "{}",
        "calls": 0,
        "tokens": 0,
        "ms": 1.0,
    }
    store._opening.acquire()  # another thread opening it, slowly
    try:
        with pytest.raises(StoreError) as info:
            store.lookup("rk_" + "x" * 43)
        assert "still opening it" in str(info.value) and unreachable(info.value)
        store.audit(row)
        time.sleep(CONNECT_TIMEOUT_S + 0.5)  # the audit thread's first try has timed out meanwhile
    finally:
        store._opening.release()
    assert store.flush(30)
    assert [r["status"] for r in store.audit_rows("key:opened-late")] == [200]


def test_a_database_that_answers_no_connection_is_an_error_not_a_hang(own_postgres):
    """PostgreSQL's server paused (SIGSTOP: connections are accepted by the kernel, never answered): opening
    the store fails with a one-line StoreError once the connect deadline has passed, instead of waiting for
    ever (the bound below is only the test's guard against a hang)."""
    import signal

    from ragnarok.arena.db import StoreError
    from ragnarok.auth.store import AuthStore

    failed: list[BaseException] = []

    def open_store() -> None:
        try:
            AuthStore(own_postgres.url).keys()  # its first use opens it
        except StoreError as exc:
            failed.append(exc)

    pid = own_postgres.postmaster()
    os.kill(pid, signal.SIGSTOP)
    try:
        opening = threading.Thread(target=open_store, daemon=True)
        opening.start()
        opening.join(120)
        assert failed, "the store still waits for a database that never answers"
        assert "could not be opened" in str(failed[0]) and "\n" not in str(failed[0]), failed
    finally:
        os.kill(pid, signal.SIGCONT)


def test_redis_down_fails_closed(demo_settings, tmp_path):
    """Per-minute limits in Redis: stopped, a keyed request is refused (503 naming the rate-limit store, with
    Retry-After) and spends nothing; paused (it never answers), the refusal comes within the socket timeout
    while the server answers others; started again, the key is served; the arena's battles fail closed too."""
    import asyncio

    from fakes import flaky_openai_app

    from api.main import create_app
    from ragnarok.auth.store import AuthStore
    from ragnarok.core.settings import Settings
    from ragnarok.stages.generate.base import GeneratorConfig
    from webui.admission import Admission

    pytest.importorskip("redis")
    backend = flaky_openai_app()
    with redis_server(tmp_path) as redis, serve_app(backend) as base:
        os.environ[KEY_ENV] = KEY_VALUE
        settings = Settings(
            data_dir=demo_settings.data_dir,
            auth="keys",
            rate_limit_storage=redis.url,
            database_url=f"sqlite:///{tmp_path / 'service.db'}",
            generators=[GeneratorConfig(**_paid("paid", base, MODEL))],
        )
        store = AuthStore.for_settings(settings)
        _, secret = store.create("limited", ["generate"], rpm=1000, budget_calls=10)
        admission = Admission(settings)
        try:
            with serve_app(create_app(settings, arena=False)) as url:
                assert _generate(url, secret).status_code == 200
                redis.stop()
                refused = _generate(url, secret)
                assert refused.status_code == 503, refused.text
                assert refused.headers["retry-after"] == "5"
                assert "rate-limit store is unreachable" in refused.json()["detail"]
                assert "rate-limit store is unreachable" in asyncio.run(admission.admit("10.0.0.1"))
                redis.start()
                up = time.monotonic()
                _until(lambda: _generate(url, secret).status_code == 200, 60, "service after Redis' return")
                back_s = time.monotonic() - up
                assert asyncio.run(admission.admit("10.0.0.1")) is None
                redis.pause()  # accepts connections, never answers
                answers: list[tuple[str, float]] = []
                started = time.monotonic()
                waiting = threading.Thread(
                    target=lambda: answers.append((_generate(url, secret).text, time.monotonic() - started))
                )
                waiting.start()
                time.sleep(0.5)  # the keyed request reaches the limiter (an order, not a timing, is checked)
                # the event loop is not held by the dead store: the server answers meanwhile
                assert httpx.get(url + "/healthz", timeout=60).status_code == 200
                healthz_s = time.monotonic() - started
                waiting.join(timeout=60)
                assert answers and "rate-limit store is unreachable" in answers[0][0], answers
                assert healthz_s < answers[0][1]
                assert "rate-limit store is unreachable" in asyncio.run(admission.admit("10.0.0.2"))
                redis.resume()
                _until(lambda: _generate(url, secret).status_code == 200, 60, "service after Redis resumed")
        finally:
            os.environ.pop(KEY_ENV, None)
        print(
            f"\nRedis: back {back_s:.2f} s after redis-server answered again; a paused Redis refused "
            f"in {answers[0][1]:.2f} s"
        )
        owner = f"key:{store.find('limited').id}"
        assert [u["calls"] for u in store.usage(owner)] == [backend.state.calls[MODEL]] == [3]


def _pg_processes(postmaster: int) -> list[int]:
    """The postmaster and every PostgreSQL process it started (the backends serving our connections)."""
    from pathlib import Path

    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


def test_a_frozen_postgresql_is_a_503_within_5_s(own_postgres, demo_settings, tmp_path):
    """Every PostgreSQL process stopped (SIGSTOP: the kernel still accepts and acknowledges,
    nothing answers) under a keyed instance: a request that needs the database gets its 503 with Retry-After
    within 5 s (the 4 s bound on a store call; not after the freeze), and /readyz says the database is not ready; the service is
    back at once after SIGCONT."""
    import signal

    from fakes import flaky_openai_app

    from ragnarok.arena.db import STORE_DEADLINE_S
    from ragnarok.auth.store import AuthStore

    url = own_postgres.url
    _, secret = AuthStore(url).create("frozen", ["retrieve", "generate"], budget_calls=100)
    with serve_app(flaky_openai_app()) as base:
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "RAGNAROK_AUTH": "keys",
            "RAGNAROK_DATABASE_URL": url,
            KEY_ENV: KEY_VALUE,
            "RAGNAROK_GENERATORS": json.dumps([_paid("paid", base, "ok:frozen")]),
        }
        with ragnarok_serve(env, tmp_path / "serve.log") as serve:
            assert _generate(serve, secret, generator="paid").status_code == 200
            assert httpx.get(serve + "/readyz", timeout=30).status_code == 200
            frozen = _pg_processes(own_postgres.postmaster())
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            try:
                start = time.monotonic()
                answer = _generate(serve, secret, generator="paid")
                took = time.monotonic() - start
                ready = httpx.get(serve + "/readyz", timeout=30)
            finally:
                for pid in frozen:
                    os.kill(pid, signal.SIGCONT)
            print(f"\nfrozen PostgreSQL: 503 after {took:.2f} s")
            assert answer.status_code == 503 and answer.headers.get("retry-after"), answer.text
            assert took < STORE_DEADLINE_S + 1.0, took
            assert ready.status_code == 503 and ready.json()["checks"]["database"] != "ok", ready.text
            _until(lambda: _generate(serve, secret, generator="paid").status_code == 200, 30, "the service back")


def test_audit_rows_waiting_for_the_database_outlive_a_kill_9(own_postgres, demo_settings, tmp_path):
    """Keyed requests answered 503 while PostgreSQL is stopped wait for it with their audit
    rows, kept on disk too (the spool); the instance is killed (SIGKILL) before the database is back; another
    instance of the same host writes them once it is: every request has its row, with the status it got."""
    import sqlite3
    from pathlib import Path

    from ragnarok.auth.store import AuthStore

    url = own_postgres.url
    store = AuthStore(url)
    record, secret = store.create("spooled", ["retrieve"])
    data = tmp_path / "data"
    shutil.copytree(demo_settings.data_dir, data, symlinks=True, ignore=shutil.ignore_patterns("spool"))
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data),
        "RAGNAROK_AUTH": "keys",
        "RAGNAROK_DATABASE_URL": url,
        "RAGNAROK_AUTH_CACHE_S": "0",
        "RAGNAROK_LOG_LEVEL": "info",
    }

    def ask(base: str) -> int:
        return httpx.post(base + "/v1/retrieve", json=TOPIC, headers=_bearer(secret), timeout=60).status_code

    def spooled() -> int:
        total = 0
        for path in Path(data / "spool").glob("audit-*.db"):
            with sqlite3.connect(path) as conn:
                total += conn.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
        return total

    started: list = []
    with ragnarok_serve(env, tmp_path / "a.log", started=started) as a:
        assert [ask(a) for _ in range(3)] == [200] * 3
        # written before the stop, so that the spool holds the 503s' rows alone and 5 on disk are all of them (a
        # batch cut by the stop is spooled too: 5 rows could then be on disk while a 503's is still queued)
        _until(lambda: len(store.audit_rows(limit=1000)) >= 3, 30, "the first rows written")
        own_postgres.stop()
        try:
            assert [ask(a) for _ in range(5)] == [503] * 5
            _until(lambda: spooled() >= 5, 30, "the rows on disk")
            started[0].kill()
            started[0].wait(30)
        finally:
            own_postgres.start()
    with ragnarok_serve(env, tmp_path / "b.log"):  # its sweep runs every 10 s; a loaded machine delays it
        try:
            _until(lambda: len(store.audit_rows(limit=1000)) >= 8, 150, "the dead instance's rows written")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the new instance said: {(tmp_path / 'b.log').read_text()[-3000:]}") from None
    rows = store.audit_rows(limit=1000)
    assert sorted(r["status"] for r in rows) == [200] * 3 + [503] * 5, rows
    assert not list(Path(data / "spool").glob("audit-*.db")) or spooled() == 0
