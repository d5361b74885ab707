"""Error bodies are no oracle: an unknown index, generator or template name gets one fixed message
listing what is available, the same bytes whatever was sent, and a ``/rag`` spec error names the problem and
its position, never the caller's text; so a guess at a server path, an endpoint or a key is confirmed by
nothing (a scrubber applied to the caller's text would answer ``<data dir>/x`` or ``***`` for a right guess)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from servers import free_port

from api.main import create_app
from ragnarok.core.settings import Settings

KEY_ENV = "RAGNAROK_TEST_ORACLE_KEY"
KEY = "sk-oracle-upstream-secret-0123456789"
REQUEST = {
    "query": {"text": "gzip", "qid": "q1"},
    "candidates": [{"docid": "d1", "score": 1.0, "doc": {"segment": "gzip compresses files."}}],
}


@pytest.fixture
def oracle(demo_settings, tmp_path, monkeypatch):
    """An app with a data dir, an index, a paid generator at a local endpoint with an API key; the table of
    guesses built from those very values (and near misses of them)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    port = free_port()
    data = demo_settings.data_dir  # the demo index: a /rag gets as far as its generator
    settings = Settings(
        data_dir=data,
        generators=[
            {
                "name": "paid",
                "backend": "openai",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "model": "m",
                "api_key_env": KEY_ENV,
            }
        ],
    )
    home, cwd = str(Path.home()), os.getcwd()
    guesses = [
        f"{data}/x",
        str(data),
        f"{data}/",
        f"{data}/indexes/demo",
        home,
        f"{home}/x",
        cwd,
        f"{cwd}/y",
        sys.prefix,
        f"{sys.prefix}/bin",
        f"127.0.0.1:{port}",
        f"http://127.0.0.1:{port}/v1",
        f"127.0.0.1:{port + 1}",
        KEY,
        KEY[:-1],
        KEY + "x",
        str(tmp_path / "idx"),
        "nosuchname",
    ]
    with TestClient(create_app(settings, arena=False)) as client:
        yield client, guesses, [str(data), home, cwd, sys.prefix, str(port), KEY]


def _bodies(client, guesses, send):
    answers = [send(client, guess) for guess in guesses]
    return [a.status_code for a in answers], [a.content for a in answers]


@pytest.mark.parametrize(
    "kind,send",
    [
        ("index", lambda c, g: c.post("/v1/retrieve", json={"query": "gzip", "index": g})),
        ("generator", lambda c, g: c.post("/v1/generate", json={"request": REQUEST, "generator": g})),
        ("template", lambda c, g: c.post("/v1/generate", json={"request": REQUEST, "template": g})),
        (
            "rag index",
            lambda c, g: c.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | extractive", "index": g}),
        ),
        (
            "rag generator",
            lambda c, g: c.post(
                "/rag", json={"topic": "gzip", "pipeline": {"retrieve": "bm25", "depth": 5, "generate": {"name": g}}}
            ),
        ),
    ],
)
def test_unknown_names_get_one_fixed_body(oracle, kind, send):
    client, guesses, secrets = oracle
    statuses, bodies = _bodies(
        client, [g for g in guesses if kind != "rag generator" or "/" not in g and ":" not in g], send
    )
    assert set(statuses) == {404}, (kind, statuses, bodies)
    assert len(set(bodies)) == 1, (kind, set(bodies))  # byte-identical whatever was guessed
    body = bodies[0].decode()
    for secret in secrets:
        assert secret not in body, (kind, body)
    assert "<" not in body and "***" not in body, body  # no placeholder: nothing of the caller's was scrubbed
    assert "available:" in body and ("paid" in body or kind not in ("generator", "rag generator")), body


def test_spec_errors_name_the_problem_and_position_never_the_text(oracle):
    client, guesses, secrets = oracle
    for guess in guesses:
        for spec in (
            f"bm25@5 | {guess}",
            f"{guess}@5 | extractive",
            f"bm25@5 | extractive:{guess}",
            f"rrf(bm25, {guess})@5 | extractive",
            f"bm25@5 | mmr:{guess}@3 | extractive",
        ):
            answer = client.post("/rag", json={"topic": "gzip", "pipeline": spec})
            assert answer.status_code in (404, 422), (spec, answer.text)
            body = answer.text
            assert guess not in body and "<" not in body and "***" not in body, (spec, body)
            for secret in secrets:
                assert secret not in body, (spec, body)
    # still helpful: what is wrong, where, and what would do
    answer = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5 | /etc/x"}).json()["detail"]
    assert answer == "unexpected character at position 10", answer
    answer = client.post("/rag", json={"topic": "gzip", "pipeline": "rrf(bm25 bm25)@5 | extractive"})
    assert answer.json()["detail"] == "expected ')', found a name at position 10", answer.text
    answer = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25@5"})
    assert answer.status_code == 422 and "sk-" not in answer.text and "no generation stage" in answer.text


def test_stage_order_errors_do_not_echo_the_stages_arguments(oracle):
    """The gateway's own checks (a count on hyde, a query stage after the retriever, a fused passage stage)
    name the stage's kind, never the argument the caller wrote after it."""
    client, _, _ = oracle
    guess = "Zq9guessname"
    for spec, words in (
        (f"hyde:{guess}:2 > bm25@10 | extractive", "hyde writes one passage"),
        (f"bm25@10 | hyde:{guess}@5 | extractive", "hyde is a query stage"),
        (f"bm25@10 | cutoff:0.5@5~rrf | {guess}", "not fused with its input"),
    ):
        answer = client.post("/rag", json={"topic": "gzip", "pipeline": spec})
        assert answer.status_code == 422 and words in answer.text, (spec, answer.text)
        assert guess not in answer.text and "0.5" not in answer.text, (spec, answer.text)


def test_did_you_mean_names_only_what_exists(oracle):
    client, _, _ = oracle
    near = client.post("/v1/generate", json={"request": REQUEST, "generator": "extractiv"}).json()["detail"]
    assert near.endswith("did you mean 'extractive'?") and "extractiv'" not in near.replace("'extractive'", ""), near
    index = client.post("/v1/retrieve", json={"query": "gzip", "index": "dem"}).json()["detail"]
    assert index == "unknown index (the name is not echoed); available: demo; did you mean 'demo'?", index


def test_an_unknown_key_in_a_body_is_not_echoed(oracle):
    client, guesses, _ = oracle
    answers = [
        client.post("/rag", json={"topic": "gzip", "pipeline": {"retrieve": "bm25", guess: 1}}) for guess in guesses
    ]
    assert {a.status_code for a in answers} == {422}
    bodies = {a.content for a in answers}
    assert len(bodies) == 1, bodies
    assert b"(an unknown key)" in bodies.pop()
