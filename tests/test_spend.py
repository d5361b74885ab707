"""Keys, audit and spend on a real uvicorn with keys, against the counting fake OpenAI-compatible
backend (tests/fakes.py): every request gets its audit row and its spend, however it ends (refused by the
middleware, cut by a client that hangs up, cut by SIGTERM); a client that hangs up a non-streamed request
frees the backend call and the slot at once; a call that got the 504 "busy" spent nothing; streamed answers
say what they spent in their ``done`` event."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from servers import ragnarok_serve, serve_app
from test_keys import fake  # noqa: F401 - the flaky OpenAI-shaped backend, once per module

T = 120  # seconds: the first /rag loads MiniLM
KEY_ENV = "RAGNAROK_TEST_SPEND_KEY"
CANDIDATES = {
    "query": {"text": "gzip", "qid": "q1"},
    "candidates": [
        {"docid": "d1", "score": 2.0, "doc": {"segment": "gzip compresses. It's fast."}},
        {"docid": "d2", "score": 1.0, "doc": {"segment": "bzip2 compresses better."}},
    ],
}
ZERO = ("0", "0", "0")


def _config(name: str, base: str, model: str, **extra) -> dict:
    return {
        "name": name,
        "backend": "openai",
        "base_url": base + "/v1",
        "model": model,
        "api_key_env": KEY_ENV,
        "max_retries": 0,
        **extra,
    }


@pytest.fixture(scope="module")
def service(fake, demo_settings, tmp_path_factory):
    """create_app with keys on a real uvicorn: the demo index, a paid generator, two that hang (one slot each:
    one waits for its slot a minute, the other 0.3 s), a fresh SQLite database."""
    from api.main import create_app
    from ragnarok.core.settings import Settings
    from ragnarok.stages.generate.base import GeneratorConfig

    _, base = fake
    os.environ[KEY_ENV] = "sk-spend-test"
    db = tmp_path_factory.mktemp("spend") / "service.db"
    configs = [
        _config("paid", base, "ok:spend"),
        _config("hang", base, "hang:spend", timeout_s=120, max_concurrency=1, slot_wait_s=60),
        _config("single", base, "hang:busy", timeout_s=120, max_concurrency=1, slot_wait_s=0.3),
    ]
    settings = Settings(
        data_dir=demo_settings.data_dir,
        auth="keys",
        database_url=f"sqlite:///{db}",
        generators=[GeneratorConfig(**c) for c in configs],
    )
    app = create_app(settings, arena=False)
    with serve_app(app) as url:
        yield settings, app, url
    os.environ.pop(KEY_ENV, None)


def _key(settings, name: str, **limits) -> tuple[str, str]:
    """A new key's secret and its owner (``key:ID``)."""
    from ragnarok.auth.store import AuthStore

    record, secret = AuthStore.for_settings(settings).create(name, ["retrieve", "generate"], **limits)
    return secret, f"key:{record.id}"


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _spend_headers(response: httpx.Response) -> tuple[str, str, str]:
    return tuple(response.headers.get(f"ragnarok-{h}") for h in ("backend-calls", "prompt-tokens", "completion-tokens"))


def _audit(settings, owner: str) -> list[dict]:
    from ragnarok.auth.store import AuthStore

    store = AuthStore.for_settings(settings)
    store.flush()
    return store.audit_rows(owner)


def _wait(condition: Callable[[], bool], within_s: float, what: str) -> float:
    """Seconds until ``condition()`` holds; fails naming ``what`` after ``within_s``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < within_s, f"{what} not within {within_s:.1f} s"
        time.sleep(0.02)
    return time.monotonic() - start


def _hanging_up(url: str, secret: str, body: dict) -> socket.socket:
    """A keyed POST /v1/generate sent on a raw socket, so that the test hangs up when it chooses (close())."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)), timeout=T)
    head = (
        f"POST /v1/generate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {secret}\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def test_refusals_are_audited_and_say_they_spent_nothing(service):
    """The middleware's 401s and 429s: spend headers of 0, and an audit row each; a request without a valid
    key is the `unauthenticated` owner's, named by the public prefix of what it sent, never by more of it."""
    settings, _, url = service
    unknown = "rk_" + "unknownsecret" * 3
    missing = httpx.post(url + "/v1/generate", json={"request": CANDIDATES}, timeout=T)
    refused = httpx.post(url + "/v1/generate", json={"request": CANDIDATES}, headers=_bearer(unknown), timeout=T)
    assert missing.status_code == refused.status_code == 401
    assert _spend_headers(missing) == _spend_headers(refused) == ZERO
    secret, owner = _key(settings, "one-a-minute", rpm=1)
    assert httpx.get(url + "/v1/templates", headers=_bearer(secret), timeout=T).status_code == 200
    limited = httpx.get(url + "/v1/templates", headers=_bearer(secret), timeout=T)
    assert limited.status_code == 429 and _spend_headers(limited) == ZERO
    rows = _audit(settings, "unauthenticated")
    assert sorted((r["key_name"], r["status"], r["route"], r["calls"]) for r in rows) == [
        ("", 401, "/v1/generate", 0),
        (unknown[:11], 401, "/v1/generate", 0),
    ]
    assert unknown not in json.dumps(rows)
    assert sorted(r["status"] for r in _audit(settings, owner)) == [200, 429]
    # the routes' own refusals too: a scope the key lacks (403), a topic past the limit (413)
    from ragnarok.auth.store import AuthStore

    record, reader = AuthStore.for_settings(settings).create("reader-only", ["retrieve"])
    assert (
        httpx.post(url + "/v1/generate", json={"request": CANDIDATES}, headers=_bearer(reader), timeout=T).status_code
        == 403
    )
    writer, writer_owner = _key(settings, "long-topics")
    long_topic = {"request": CANDIDATES, "topic": "x" * (settings.max_query_chars + 1)}
    assert httpx.post(url + "/v1/generate", json=long_topic, headers=_bearer(writer), timeout=T).status_code == 413
    assert [r["status"] for r in _audit(settings, f"key:{record.id}")] == [403]
    assert [r["status"] for r in _audit(settings, writer_owner)] == [413]


def test_a_client_that_hangs_up_frees_the_backend_call_and_the_slot(service, fake, slowdown):
    """A non-streamed /v1/generate whose client hangs up while the backend holds the answer: the backend's
    connection is closed and the generator's one slot is free again within a second (scaled by the
    machine's slowdown), not after the generator's timeout_s (120 s); its audit row says 499 and one call,
    as its spend does."""
    settings, _, url = service
    backend, _ = fake
    secret, owner = _key(settings, "hangs-up")
    within_s = 1.0 * slowdown + 1.0
    body = {"request": CANDIDATES, "generator": "hang"}
    first = _hanging_up(url, secret, body)
    _wait(lambda: backend.state.hanging["hang:spend"] == 1, T, "the call reaching the backend")
    first.close()
    _wait(lambda: backend.state.hanging["hang:spend"] == 0, within_s, "the backend's connection closed")
    second = _hanging_up(url, secret, body)  # waits for the one slot (slot_wait_s 60) unless it is free
    try:
        _wait(lambda: backend.state.hanging["hang:spend"] == 1, within_s, "the next call taking the slot")
    finally:
        second.close()
    _wait(lambda: backend.state.hanging["hang:spend"] == 0, within_s, "the second backend connection closed")
    _wait(lambda: len(_audit(settings, owner)) == 2, T, "both audit rows")
    rows = _audit(settings, owner)
    assert [(r["status"], r["calls"]) for r in rows] == [(499, 1), (499, 1)]
    from ragnarok.auth.store import AuthStore

    assert [u["calls"] for u in AuthStore.for_settings(settings).usage(owner)] == [2]
    assert backend.state.calls["hang:spend"] == 2


def test_calls_that_got_busy_spent_nothing(service, fake):
    """One slot, held by a call that hangs; the next calls (non-streamed, streamed, through /rag) wait 0.3 s
    for it and get the 504 "busy": nothing reached the backend for them, and neither their headers, their
    audit rows, the key's usage nor its budget count a call: `keys usage` is what reached the backend."""
    from ragnarok.auth.store import AuthStore

    settings, _, url = service
    backend, _ = fake
    secret, owner = _key(settings, "busy", budget_calls=10)
    holder = _hanging_up(url, secret, {"request": CANDIDATES, "generator": "single"})
    try:
        _wait(lambda: backend.state.hanging["hang:busy"] == 1, T, "the call reaching the backend")
        for path, body in (
            ("/v1/generate", {"request": CANDIDATES, "generator": "single"}),
            ("/v1/generate", {"request": CANDIDATES, "generator": "single", "stream": True}),
            ("/rag", {"topic": "gzip", "pipeline": "bm25@5 | single"}),
        ):
            busy = httpx.post(url + path, json=body, headers=_bearer(secret), timeout=T)
            assert busy.status_code == 504 and "busy" in json.dumps(busy.json()), (path, body, busy.text)
            assert _spend_headers(busy) == ZERO
    finally:
        holder.close()
    _wait(lambda: len(_audit(settings, owner)) == 4, T, "the four audit rows")
    assert sorted((r["status"], r["calls"]) for r in _audit(settings, owner)) == [(499, 1)] + [(504, 0)] * 3
    reached = backend.state.calls["hang:busy"]
    assert reached == 1
    store = AuthStore.for_settings(settings)
    assert [u["calls"] for u in store.usage(owner)] == [reached]
    assert store.left(store.find("busy").principal()) == 10 - reached


def _done(response: httpx.Response) -> dict:
    events = [block for block in response.text.split("\n\n") if block.startswith("event: done")]
    assert len(events) == 1, response.text[-2000:]
    return json.loads(events[0].split("data: ", 1)[1])


def test_streamed_answers_say_what_they_spent_in_done(service):
    """`done` carries `spend`, the figures the spend headers give an answer that is not streamed."""
    settings, _, url = service
    secret, _ = _key(settings, "streams")
    whole = httpx.post(
        url + "/v1/generate", json={"request": CANDIDATES, "generator": "paid"}, headers=_bearer(secret), timeout=T
    )
    assert whole.status_code == 200 and "spend" not in whole.json()
    names = ("backend_calls", "prompt_tokens", "completion_tokens")
    expected = dict(zip(names, map(int, _spend_headers(whole))))
    assert expected == {"backend_calls": 1, "prompt_tokens": 10, "completion_tokens": 12}
    streamed = httpx.post(
        url + "/v1/generate",
        json={"request": CANDIDATES, "generator": "paid", "stream": True},
        headers=_bearer(secret),
        timeout=T,
    )
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    done = _done(streamed)
    assert done["spend"] == expected and done["references"] == whole.json()["references"]
    rag = httpx.post(
        url + "/rag",
        json={"topic": "gzip", "pipeline": "bm25@5 | paid", "stream": True},
        headers=_bearer(secret),
        timeout=T,
    )
    assert rag.status_code == 200, rag.text
    assert _done(rag)["spend"] == expected
    free = httpx.post(
        url + "/rag",
        json={"topic": "gzip", "pipeline": "bm25@5 | extractive", "stream": True},
        headers=_bearer(secret),
        timeout=T,
    )
    assert _done(free)["spend"] == {"backend_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}


@pytest.mark.slow
def test_sigterm_leaves_an_audit_row_for_the_request_it_cut(demo_settings, fake, tmp_path):
    """A real `ragnarok serve` with keys and 1 s of shutdown grace; a keyed /v1/generate waits on a backend
    that never answers when SIGTERM comes: it gets the JSON 503, and once the server has exited the audit log
    has its row (503, one call) and the key's usage its call."""
    from ragnarok.auth.store import AuthStore

    backend, base = fake
    url = f"sqlite:///{tmp_path / 'service.db'}"
    store = AuthStore(url)
    record, secret = store.create("cut-by-sigterm", ["generate"])
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "HF_HUB_OFFLINE": "1",
        "RAGNAROK_AUTH": "keys",
        "RAGNAROK_DATABASE_URL": url,
        "RAGNAROK_SHUTDOWN_GRACE_S": "1",
        KEY_ENV: "sk-spend-test",
        "RAGNAROK_GENERATORS": json.dumps([_config("hang", base, "hang:sigterm", timeout_s=120)]),
    }
    started: list = []
    got: list[httpx.Response | Exception] = []

    def call(server: str) -> None:
        try:
            got.append(
                httpx.post(
                    server + "/v1/generate",
                    json={"request": CANDIDATES, "generator": "hang"},
                    headers=_bearer(secret),
                    timeout=T,
                )
            )
        except httpx.HTTPError as exc:
            got.append(exc)

    with ragnarok_serve(env, output=tmp_path / "serve.log", started=started) as server:
        thread = threading.Thread(target=call, args=(server,))
        thread.start()
        _wait(lambda: backend.state.hanging["hang:sigterm"] == 1, T, "the call reaching the backend")
        started[0].send_signal(signal.SIGTERM)
        thread.join(T)
        started[0].wait(T)
    answer = got[0]
    assert isinstance(answer, httpx.Response) and answer.status_code == 503, answer
    rows = store.audit_rows(f"key:{record.id}")
    assert [(r["route"], r["status"], r["calls"]) for r in rows] == [("/v1/generate", 503, 1)], (
        tmp_path / "serve.log"
    ).read_text()[-3000:]
    assert [u["calls"] for u in store.usage(f"key:{record.id}")] == [1]


def test_a_call_made_before_kill_9_is_counted_once_and_its_budget_never_overspent(demo_settings, fake, tmp_path):
    """A keyed request with a 3-call budget has reached a backend that never answers when
    its `ragnarok serve` is killed (SIGKILL: nothing runs after it). A second instance on the same database
    settles the dead one's reservation with its one call (the periodic sweep), and what is left of the budget
    is 2 calls, exactly: the fake backend's count and the recorded spend agree."""
    from ragnarok.auth.store import AuthStore

    backend, base = fake
    url = f"sqlite:///{tmp_path / 'service.db'}"
    store = AuthStore(url)
    record, secret = store.create("killed", ["generate"], budget_calls=3)
    owner = f"key:{record.id}"
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "HF_HUB_OFFLINE": "1",
        "RAGNAROK_AUTH": "keys",
        "RAGNAROK_DATABASE_URL": url,
        KEY_ENV: "sk-spend-test",
        "RAGNAROK_GENERATORS": json.dumps(
            [
                _config("hang", base, "hang:killed", timeout_s=120, max_retries=0),
                _config("ok", base, "ok:after-kill", max_retries=0),
            ]
        ),
    }
    started: list = []
    with ragnarok_serve(env, output=tmp_path / "a.log", started=started) as server:
        thread = threading.Thread(
            target=lambda: _ignore(
                lambda: httpx.post(
                    server + "/v1/generate",
                    json={"request": CANDIDATES, "generator": "hang"},
                    headers=_bearer(secret),
                    timeout=T,
                )
            ),
            daemon=True,
        )
        thread.start()
        _wait(lambda: backend.state.hanging["hang:killed"] == 1, T, "the call reaching the backend")
        started[0].kill()
        started[0].wait(T)
    reached = len(backend.state.times["hang:killed"])
    assert reached == 1 and store.usage(owner) == [], store.usage(owner)  # the call is only in its reservation
    with ragnarok_serve(env, output=tmp_path / "b.log") as server:
        _wait(lambda: [u["calls"] for u in store.usage(owner)] == [1], 30, "the dead instance's call settled")
        answers = [
            httpx.post(
                server + "/v1/generate",
                json={"request": CANDIDATES, "generator": "ok"},
                headers=_bearer(secret),
                timeout=T,
            ).status_code
            for _ in range(3)
        ]
    assert answers == [200, 200, 429], answers  # 3 - 1 = 2 calls left, never more
    assert [u["calls"] for u in store.usage(owner)] == [3]
    assert reached + len(backend.state.times["ok:after-kill"]) == 3


def _ignore(call: Callable[[], object]) -> None:
    try:
        call()
    except httpx.HTTPError:
        pass


def test_a_reservation_past_its_ttl_is_settled_with_the_calls_it_made(tmp_path):
    """The store alone, on SQLite: a request reserved 3 calls and made 2 (each written first), then its
    process vanished on another host (only the TTL ends it): past the TTL, its 2 calls are spend, counted
    before the next reservation (so the budget of 4 has 2 left, not 4), and counted once."""
    from sqlalchemy import text

    from ragnarok.auth.store import AuthStore

    store = AuthStore(f"sqlite:///{tmp_path / 's.db'}", reservation_ttl_s=0.5)
    record, _ = store.create("ttl", ["generate"], budget_calls=4)
    principal = store._principal(store.find("ttl"))
    reservation = store.reserve(principal, 3)
    store.record_call(reservation)
    store.record_call(reservation)
    with store.engine.begin() as conn:  # its holder: a process of another host
        conn.execute(text("UPDATE key_reservations SET holder = 'elsewhere:1:1'"))
    assert store.left(principal) == 1  # 4 - 3 reserved
    time.sleep(0.6)
    with pytest.raises(Exception, match="2 of 4 left"):
        store.reserve(principal, 3)
    assert [u["calls"] for u in store.usage(f"key:{record.id}")] == [2]
    assert store.sweep() == 0  # counted once
    store.settle(reservation, 2, 10)  # the request's own settlement, had it come back: adds nothing
    assert [u["calls"] for u in store.usage(f"key:{record.id}")] == [2]
