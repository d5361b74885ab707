"""A client written for Ragnarök works here: the curl lines of castorini/ragnarok HEAD's README ("Serve the direct
generation API"), replayed as they are against `ragnarok serve`, with only the ports (and the prebuilt index,
which is not on this machine) changed: its direct body, and Anserini's REST answer piped into /v1/generate, from
our own search route and from Anserini's real RestServer."""

from __future__ import annotations

import json
import os
import subprocess
from urllib.parse import quote

import pytest
from servers import anserini_rest_server, ragnarok_serve

# castorini/ragnarok HEAD, README.md: Anserini's REST server on 8081, `ragnarok serve ... --port 8083`
DIRECT = """curl -X POST http://127.0.0.1:8083/v1/generate \\
  -H 'content-type: application/json' \\
  -d '{"query":"q","candidates":["p"]}'"""
PIPED = """curl -s "http://127.0.0.1:8081/v1/msmarco-v1-passage/search?query=what%20is%20python%20commonly%20used%20for" \\
  | curl -s -X POST http://127.0.0.1:8083/v1/generate \\
      -H 'content-type: application/json' \\
      --data-binary @- \\
  | jq"""
SEARCHED = "how do I parse command-line arguments"


def run(line: str, ours: str, anserini: str, index: str) -> dict:
    command = (
        line.replace("http://127.0.0.1:8083", ours)
        .replace("http://127.0.0.1:8081", anserini)
        .replace("msmarco-v1-passage", index)
        .replace("what%20is%20python%20commonly%20used%20for", quote(SEARCHED))
        .replace("| jq", "| python3 -m json.tool")
    )
    out = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def record(envelope: dict) -> dict:
    assert envelope["schema_version"] == "castorini.cli.v1" and envelope["status"] == "success", envelope
    assert envelope["exit_code"] == 0 and envelope["errors"] == []
    (artifact,) = envelope["artifacts"]
    (answer,) = artifact["data"]
    assert answer["answer"] and all(s["citations"] for s in answer["answer"]), answer
    return answer


@pytest.fixture(scope="module")
def served(demo_settings):
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}
    with ragnarok_serve(env) as base:
        yield base


def test_ragnaroks_direct_body(served):
    answer = record(run(DIRECT, served, served, "demo"))
    assert answer["references"] == ["d0"] and answer["topic"] == "q" and answer["topic_id"] == "q0"
    assert answer["answer"] == [{"text": "p", "citations": [0]}] and answer["run_id"] == "ragnarok"


def test_anserinis_answer_piped_in_from_our_search_route(served):
    answer = record(run(PIPED, served, served, "demo"))
    assert answer["topic"] == SEARCHED and all(r.startswith("stdlib.") for r in answer["references"])


def test_anserinis_answer_piped_in_from_its_own_rest_server(served, demo_settings):
    with anserini_rest_server() as rest:
        answer = record(run(PIPED, served, rest, quote(str(demo_settings.demo_index_dir), safe="")))
    assert answer["topic"] == SEARCHED and all(r.startswith("stdlib.") for r in answer["references"])


def test_its_overrides_and_its_errors(served):
    import httpx

    body = {
        "query": {"text": "compress a file with gzip", "qid": "t1"},
        "candidates": [{"docid": "a#0_0", "doc": {"contents": "gzip.open opens a gzip-compressed file."}}],
        "overrides": {"prompt_mode": "chatqa", "topk": [20, 5], "run_id": "mine", "reasoning_effort": "low"},
    }
    envelope = httpx.post(f"{served}/v1/generate", json=body, timeout=60).json()
    answer = record(envelope)
    assert answer["run_id"] == "mine" and answer["topic_id"] == "t1" and answer["references"] == ["a#0_0"]
    assert envelope["resolved"]["prompt_mode"] == "chatqa"
    assert envelope["warnings"] == ["override reasoning_effort has no effect on this server"]
    bad = httpx.post(f"{served}/v1/generate", json={**body, "overrides": {"tempo": 1}}, timeout=60)
    assert bad.status_code == 422 and "unsupported generate override field(s): tempo" in bad.text
    unknown = httpx.post(f"{served}/v1/generate", json={**body, "overrides": {"model": "gpt-4.1-mini"}}, timeout=60)
    assert unknown.status_code == 404 and "extractive" in unknown.json()["detail"]
