"""``POST /v1/evaluate``: one answer judged by the same code as ``eval-rag`` -- the proxy judge by default (and
it says so), the scripted LLM judge (tests/judge_server.py) with known labels, cited segments from the body
or the demo index, gold answers -- and its bounds and errors: caps (413), bad input (422), an unknown judge or
index (404), a judge that fails (502) or is too slow (504)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from judge_server import judge_app
from servers import free_port, serve_app

from api.main import create_app
from api.routes.evaluate import MAX_NUGGETS, MAX_SENTENCES
from ragnarok.core.settings import Settings
from ragnarok.judge.answers import Answer
from ragnarok.judge.evalrag import evaluate_run
from ragnarok.judge.nuggets import Nugget, TopicNuggets
from ragnarok.judge.proxy import ProxyJudge
from ragnarok.judge.reference import reference_scores
from ragnarok.stages.generate.base import GeneratorConfig

QUESTION = "how do I parse command-line arguments"
SENTENCES = ["Use the argparse module to parse command-line arguments.", "Bananas are yellow fruit."]
SEGMENTS = {
    "stdlib.argparse": "Use the argparse module to parse command-line arguments.",
    "fruit": "A recipe for banana bread with walnuts.",
}
NUGGETS = [
    {"text": "use the argparse module", "importance": "vital"},
    {"text": "getopt is a C-style alternative", "importance": "okay"},
]
GOLD = ["Use the argparse module: create an ArgumentParser and call parse_args()."]


def body(**extra) -> dict:
    answer = {
        "topic_id": "demo-01",
        "topic": QUESTION,
        "references": list(SEGMENTS),
        "answer": [{"text": SENTENCES[0], "citations": [0]}, {"text": SENTENCES[1], "citations": [1]}],
    }
    return {"answer": answer, **extra}


@pytest.fixture(scope="module")
def scripted_base():
    with serve_app(judge_app()) as base:
        yield base + "/v1"


def settings_with_judges(data_dir, base: str, **extra) -> Settings:
    return Settings(
        data_dir=data_dir,
        generators=[
            GeneratorConfig(
                name="scripted", backend="openai", base_url=base, model="scripted", timeout_s=5, max_retries=0
            ),
            GeneratorConfig(
                name="patient", backend="openai", base_url=base, model="scripted", timeout_s=30, max_retries=0
            ),
            GeneratorConfig(
                name="down",
                backend="openai",
                base_url=f"http://127.0.0.1:{free_port()}/v1",
                model="x",
                timeout_s=1,
                max_retries=0,
            ),
        ],
        **extra,
    )


@pytest.fixture
def client(tmp_path, scripted_base):
    with TestClient(create_app(settings_with_judges(tmp_path, scripted_base), arena=False)) as c:
        yield c


def test_the_proxy_judge_by_default_with_the_same_scores_as_eval_rag(client):
    r = client.post("/v1/evaluate", json=body(nuggets=NUGGETS, segments=SEGMENTS, gold_answers=GOLD))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["proxy"] is True and out["judge"].startswith("PROXY judge")
    assert [n["assignment"] for n in out["nuggets"]] == ["support", "not_support"]
    assert out["support"] == [["full_support"], ["no_support"]]
    assert out["missing_segments"] == [] and out["failed"] == 0
    # the same code as the CLI: eval-rag's evaluate_run on the same answer gives the same scores
    answer = Answer("demo-01", QUESTION, [(SENTENCES[0], [0]), (SENTENCES[1], [1])], list(SEGMENTS))
    nuggets = TopicNuggets(qid="demo-01", query=QUESTION, nuggets=[Nugget(**n) for n in NUGGETS])
    cli = (
        evaluate_run(
            "r",
            {"demo-01": answer},
            ProxyJudge(),
            nuggets={"demo-01": nuggets},
            segments=SEGMENTS.get,
            references={"demo-01": GOLD},
        )
        .topics["demo-01"]
        .scores
    )
    assert out["scores"] == pytest.approx(cli)
    assert {k: out["scores"][k] for k in ("strict_vital", "vital", "strict_all", "all")} == {
        "strict_vital": 1.0,
        "vital": 1.0,
        "strict_all": 0.5,
        "all": 0.5,
    }
    assert out["scores"]["support_precision"] == 0.5 and out["scores"]["support_recall"] == 0.5
    expected = reference_scores(" ".join(SENTENCES), GOLD)  # the libraries' own numbers
    assert {k: out["scores"][k] for k in expected} == pytest.approx(expected)


def test_an_llm_judge_is_named_its_labels_scored_and_cached(client):
    answer = {
        "topic_id": "q",
        "topic": "question",
        "references": ["s1", "s2"],
        "answer": [{"text": "A GOOD answer.", "citations": [0, 1]}],
    }
    nuggets = [
        {"text": "GOOD one", "importance": "vital"},
        {"text": "HALF two", "importance": "vital"},
        {"text": "three", "importance": "okay"},
        {"text": "GOOD four", "importance": "okay"},
    ]
    request = {
        "answer": answer,
        "nuggets": nuggets,
        "segments": {"s1": "GOOD passage", "s2": "HALF passage"},
        "judge": "scripted",
    }
    r = client.post("/v1/evaluate", json=request)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["proxy"] is False and out["judge"] == "LLM judge scripted:openai:scripted"
    assert out["scores"] == {
        "strict_vital": 0.5,
        "vital": 0.75,
        "strict_all": 0.5,
        "all": 0.625,
        "support_precision": 0.75,
        "support_recall": 1.0,
    }  # nuggetizer's numbers
    assert out["support"] == [["full_support", "partial_support"]]
    assert out["judgments"] == 3 and out["cached"] == 0  # one assignment call, two support judgments
    again = client.post("/v1/evaluate", json=request).json()
    assert again["scores"] == out["scores"] and again["cached"] == 3
    geval = client.post("/v1/evaluate", json={"answer": answer, "judge": "scripted", "geval": True}).json()
    assert geval["scores"] == {f"geval_{k}": 5.0 for k in ("coherence", "consistency", "fluency", "relevance")}
    malformed = client.post("/v1/evaluate", json={**request, "nuggets": [{"text": "MALFORMED"}], "segments": None})
    assert malformed.status_code == 200, malformed.text
    got = malformed.json()
    assert got["failed"] == 1 and got["nuggets"][0]["assignment"] is None and got["scores"]["all"] == 0.0


def test_cited_segments_from_the_demo_index(tmp_path, demo_settings):
    with TestClient(create_app(demo_settings.model_copy(update={"judge": None}), arena=False)) as c:
        answer = {
            "topic_id": "demo-01",
            "topic": QUESTION,
            "references": ["stdlib.argparse#0_0", "no.such.segment"],
            "answer": [{"text": SENTENCES[0], "citations": [0, 1]}],
        }
        r = c.post("/v1/evaluate", json={"answer": answer, "index": "demo"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["missing_segments"] == ["no.such.segment"]
        assert out["support"][0][1] is None and out["support"][0][0] in ("full_support", "partial_support")
        assert c.post("/v1/evaluate", json={"answer": answer, "index": "nope"}).status_code == 404


@pytest.mark.parametrize(
    "change, status, message",
    [
        ({}, 422, "nothing to score"),
        ({"geval": True}, 422, "needs an LLM judge"),
        ({"nuggets": []}, 422, "nuggets is empty"),
        ({"gold_answers": ["  "]}, 422, "no non-empty answer"),
        ({"segments": SEGMENTS, "index": "demo"}, 422, "not both"),
        ({"nuggets": [{"text": "x"}] * (MAX_NUGGETS + 1)}, 413, f"the limit is {MAX_NUGGETS}"),
        ({"segments": {"a": "x" * 200_000}}, 413, "the limit is 100,000"),
        ({"nuggets": NUGGETS, "judge": "nope"}, 404, "unknown generator (the name is not echoed); available: "),
        ({"nuggets": NUGGETS, "judge": "extractive"}, 422, "not an LLM"),
        ({"nuggets": NUGGETS, "judge": "down"}, 502, "down"),
        ({"nuggets": [{"text": "x", "importance": "essential"}]}, 422, "importance"),
    ],
)
def test_bad_requests_are_named(client, change, status, message):
    r = client.post("/v1/evaluate", json=body(**change))
    assert r.status_code == status, r.text
    assert message in r.text


def test_the_answer_itself_is_checked(client):
    base = body(nuggets=NUGGETS)
    out_of_range = {**base, "answer": {**base["answer"], "answer": [{"text": "x", "citations": [5]}]}}
    r = client.post("/v1/evaluate", json=out_of_range)
    assert r.status_code == 422 and "outside references" in r.text
    empty = {**base, "answer": {**base["answer"], "answer": []}}
    assert client.post("/v1/evaluate", json=empty).status_code == 422
    long = {**base, "answer": {**base["answer"], "references": [], "answer": [{"text": "x"}] * (MAX_SENTENCES + 1)}}
    r = client.post("/v1/evaluate", json=long)
    assert r.status_code == 413 and "answer sentences" in r.text
    assert client.post("/v1/evaluate", json={**base, "extra": 1}).status_code == 422


def test_a_slow_judge_is_a_504(tmp_path, scripted_base):
    slow = body(nuggets=[{"text": "SLOW"}], judge="scripted")  # the backend's own 5 s timeout
    settings = settings_with_judges(tmp_path, scripted_base, judge_timeout_s=8)
    with TestClient(create_app(settings, arena=False)) as c:
        r = c.post("/v1/evaluate", json=slow)
        assert r.status_code == 504 and "scripted" in r.text, r.text
        # the evaluation's own deadline, before a patient backend would answer
        r = c.post("/v1/evaluate", json={**slow, "judge": "patient"})
        assert r.status_code == 504 and "no answer within 8 s" in r.text, r.text


@pytest.mark.parametrize(
    "change",
    [
        {"answer": {**body()["answer"], "answer": [{"text": SENTENCES[0], "citations": ["0"]}]}},
        {"answer": {**body()["answer"], "answer": [{"text": SENTENCES[0], "citations": [True]}]}},
        {"answer": {**body()["answer"], "answer": [{"text": SENTENCES[0], "citations": [0.0]}]}},
        {"geval": "yes"},
        {"geval": 1},
    ],
)
def test_types_are_strict(client, change):
    """No coercion of strings, booleans or floats into citations, nor of "yes" into a flag."""
    r = client.post("/v1/evaluate", json={**body(nuggets=NUGGETS, segments=SEGMENTS), **change})
    assert r.status_code == 422, r.text


def test_nugget_importance_is_read_in_any_case_as_in_the_cli(client):
    nuggets = [
        {"text": NUGGETS[0]["text"], "importance": "Vital"},
        {"text": NUGGETS[1]["text"], "importance": " OKAY "},
    ]
    r = client.post("/v1/evaluate", json=body(nuggets=nuggets))
    assert r.status_code == 200, r.text
    assert [n["importance"] for n in r.json()["nuggets"]] == ["vital", "okay"]
