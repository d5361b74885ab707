"""Three `ragnarok serve` instances behind nginx, on one PostgreSQL and one Redis, started by `deploy/cluster up`
: a budget shared through the proxy, arena votes recorded once each across instances (Gradio's
sessions kept on one instance by nginx's affinity cookie), `kill -9` of an instance under load, its arena
visitor served again, a dense index rebuilt under every instance.

Everything is real: the script, nginx (Debian's package), PostgreSQL (initdb'd by the script), redis-server,
the demo index, Gradio's own client; the paid backend is a local counting OpenAI-compatible server
(tests/fakes.py). One cluster for the whole module."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from servers import free_port
from test_arena_public import _status
from test_index_lifecycle import docs
from test_keys import (
    CANDIDATES,
    KEY_ENV,
    KEY_VALUE,
    _bearer,
    _paid,
    fake,  # noqa: F401 - the counting paid backend (a module fixture)
)

from ragnarok.deploy.nginx import AFFINITY_COOKIE

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "cluster"
TOPIC = "compress a file with gzip"
POOL = ["bm25@2 | extractive", "bm25@3 | extractive"]  # the cheapest battles: 2,000 of them
T = 180

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:.*no_silent_downcasting")]


def _needs(tool: str) -> None:
    if not (Path(tool).exists() or shutil.which(tool)):
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{tool} is missing: CI must run the cluster (make system-deps)")
        pytest.skip(f"{tool} not installed (make system-deps)")


def _cluster(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def cluster(demo_settings, fake):
    """`deploy/cluster up --instances 3`: yields (its printed lines as a dict, env, the cluster's directory,
    the rebuildable index's directory); `deploy/cluster down` at the end."""
    for tool in ("/usr/sbin/nginx", "redis-server"):
        _needs(tool)
    from pg import pg_bin_dir

    if pg_bin_dir() is None:
        _needs("initdb")
    from ragnarok.collection.demo_index import ensure_dense_index
    from ragnarok.collection.lucene_index import index_documents

    # under /tmp, reachable by the postgres user PostgreSQL runs as when the tests run as root
    root = Path(tempfile.mkdtemp(prefix="ragnarok-cluster-", dir="/tmp"))
    root.chmod(0o755)
    index = root / "x-index"
    index_documents(iter(docs(12)), index)
    ensure_dense_index(index, "minilm")
    _, base = fake
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "RAGNAROK_AUTH": "keys",
        KEY_ENV: KEY_VALUE,
        "RAGNAROK_GENERATORS": json.dumps(
            [
                _paid("paid", base, "ok:cluster"),
                # the embedded model left out of the arena and its warm-up
                {"name": "smollm2", "backend": "llama-cpp", "model": "SmolLM2-135M-Instruct", "paid": True},
            ]
        ),
        "RAGNAROK_ARENA_POOL": json.dumps(POOL),
        "RAGNAROK_INDEXES": json.dumps({"x": str(index)}),
        "RAGNAROK_ARENA_VOTES_PER_MINUTE": "100000",
        "RAGNAROK_ARENA_BATTLES_PER_MINUTE": "100000",
    }
    env.pop("RAGNAROK_DATABASE_URL", None)
    data = root / "cluster"
    port = free_port()
    try:
        up = _cluster("up", "--instances", "3", "--port", str(port), "--data-dir", str(data), "--no-dense", env=env)
        assert up.returncode == 0, up.stderr
        lines = dict(line.split("=", 1) for line in up.stdout.splitlines() if "=" in line)
        yield lines, env, data, index
    finally:
        down = _cluster("down", "--data-dir", str(data), env=env)
        shutil.rmtree(root, ignore_errors=True)
    stopped = down.stdout.removeprefix("stopped ").split(";")[0].split(", ")  # the killed instances are not
    assert down.returncode == 0 and {"nginx", "redis", "postgresql"} <= set(stopped), down.stdout + down.stderr


def _state(data: Path) -> dict:
    return json.loads((data / "cluster.json").read_text())


def _urls(data: Path) -> dict[str, str]:
    """cluster.env: the database and Redis URLs, passwords in them (the printed ones are masked)."""
    return dict(line.split("=", 1) for line in (data / "cluster.env").read_text().splitlines())


def _pid(data: Path, port: int) -> int:
    """The PID of the instance on ``port`` now (supervisord may have started it again since `up`)."""
    from ragnarok.deploy.supervisor import Supervisor

    name = f"instance-{_state(data)['ports'].index(port) + 1}"
    return Supervisor(data / "run").info()[name]["pid"]


def _key(cluster, name: str, **limits) -> str:
    from ragnarok.auth.store import AuthStore
    from ragnarok.core.settings import Settings

    url = _urls(cluster[2])["RAGNAROK_DATABASE_URL"]
    store = AuthStore.for_settings(Settings(auth="keys", database_url=url))
    return store.create(name, limits.pop("scopes", ["retrieve", "generate"]), **limits)[1]


def _sql(cluster, query: str, **params):
    from sqlalchemy import create_engine, text

    engine = create_engine(_urls(cluster[2])["RAGNAROK_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            return conn.execute(text(query), params).all()
    finally:
        engine.dispose()


def test_up_prints_its_parts_and_a_second_up_says_it_is_up(cluster):
    lines, env, data, _ = cluster
    pids = [int(p) for p in lines["PIDS"].split(",")]
    assert len(pids) == 3 and all(Path(f"/proc/{p}").exists() for p in pids)
    assert lines["URL"].startswith("http://127.0.0.1:") and lines["DATABASE_URL"].startswith("postgresql")
    assert httpx.get(lines["URL"] + "/healthz", timeout=T).status_code == 200
    again = _cluster(
        "up", "--instances", "3", "--port", lines["URL"].rsplit(":", 1)[1], "--data-dir", str(data), env=env
    )
    assert again.returncode == 0 and "already up" in again.stderr, again.stderr
    assert f"PIDS={lines['PIDS']}" in again.stdout


def test_a_budget_of_50_calls_holds_across_instances(cluster, fake):
    """300 concurrent keyed requests through the proxy on a 50-call budget, each retried as its 503 asks (after
    Retry-After): exactly 50 reach the backend and exactly 50 are answered, the rest refused (429)."""
    app, _ = fake
    url = cluster[0]["URL"]
    secret = _key(cluster, "budget-50", budget_calls=50)

    async def run(n: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=T, limits=httpx.Limits(max_connections=300)) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        url + "/v1/generate", headers=_bearer(secret), json={"request": CANDIDATES, "generator": "paid"}
                    )
                    for _ in range(n)
                )
            )

    answered, pending, rounds = [], 300, 0
    while pending and rounds < 6:
        answers = asyncio.run(run(pending))
        # 300 reservations on one key queue for its row: past the bounds on a store call, a request is told the
        # database is busy (503, Retry-After), never that it is down, and never runs uncounted
        busy = [a for a in answers if a.status_code == 503]
        assert all("busy" in a.json()["detail"] or "in time" in a.json()["detail"] for a in busy), busy[0].text
        assert all(a.headers.get("retry-after") for a in busy)
        answered += [a.status_code for a in answers if a.status_code != 503]
        pending, rounds = len(busy), rounds + 1
        if busy:
            time.sleep(max(int(a.headers["retry-after"]) for a in busy))
    assert pending == 0, f"{pending} requests still told 'busy' after {rounds} rounds"
    assert answered.count(200) == 50 and set(answered) == {200, 429}, sorted(set(answered))
    assert app.state.calls["ok:cluster"] == 50


def _log(data: Path) -> list[list[str]]:
    """nginx's access log: time, status, method, path, upstream(s), their statuses, seconds, affinity cookie."""
    log = data / "logs" / "nginx.access.log"
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def _instance_of(data: Path, cookie: str, timeout_s: float = 10) -> str:
    """The instance (host:port) nginx sent the arena visitor with ``cookie`` to, from its access log."""
    log = data / "logs" / "nginx.access.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # the log is flushed every second
        for fields in _log(data):
            if fields[-1] == cookie and fields[3].endswith("/queue/join"):
                return fields[4]
        time.sleep(0.2)
    raise AssertionError(f"no arena request with cookie {cookie} in {log}")


def _visitor(url: str, cookie: str):
    """A page of the arena behind the proxy: Gradio's client sending nginx's affinity cookie."""
    from gradio_client import Client

    return Client(
        f"{url}/arena/", headers={"Cookie": f"{AFFINITY_COOKIE}={cookie}"}, verbose=False, httpx_kwargs={"timeout": T}
    )


def _battle(page) -> str:
    """One blinded battle; returns its id (votable)."""
    outputs = page.predict(TOPIC, api_name="/battle")
    assert "Both answers are in" in _status(outputs), _status(outputs)
    return outputs[2]["battle"]


def _endpoints(url: str) -> dict[str, tuple[int, int]]:
    """The arena's Gradio events by API name: (fn_index, the id of the button that triggers it)."""
    config = httpx.get(url + "/arena/config", timeout=T).json()
    return {d["api_name"]: (d["id"], d["targets"][0][0]) for d in config["dependencies"] if d.get("api_name")}


async def _event(http: httpx.AsyncClient, url: str, session: str, event: tuple[int, int], data: list) -> list:
    """One Gradio event as the arena's page sends it (Gradio's queue: join, then its Server-Sent Events until
    ``process_completed``); its outputs. The session's State values stay on the server."""
    fn_index, trigger = event
    joined = await http.post(
        url + "/arena/gradio_api/queue/join",
        json={"data": data, "event_data": None, "fn_index": fn_index, "trigger_id": trigger, "session_hash": session},
    )
    assert joined.status_code == 200, joined.text
    async with http.stream("GET", url + "/arena/gradio_api/queue/data", params={"session_hash": session}) as sse:
        async for line in sse.aiter_lines():
            message = json.loads(line[5:]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                assert message.get("success"), message
                return message["output"]["data"]
    raise AssertionError("the event's stream ended without its outputs")


def test_2000_votes_through_the_proxy_are_each_recorded_once(cluster):
    """40 visitors (each its own affinity cookie and Gradio session) battle and vote 50 times each through
    nginx, as the page does it (Gradio's queue over HTTP: cheaper than Gradio's client for 4,000 events). The
    battle's id lives in the visitor's session: a vote reaches it only on the instance that ran the battle."""
    url = cluster[0]["URL"]
    events = _endpoints(url)
    battle, vote_a = events["battle"], events["vote_a"]

    async def visitor() -> list[str]:
        voted = []
        async with httpx.AsyncClient(timeout=T, cookies={AFFINITY_COOKIE: uuid.uuid4().hex}) as http:
            session = uuid.uuid4().hex[:11]
            for _ in range(50):
                # the battle's id (a State: None here), both panes, the JSON, the status, the buttons
                outputs = await _event(http, url, session, battle, [TOPIC, None])
                assert "Both answers are in" in outputs[4], outputs[4]
                status = (await _event(http, url, session, vote_a, [None]))[0]
                assert "Your vote is recorded" in status, status
                voted.append(outputs[3]["battle"])
        return voted

    async def everyone() -> list[str]:
        return [b for one in await asyncio.gather(*(visitor() for _ in range(40))) for b in one]

    voted = asyncio.run(everyone())
    assert len(set(voted)) == 2000
    rows = dict(_sql(cluster, "SELECT battle_id, COUNT(*) FROM votes GROUP BY battle_id"))
    assert {b: rows.get(b) for b in voted} == dict.fromkeys(voted, 1)


def _retrieve(base: str, secret: str, retriever: str) -> set[str]:
    answer = httpx.post(
        base + "/v1/retrieve",
        headers=_bearer(secret),
        timeout=T,
        json={"query": "alpha bravo topic", "retriever": retriever, "index": "x", "k": 20},
    )
    assert answer.status_code == 200, answer.text
    return {c["docid"].split("#")[0] for c in answer.json()["candidates"]}


def test_a_dense_index_rebuilt_under_the_instances_is_noticed_by_each(cluster):
    from ragnarok.collection.demo_index import ensure_dense_index
    from ragnarok.collection.lucene_index import index_documents

    _, _, data, index = cluster
    secret = _key(cluster, "rebuild", scopes=["retrieve"])
    instances = [f"http://127.0.0.1:{port}" for port in _state(data)["ports"]]
    old, new = {f"d{i}" for i in range(12)}, {f"new{i}" for i in range(5)}
    for base in instances:
        assert _retrieve(base, secret, "dense:minilm") <= old
    index_documents(iter(docs(5, prefix="new")), index)
    ensure_dense_index(index, "minilm")
    for base in instances:
        assert _retrieve(base, secret, "bm25") <= new
        assert _retrieve(base, secret, "dense:minilm") <= new


@pytest.fixture(scope="module")
def killed(cluster):
    """An arena visitor battles; its instance is killed with SIGKILL while 8 clients send /v1/retrieve through
    the proxy. Yields (the requests: (sent, ended, status or error), the kill's time, the visitor's cookie, the
    killed instance's address)."""
    lines, _, data, _ = cluster
    url, secret = lines["URL"], _key(cluster, "load", scopes=["retrieve"])
    cookie = uuid.uuid4().hex
    _battle(_visitor(url, cookie))
    victim = _instance_of(data, cookie)
    pid = _pid(data, int(victim.rsplit(":", 1)[1]))
    records: list[tuple[float, float, int | str]] = []
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(timeout=T) as http:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    status: int | str = http.post(
                        url + "/v1/retrieve", headers=_bearer(secret), json={"query": "gzip", "k": 5}
                    ).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                records.append((sent, time.monotonic(), status))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    while len(records) < 40:
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    while len([r for r in records if r[0] > killed_at]) < 80:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    return records, killed_at, cookie, victim


def test_kill_9_under_load_loses_no_request_sent_after_it(killed):
    records, killed_at, _, _ = killed
    after = [status for sent, _, status in records if sent > killed_at]
    assert len(after) >= 80 and set(after) == {200}, sorted(set(map(str, after)))


def test_the_killed_instances_arena_visitor_gets_a_new_battle(killed, cluster):
    """The visitor's next page (the same cookie) loads from another instance and battles there."""
    _, _, cookie, victim = killed
    url, data = cluster[0]["URL"], cluster[2]
    page = httpx.get(url + "/arena/", cookies={AFFINITY_COOKIE: cookie}, timeout=T)
    assert page.status_code == 200 and "gradio" in page.text.lower()
    seen = len(_log(data))
    _battle(_visitor(url, cookie))

    def joins() -> list[list[str]]:
        return [f for f in _log(data)[seen:] if f[-1] == cookie and f[3].endswith("/queue/join")]

    deadline = time.monotonic() + 10
    while not joins() and time.monotonic() < deadline:  # the log is flushed every second
        time.sleep(0.2)
    # answered by another instance, or by the victim itself when supervisord had it serving again by then
    assert joins() and all(f[1] == "200" for f in joins()), joins()


def test_a_part_that_fails_to_start_stops_the_others_and_is_named(tmp_path):
    """The first instance cannot build the demo index (its data directory is a file): `up` exits 2 naming it
    with its log's last lines, and the PostgreSQL and Redis it had started are stopped."""
    _needs("redis-server")
    root = Path(tempfile.mkdtemp(prefix="ragnarok-cluster-", dir="/tmp"))
    root.chmod(0o755)
    (root / "not-a-dir").touch()
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(root / "not-a-dir")}
    env.pop("RAGNAROK_DATABASE_URL", None)
    try:
        up = _cluster("up", "--instances", "2", "--port", str(free_port()), "--data-dir", str(root / "c"), env=env)
        assert up.returncode == 2 and up.stdout == "", up.stdout
        assert up.stderr.startswith("error: instance-1 failed to start: it exited; the last lines of "), up.stderr
        assert "Not a directory" in up.stderr
        from ragnarok.deploy.supervisor import Supervisor

        assert not Supervisor(root / "c" / "run").running()  # supervisord and its programs (Redis) stopped
        assert not (root / "c" / "run" / "supervisor.sock").exists()
        assert not (root / "c" / "postgres" / "data" / "postmaster.pid").exists()
        assert "instance-2" not in (root / "c" / "logs" / "supervisord.log").read_text()  # never started
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _page_battle(page) -> None:
    """A blinded battle on the arena's page, as a visitor clicks it: both answers shown, the votes open."""
    from playwright.sync_api import expect

    topic = page.locator("#rg-topic textarea")
    topic.fill(TOPIC)
    page.locator("#rg-go").click()
    page.locator("#rg-pane-a .rg-answer").wait_for()
    page.locator("#rg-pane-b .rg-answer").wait_for()
    expect(page.locator("#rg-vote-a")).to_be_enabled()


def test_in_chromium_the_killed_instances_visitor_gets_a_new_battle(cluster, tmp_path):
    """A visitor in Chromium battles; its instance is killed; the reloaded page comes from another instance
    (nginx's cookie, kept by the browser, now hashes elsewhere) and battles there: no error page."""
    from browser import chromium

    url, data = cluster[0]["URL"], cluster[2]
    with chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.set_default_timeout(T * 1000)
        assert page.goto(url + "/arena/").status == 200
        _page_battle(page)
        cookie = next(c["value"] for c in context.cookies() if c["name"] == AFFINITY_COOKIE)
        victim = _instance_of(data, cookie)
        os.kill(_pid(data, int(victim.rsplit(":", 1)[1])), signal.SIGKILL)
        reloaded = page.reload()
        assert reloaded is not None and reloaded.status == 200
        _page_battle(page)
        assert "error" not in page.locator("#rg-status").inner_html().lower()


# --- supervision, status, restart, secrets, shapes ----------------------------------------------


def _status_lines(data: Path, env: dict) -> tuple[int, dict[str, list[str]]]:
    done = _cluster("status", "--data-dir", str(data), env=env)
    return done.returncode, {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}


def _all_running(data: Path, env: dict, timeout_s: float = 60) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        code, parts = _status_lines(data, env)
        if code == 0:
            return parts
        assert time.monotonic() < deadline, parts
        time.sleep(0.5)


def test_a_killed_instance_serves_again_within_10s_with_nobody_acting(cluster):
    _, env, data, _ = cluster
    _all_running(data, env)  # an instance killed by a test before is back
    port = _state(data)["ports"][1]
    pid = _pid(data, port)
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    while not _healthy(f"http://127.0.0.1:{port}/healthz"):
        assert time.monotonic() - killed_at < 10, "instance-2 does not serve again 10 s after kill -9"
        time.sleep(0.1)
    assert _pid(data, port) != pid


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_status_lists_every_part_and_restart_renews_one_while_the_others_serve(cluster):
    lines, env, data, _ = cluster
    parts = _all_running(data, env)
    assert set(parts) == {"postgresql", "redis", "instance-1", "instance-2", "instance-3", "nginx"}, parts
    assert all(p[0] == "RUNNING" for p in parts.values()), parts
    assert all(parts[f"instance-{i}"][-1] == "ready" for i in (1, 2, 3)), parts
    before = {name: p[2] for name, p in parts.items()}
    statuses: list[int] = []
    stop = threading.Event()

    def client() -> None:  # GETs through the proxy while instance-3 restarts: nginx retries them elsewhere
        while not stop.is_set():
            try:
                statuses.append(httpx.get(lines["URL"] + "/healthz", timeout=T).status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)
            time.sleep(0.02)

    thread = threading.Thread(target=client)
    thread.start()
    try:
        done = _cluster("restart", "instance-3", "--data-dir", str(data), env=env)
    finally:
        stop.set()
        thread.join()
    assert done.returncode == 0 and done.stdout.startswith("restarted instance-3 (pid "), done.stdout + done.stderr
    after = {name: p[2] for name, p in _all_running(data, env).items()}
    assert after["instance-3"] != before["instance-3"]
    assert {n: after[n] for n in after if n != "instance-3"} == {n: before[n] for n in before if n != "instance-3"}
    assert statuses and set(statuses) == {200}, sorted(set(map(str, statuses)))
    unknown = _cluster("restart", "instance-9", "--data-dir", str(data), env=env)
    assert unknown.returncode == 2 and "no part 'instance-9'" in unknown.stderr, unknown.stderr


def test_up_with_another_shape_refuses_and_says_what_differs(cluster):
    lines, env, data, _ = cluster
    other = _cluster("up", "--instances", "2", "--port", str(free_port()), "--data-dir", str(data), env=env)
    assert other.returncode == 2 and other.stdout == "", other.stdout
    assert "runs with another shape: instances 3 (asked 2), port" in other.stderr, other.stderr
    assert _all_running(data, env)


def test_postgres_and_redis_want_their_generated_passwords(cluster):
    import psycopg
    from sqlalchemy.engine import make_url

    lines, _, data, _ = cluster
    for name in ("secrets.json", "cluster.env", "cluster.json", "redis/redis.conf", "run/supervisord.conf"):
        assert (data / name).stat().st_mode & 0o777 == 0o600, name
    assert "***" in lines["DATABASE_URL"] and "***" in lines["REDIS_URL"]  # masked when printed
    url = make_url(_urls(data)["RAGNAROK_DATABASE_URL"])
    hba = (data / "postgres" / "data" / "pg_hba.conf").read_text()
    assert "trust" not in [line.split()[-1] for line in hba.splitlines() if line.strip() and line[0] != "#"]
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(
            host="127.0.0.1", port=url.port, user=url.username, dbname="ragnarok", password="wrong", connect_timeout=5
        ).close()
    psycopg.connect(
        host="127.0.0.1", port=url.port, user=url.username, dbname="ragnarok", password=url.password, connect_timeout=5
    ).close()
    import redis

    redis_url = _urls(data)["RAGNAROK_RATE_LIMIT_STORAGE"]
    port = int(redis_url.rsplit(":", 1)[1])
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, password="wrong").ping()
    with pytest.raises(redis.AuthenticationError, match="authenticated|Authentication required"):
        redis.Redis(host="127.0.0.1", port=port, socket_timeout=5).ping()
    assert redis.Redis.from_url(redis_url, socket_timeout=5).ping()


def test_the_default_directory_as_root_is_one_postgres_can_reach(monkeypatch, tmp_path):
    """As root without RAGNAROK_DATA_DIR: /var/lib/ragnarok/cluster (~/.cache is closed to the postgres user);
    a --data-dir under a closed directory is refused before initdb, naming the way out."""
    from ragnarok.core.settings import Settings
    from ragnarok.deploy.cluster import _root
    from ragnarok.deploy.postgres import PgServer, pg_bin_dir

    if os.geteuid() != 0:
        pytest.skip("as root only")
    monkeypatch.delenv("RAGNAROK_DATA_DIR", raising=False)
    assert _root(Settings(), None).root == Path("/var/lib/ragnarok/cluster")
    closed = tmp_path / "closed"
    (closed / "cluster" / "postgres").mkdir(parents=True)
    closed.chmod(0o700)
    server = PgServer(pg_bin_dir() or Path("/usr/bin"), closed / "cluster" / "postgres", free_port(), password="x")
    with pytest.raises(RuntimeError, match="cannot reach .* pass --data-dir under a directory it can reach"):
        server.initdb()
    assert not (closed / "cluster" / "postgres" / "data").exists()


def test_a_redis_outage_passes_the_instances_503_through_and_marks_no_instance_down(cluster):
    """Item 5: Redis stopped under a key with --rpm: every answer through the proxy is the instances' own JSON
    503 with Retry-After (never nginx's 502), and once Redis is back the proxy serves at once (no instance was
    marked down). With every instance stopped, nginx's own answer is a JSON 503 with Retry-After too."""
    from ragnarok.deploy import parts
    from ragnarok.deploy.supervisor import Supervisor

    lines, env, data, _ = cluster
    _all_running(data, env)
    url, sup = lines["URL"], Supervisor(data / "run")
    secret = _key(cluster, "rpm-outage", scopes=["retrieve"], rpm=100000)

    def retrieve() -> httpx.Response:
        return httpx.post(url + "/v1/retrieve", headers=_bearer(secret), json={"query": "gzip", "k": 3}, timeout=T)

    assert retrieve().status_code == 200
    redis_url = _urls(data)["RAGNAROK_RATE_LIMIT_STORAGE"]
    password, port = redis_url.split(":")[2].split("@")[0], int(redis_url.rsplit(":", 1)[1])
    sup.stop("redis")
    assert parts.wait_until(lambda: sup.info()["redis"]["statename"] == "STOPPED", 30)
    try:
        during = [retrieve() for _ in range(20)]
    finally:
        sup.start("redis")
    assert {a.status_code for a in during} == {503}, sorted({a.status_code for a in during})
    assert all(a.headers.get("retry-after") and "rate-limit store" in a.json()["detail"] for a in during), during[
        0
    ].text
    assert parts.wait_until(lambda: parts.pong(port, password), 30)
    back, after = time.monotonic(), []
    while not after or after[-1].status_code != 200:
        after.append(retrieve())
        assert time.monotonic() - back < 30, [a.text for a in after]
    # no instance was marked down: no answer is nginx's own (it would be, for fail_timeout, had one been)
    assert all(a.status_code == 200 or "rate-limit store" in a.json()["detail"] for a in after), [a.text for a in after]
    assert all(retrieve().status_code == 200 for _ in range(10))

    names = [f"instance-{i}" for i in (1, 2, 3)]
    for name in names:
        sup.stop(name)
    try:
        assert parts.wait_until(lambda: all(sup.info()[n]["statename"] == "STOPPED" for n in names), 60)
        nobody = httpx.get(url + "/v1/templates", timeout=T)
        assert nobody.status_code == 503 and nobody.headers.get("retry-after"), nobody.text
        assert "no instance of the service could be reached" in nobody.json()["detail"]
    finally:
        for name in names:
            sup.start(name)
    _all_running(data, env, timeout_s=120)
