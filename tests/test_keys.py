"""API keys on a real uvicorn: statuses, scopes, rates, budgets against a counting fake paid backend,
the per-request bound, spend headers and the audit log; revocation across two server processes on PostgreSQL;
``ragnarok keys`` and ``ragnarok serve``'s refusal to listen publicly without keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from servers import ragnarok_serve, serve_app

T = 120  # seconds: the first /rag loads MiniLM

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "RAGNAROK_TEST_PAID_KEY"
KEY_VALUE = "sk-paid-backend-secret-0123456789"
CANDIDATES = {
    "query": {"text": "gzip", "qid": "q1"},
    "candidates": [
        {"docid": "d1", "score": 2.0, "doc": {"segment": "gzip compresses files. It is fast."}},
        {"docid": "d2", "score": 1.0, "doc": {"segment": "bzip2 compresses better."}},
    ],
}


def _paid(name: str, base: str, model: str = "ok", **extra) -> dict:
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
def fake():
    from fakes import flaky_openai_app

    backend = flaky_openai_app()
    with serve_app(backend) as base:
        yield backend, base


@pytest.fixture(scope="module")
def service(fake, demo_settings, tmp_path_factory):
    """create_app with keys on a real uvicorn: the demo index, a paid fake generator, a fresh SQLite database."""
    from api.main import create_app
    from ragnarok.core.settings import Settings
    from ragnarok.stages.generate.base import GeneratorConfig

    _, base = fake
    os.environ[KEY_ENV] = KEY_VALUE
    db = tmp_path_factory.mktemp("keys") / "service.db"
    settings = Settings(
        data_dir=demo_settings.data_dir,
        auth="keys",
        database_url=f"sqlite:///{db}",
        generators=[
            GeneratorConfig(**_paid("paid", base)),
            GeneratorConfig(**_paid("slow", base, "slow")),
            GeneratorConfig(**_paid("echo", base, "echo-key-200")),
            GeneratorConfig(**_paid("retrying", base, "ok:retrying", max_retries=2)),
        ],
    )
    app = create_app(settings, arena=False)
    with serve_app(app) as url:
        yield settings, app, url
    os.environ.pop(KEY_ENV, None)


def _key(settings, name: str, **limits) -> str:
    from ragnarok.auth.store import AuthStore

    _, secret = AuthStore.for_settings(settings).create(
        name, limits.pop("scopes", ["retrieve", "generate", "evaluate"]), **limits
    )
    return secret


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _generate(url: str, secret: str | None, generator: str = "paid", **extra) -> httpx.Response:
    return httpx.post(
        url + "/v1/generate",
        json={"request": CANDIDATES, "generator": generator, **extra},
        headers=_bearer(secret) if secret else {},
        timeout=60,
    )


def test_open_routes_and_401s(service):
    settings, _, url = service
    for path in ("/healthz", "/openapi.json", "/docs"):
        assert httpx.get(url + path, timeout=T).status_code == 200, path
    missing = httpx.get(url + "/v1/retrievers", timeout=T)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer KEY" in missing.json()["detail"]
    assert httpx.get(url + "/v1/retrievers", headers={"Authorization": "Basic abc"}, timeout=T).status_code == 401
    assert httpx.get(url + "/v1/retrievers", headers=_bearer("rk_" + "x" * 43), timeout=T).json() == {
        "detail": "unknown API key"
    }
    expired = _key(settings, "expired-key", expires_in_s=0.001)
    time.sleep(0.01)
    answer = httpx.get(url + "/v1/retrievers", headers=_bearer(expired), timeout=T)
    assert answer.status_code == 401 and "expired" in answer.json()["detail"]
    # nothing of the app ran for any of them: POST /rag without a key spends nothing either
    assert httpx.post(url + "/rag", json={"topic": "gzip", "pipeline": "bm25@5 | paid"}, timeout=T).status_code == 401


def test_scopes_and_generators(service, fake):
    settings, _, url = service
    backend, _ = fake
    reader = _key(settings, "reader", scopes=["retrieve"])
    ok = httpx.post(url + "/v1/retrieve", json={"query": "gzip", "k": 2}, headers=_bearer(reader), timeout=T)
    assert ok.status_code == 200 and len(ok.json()["candidates"]) == 2
    for call in (
        lambda: _generate(url, reader),
        lambda: httpx.post(
            url + "/rag", json={"topic": "gzip", "pipeline": "bm25@5 | extractive"}, headers=_bearer(reader), timeout=T
        ),
        lambda: httpx.post(
            url + "/v1/rerank",
            json={"request": CANDIDATES, "reranker": "listwise:paid", "k": 2},
            headers=_bearer(reader),
            timeout=T,
        ),
    ):
        answer = call()
        assert answer.status_code == 403 and "'generate' scope" in answer.json()["detail"]
    free_only = _key(settings, "free-only", generators=["extractive"])
    before = sum(backend.state.calls.values())
    refused = httpx.post(
        url + "/rag", json={"topic": "gzip", "pipeline": "bm25@5 | paid"}, headers=_bearer(free_only), timeout=T
    )
    assert refused.status_code == 403 and "may not use generator 'paid'" in refused.json()["detail"]
    fine = httpx.post(
        url + "/rag", json={"topic": "gzip", "pipeline": "bm25@5 | extractive"}, headers=_bearer(free_only), timeout=T
    )
    assert fine.status_code == 200 and fine.headers["ragnarok-backend-calls"] == "0"
    assert sum(backend.state.calls.values()) == before


def test_requests_per_minute_and_in_parallel(service, fake):
    settings, _, url = service
    backend, _ = fake
    limited = _key(settings, "three-a-minute", rpm=3)
    statuses = [httpx.get(url + "/v1/templates", headers=_bearer(limited), timeout=T) for _ in range(5)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429, 429]
    assert 1 <= int(statuses[3].headers["retry-after"]) <= 60
    one = _key(settings, "one-at-a-time", parallel=1)
    slow: list[httpx.Response] = []
    calls = backend.state.calls["slow"]
    thread = threading.Thread(target=lambda: slow.append(_generate(url, one, "slow")))  # 3 s at the backend
    thread.start()
    deadline = time.monotonic() + 60
    while backend.state.calls["slow"] == calls and time.monotonic() < deadline:  # it holds the key's one slot
        time.sleep(0.02)
    second = httpx.get(url + "/v1/templates", headers=_bearer(one), timeout=T)
    thread.join()
    assert slow[0].status_code == 200, slow[0].text
    assert second.status_code == 429 and second.headers["retry-after"] == "1", second.text
    assert "1 request(s) in parallel" in second.json()["detail"]
    assert httpx.get(url + "/v1/templates", headers=_bearer(one), timeout=T).status_code == 200  # free again


def test_budget_is_never_overspent(service, fake):
    """Five calls a day: of eight concurrent /v1/generate requests five reach the backend, three are 429
    before anything is sent; the spend and the audit log say so."""
    from ragnarok.auth.store import AuthStore

    settings, _, url = service
    backend, _ = fake
    secret = _key(settings, "five-calls", budget_calls=5)
    before = backend.state.calls["ok"]
    results: list[httpx.Response] = []
    threads = [threading.Thread(target=lambda: results.append(_generate(url, secret))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in results)
    assert statuses == [200] * 5 + [429] * 3
    assert backend.state.calls["ok"] - before == 5
    refused = next(r for r in results if r.status_code == 429)
    assert "budget has 0 of 5 left" in refused.json()["detail"] and int(refused.headers["retry-after"]) > 0
    paid = next(r for r in results if r.status_code == 200)
    assert (
        paid.headers["ragnarok-backend-calls"],
        paid.headers["ragnarok-prompt-tokens"],
        paid.headers["ragnarok-completion-tokens"],
    ) == ("1", "10", "12")
    store = AuthStore.for_settings(settings)
    owner = f"key:{store.find('five-calls').id}"
    assert [(u["calls"], u["tokens"]) for u in store.usage(owner)] == [(5, 110)]
    store.flush()
    audit = store.audit_rows(owner)
    assert sorted(r["status"] for r in audit) == statuses
    assert all(r["route"] == "/v1/generate" and r["calls"] == (r["status"] == 200) for r in audit)
    assert {r["generators"] for r in audit if r["status"] == 200} == {json.dumps({"paid": 1})}


def test_worst_case_counts_retries_and_pipelines(service, fake):
    """A generator with two retries reserves three calls; a pipeline past the per-request bound is a 413 that
    names its count, and nothing reaches the backend."""
    settings, _, url = service
    backend, _ = fake
    secret = _key(settings, "two-calls", budget_calls=2)
    answer = _generate(url, secret, "retrying")
    assert answer.status_code == 429 and "could make 3 backend call(s)" in answer.json()["detail"]
    assert backend.state.calls["ok:retrying"] == 0
    big = _key(settings, "big-spender")
    before = sum(backend.state.calls.values())
    spec = (
        "multiquery:paid:7 > decompose:paid:1 > bm25@500 | listwise:paid@100 | "
        "llmcompress:paid:tree_summarize@100 | paid"
    )
    answer = httpx.post(url + "/rag", json={"topic": "gzip", "pipeline": spec}, headers=_bearer(big), timeout=60)
    assert answer.status_code == 413
    assert (
        "could make 75 backend calls in the worst case (paid: 75, " in answer.json()["detail"]
        and "the limit is 64" in answer.json()["detail"]
    )
    evaluate = {
        "answer": {
            "topic_id": "t",
            "topic": "gzip",
            "references": ["d1"],
            "answer": [{"text": f"Sentence {i}.", "citations": [0] * 4} for i in range(64)],
        },
        "segments": {"d1": "gzip compresses files."},
        "judge": "paid",
    }
    answer = httpx.post(url + "/v1/evaluate", json=evaluate, headers=_bearer(big), timeout=60)
    assert answer.status_code == 413 and "512 backend calls" in answer.json()["detail"]
    assert sum(backend.state.calls.values()) == before
    # a pipeline within the bound runs, and its headers count every call of every stage
    ran = httpx.post(
        url + "/rag",
        json={"topic": "gzip", "pipeline": "multiquery:paid:2 > bm25@10 | paid"},
        headers=_bearer(big),
        timeout=60,
    )
    assert ran.status_code == 200, ran.text
    assert int(ran.headers["ragnarok-backend-calls"]) == sum(backend.state.calls.values()) - before == 2


def test_a_key_echoed_by_a_backend_is_masked_in_a_200(service):
    settings, _, url = service
    answer = _generate(url, _key(settings, "echo"), "echo")
    assert answer.status_code == 200
    text = json.dumps(answer.json())
    assert KEY_VALUE not in text and "Your key is" in text  # masked (post-processing leaves "*" of "***")


def test_keys_command_line(tmp_path):
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}

    def keys(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ragnarok.cli", "keys", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    made = keys(
        "create",
        "--name",
        "team-a",
        "--scopes",
        "retrieve,generate",
        "--generators",
        "extractive",
        "--rpm",
        "60",
        "--budget-calls",
        "100",
        "--period",
        "1d",
        "--expires",
        "30d",
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("rk_") and len(secret) > 40
    listed = keys("list", "--output", "json")
    row = json.loads(listed.stdout)["result"][0]
    assert row["name"] == "team-a" and row["status"] == "active" and row["budget_calls"] == 100
    assert secret not in listed.stdout and secret[:11] == row["prefix"]
    assert (tmp_path / "data" / "arena.db").read_bytes().find(secret.encode()) == -1  # only its hash is stored
    bad = keys("create", "--name", "x", "--scopes", "retrieve,sudo")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: scopes are retrieve, generate, evaluate, admin; got sudo"
    ]
    assert keys("create", "--name", "team-a", "--scopes", "retrieve").returncode == 2  # names are unique
    assert keys("revoke", "team-a").returncode == 0
    assert json.loads(keys("list", "--json").stdout)["result"][0]["status"] == "revoked"  # --json: the envelope
    missing = keys("revoke", "nobody")
    assert missing.returncode == 2 and "no key 'nobody'" in missing.stderr


def test_serve_refuses_a_public_address_without_keys(tmp_path):
    from ragnarok.cli.main import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("example.org")
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "serve", "--host", "0.0.0.0", "--no-dense"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: refusing to serve on 0.0.0.0 without API keys")
    assert not (tmp_path / "data" / "indexes").exists()  # refused before anything was built


def test_revocation_and_budget_across_two_instances_on_postgresql(postgres_url, demo_settings, fake, tmp_path):
    """Two `ragnarok serve` processes on one PostgreSQL database: a budget of 4 calls is shared by both (no
    fifth call reaches the backend), and a key revoked from the command line is refused by both once their
    cache time has passed."""
    backend, base = fake
    cache_s = 0.5
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
        "RAGNAROK_AUTH": "keys",
        "RAGNAROK_DATABASE_URL": postgres_url,
        "RAGNAROK_AUTH_CACHE_S": str(cache_s),
        KEY_ENV: KEY_VALUE,
        "RAGNAROK_GENERATORS": json.dumps([_paid("paid", base, "ok:two-instances")]),
    }

    def keys(*args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "ragnarok.cli", "keys", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().splitlines()[-1]

    secret = keys("create", "--name", "shared", "--scopes", "retrieve,generate", "--budget-calls", "4")
    with ragnarok_serve(env, tmp_path / "a.log") as a, ragnarok_serve(env, tmp_path / "b.log") as b:
        results: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda u=u: results.append(_generate(u, secret))) for u in (a, b) * 3]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.status_code for r in results) == [200] * 4 + [429] * 2
        assert backend.state.calls["ok:two-instances"] == 4
        for url in (a, b):
            assert httpx.get(url + "/v1/templates", headers=_bearer(secret), timeout=T).status_code == 200
        keys("revoke", "shared")
        revoked = time.monotonic()
        time.sleep(max(0.0, cache_s - (time.monotonic() - revoked)) + 0.05)
        for url in (a, b):
            answer = httpx.get(url + "/v1/templates", headers=_bearer(secret), timeout=T)
            assert answer.status_code == 401 and answer.json() == {"detail": "API key 'shared' was revoked"}


def test_the_gateway_forwards_the_key_to_remote_services(service, fake, tmp_path):
    """A gateway whose R and AG services are another keyed server: the caller's key goes with every stage call
    (the remote service checks and counts it), and an unknown key stops at the gateway."""
    from api.main import create_app
    from ragnarok.auth.store import AuthStore

    settings, _, remote = service
    gateway = create_app(settings.model_copy(update={"retrieval_url": remote, "generation_url": remote}), arena=False)
    secret = _key(settings, "through-the-gateway", budget_calls=3)
    with serve_app(gateway) as url:
        answer = httpx.post(
            url + "/rag", json={"topic": "gzip", "pipeline": "bm25@5 | paid"}, headers=_bearer(secret), timeout=T
        )
        assert answer.status_code == 200, answer.text
        assert (
            httpx.post(
                url + "/rag",
                json={"topic": "gzip", "pipeline": "bm25@5 | paid"},
                headers=_bearer("rk_unknown"),
                timeout=T,
            ).status_code
            == 401
        )
    store = AuthStore.for_settings(settings)
    store.flush()
    routes = sorted(r["route"] for r in store.audit_rows(f"key:{store.find('through-the-gateway').id}"))
    assert routes == ["/rag", "/v1/generate", "/v1/retrieve"]  # the gateway's request and its two stage calls


def test_the_audit_log_is_append_only(service):
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    from ragnarok.auth.store import AuthStore

    settings, _, url = service
    assert httpx.get(url + "/v1/templates", headers=_bearer(_key(settings, "audited")), timeout=T).status_code == 200
    store = AuthStore.for_settings(settings)
    store.flush()
    assert store.audit_rows()
    for statement in ("UPDATE audit_log SET status = 200", "DELETE FROM audit_log"):
        with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))


def test_two_authorization_headers_are_refused(service):
    settings, _, url = service
    reader, admin = (
        _key(settings, "two-headers-reader", scopes=["retrieve"]),
        _key(settings, "two-headers-admin", scopes=["admin"]),
    )
    assert httpx.get(url + "/metrics", headers=_bearer(admin), timeout=T).status_code == 200
    assert httpx.get(url + "/metrics", headers=_bearer(reader), timeout=T).status_code == 403
    for pair in ((reader, admin), (admin, reader), (admin, admin)):  # which one counts would be a guess
        answer = httpx.get(url + "/metrics", headers=[("Authorization", f"Bearer {k}") for k in pair], timeout=T)
        assert answer.status_code == 400 and answer.json() == {
            "detail": "send one Authorization header, not several"
        }, answer.text
        assert reader not in answer.text and admin not in answer.text


def test_a_forwarded_address_that_is_no_ip_is_refused(tmp_path):
    from fastapi import Request  # noqa: F401 - the route's annotation

    from api.main import create_app
    from ragnarok.core.settings import Settings

    app = create_app(Settings(data_dir=tmp_path / "data", trusted_proxies="127.0.0.1"), arena=False)
    seen: list[str] = []

    def client_host(request) -> dict:  # what every limit counted by address sees
        seen.append(request.client.host)
        return {}

    client_host.__annotations__ = {"request": Request, "return": dict}
    app.get("/test-client-host")(client_host)

    with serve_app(app) as url:

        def get(forwarded: str) -> httpx.Response:
            return httpx.get(url + "/test-client-host", headers={"X-Forwarded-For": forwarded}, timeout=T)

        for forwarded, host in (
            ("203.0.113.7", "203.0.113.7"),
            ("10.1.1.1, 203.0.113.8", "203.0.113.8"),
            ("203.0.113.9:4711", "203.0.113.9"),
            ("[2001:db8::1]:80", "2001:db8::1"),
        ):
            assert get(forwarded).status_code == 200 and seen[-1] == host, (forwarded, seen)
        count = len(seen)
        for forwarded in ("new-client-1", "203.0.113.7, new-client-2", "unknown", "1.2.3", "::g"):
            answer = get(forwarded)
            assert answer.status_code == 400, (forwarded, answer.text)
            assert answer.json()["detail"].startswith("X-Forwarded-For from a trusted proxy must end in"), answer.text
        assert len(seen) == count  # none of them reached the app as a client of its own


def _keys_cli(*args: str):
    from typer.testing import CliRunner

    from ragnarok.auth.cli import keys_app
    from ragnarok.core.settings import get_settings

    get_settings.cache_clear()  # this test's data dir (conftest)
    return CliRunner().invoke(keys_app, list(args))


def _stderr(result) -> list[str]:
    return (getattr(result, "stderr", None) or result.output).strip().splitlines()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--expires", "100000000d"], "--expires is a duration from 1s to 100 years (36525d)"),
        (["--period", "9" * 400 + "d", "--budget-calls", "5"], "--period is a duration from 1s to 100 years (36525d)"),
        (
            ["--generators", "nosuchgen"],
            "--generators takes configured generators (command-r-plus, extractive, gpt-4o, smollm2); got 'nosuchgen'",
        ),
        (["--generators", "extractive,nosuchgen"], "got 'nosuchgen'"),
        (
            ["--budget-calls", "100000000000000000000000"],
            "--budget-calls is an integer from 0 to 1,000,000,000,000,000",
        ),
        (["--budget-tokens", str(2**64)], "--budget-tokens is an integer from 0 to 1,000,000,000,000,000"),
        (["--rpm", str(2**31)], "--rpm is an integer from 1 to 1,000,000,000"),
        (["--parallel", str(10**30)], "--parallel is an integer from 1 to 1,000,000,000"),
        (["--parallel", "-1"], "--parallel is an integer from 1 to 1,000,000,000"),
        (["--budget-calls", "1e23"], "--budget-calls takes an integer, got '1e23'"),
        (["--rpm", "６０"], "--rpm takes an integer, got '６０'"),
    ],
)
def test_keys_create_checks_everything_before_writing(args, message, tmp_path):
    made = _keys_cli("create", "--name", "team-b", "--scopes", "retrieve", *args)
    lines = _stderr(made)
    assert made.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], (
        made.exit_code,
        made.output,
        made.exception,
    )
    listed = _keys_cli("list", "--output", "json")
    assert listed.exit_code == 0 and json.loads(listed.stdout)["result"] == [], listed.output  # nothing was written


def test_keys_list_survives_any_row(tmp_path):
    """A row an older version or a hand edit left with odd values: listed, marked invalid; it opens nothing."""
    from sqlalchemy import text

    from ragnarok.auth.store import AuthError, AuthStore
    from ragnarok.core.settings import get_settings

    good = _keys_cli("create", "--name", "good", "--scopes", "retrieve", "--expires", "36525d")
    assert good.exit_code == 0, good.output
    get_settings.cache_clear()
    store = AuthStore.for_settings(get_settings())
    _, secret = store.create("odd", ["retrieve"], budget_calls=5)
    odd_values = {
        "expires_epoch": 8.64e12 + time.time(),
        "generators": "not json",
        "scopes": "retrieve,sudo",
        "rpm": "sixty",
        "period_s": -1,
        "created_epoch": "yesterday",
    }
    with store.engine.begin() as conn:
        conn.execute(
            text("UPDATE api_keys SET " + ", ".join(f"{c} = :{c}" for c in odd_values) + " WHERE name = 'odd'"),
            odd_values,
        )
    store._cache.clear()
    listed = _keys_cli("list", "--output", "json")
    assert listed.exit_code == 0, (listed.output, listed.exception)
    rows = {row["name"]: row for row in json.loads(listed.stdout)["result"]}
    assert rows["good"]["status"] == "active" and "problems" not in rows["good"]
    assert rows["odd"]["status"] == "invalid" and set(rows["odd"]["problems"]) == {
        "scopes",
        "generators",
        "rpm",
        "period_s",
        "created_epoch",
        "expires_epoch",
    }, rows["odd"]
    text_list = _keys_cli("list")
    assert text_list.exit_code == 0 and "invalid (" in text_list.stdout, text_list.output
    with pytest.raises(AuthError, match="invalid"):
        store.lookup(secret)
    assert _keys_cli("usage").exit_code == 0


def test_a_generator_not_granted_is_named_only_when_it_exists(service):
    settings, _, url = service
    free = _key(settings, "free-only-names", generators=["extractive"])
    answers = [_generate(url, free, guess) for guess in (KEY_VALUE, KEY_VALUE[:-1], "127.0.0.1:8000", "nosuch")]
    assert {a.status_code for a in answers} == {403} and len({a.content for a in answers}) == 1, answers
    assert answers[0].json()["detail"] == (
        "key 'free-only-names' may not use generator (not echoed) (it may use: extractive)"
    )
    assert "may not use generator 'paid'" in _generate(url, free, "paid").json()["detail"]  # configured: named


def test_the_arena_served_alone_refuses_a_forwarded_address_that_is_no_ip(tmp_path):
    """``python -m webui`` reads X-Forwarded-For through the same middleware as the API (ragnarok.runtime.proxies)."""
    from ragnarok.core.settings import Settings
    from webui.app import standalone_app

    app = standalone_app(Settings(data_dir=tmp_path / "data", trusted_proxies="127.0.0.1"), "http://127.0.0.1:9")
    with serve_app(app) as url:
        ok = httpx.get(url + "/healthz", headers={"X-Forwarded-For": "203.0.113.7"}, timeout=T)
        assert ok.status_code == 200, ok.text
        for forwarded in ("new-client-1", "203.0.113.7, unknown"):
            answer = httpx.get(url + "/healthz", headers={"X-Forwarded-For": forwarded}, timeout=T)
            assert answer.status_code == 400, (forwarded, answer.text)
            assert answer.json()["detail"].startswith("X-Forwarded-For from a trusted proxy must end in"), answer.text
