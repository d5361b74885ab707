"""Track submissions: formats, the validator, run -> validate -> evaluate on the demo corpus, resume, errors."""

from __future__ import annotations

import json

import pytest
from fakes import flaky_openai_app
from servers import serve_app
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings
from ragnarok.core.topics import read_jsonl, read_tsv
from ragnarok.core.types import CitedSentence, RagAnswer
from ragnarok.track.formats import answer_record, normalise, trim_words
from ragnarok.track.output import JsonLinesLog
from ragnarok.track.validate import fix, validate

cli = CliRunner()
SEG = "msmarco_v2.1_doc_51_766815931#2_1606878413"


@pytest.fixture
def env(demo_settings, monkeypatch):
    """The CLI in this process, on the session's demo index, with a 200 ms OpenAI-compatible generator."""
    with serve_app(flaky_openai_app()) as url:
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
        monkeypatch.setenv("RAGNAROK_TOPIC_BACKOFF_S", "0.05")  # retries 50 ms apart, not 1 s
        monkeypatch.setenv(
            "RAGNAROK_GENERATORS",
            json.dumps(
                [
                    {
                        "name": "slow200",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "fixed-200ms",
                        "max_concurrency": 16,
                    },
                    {
                        "name": "broken",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "down-500",
                        "max_retries": 0,
                    },
                ]
            ),
        )
        get_settings.cache_clear()
        yield url
        get_settings.cache_clear()


def ragnarok(*args: str, code: int = 0) -> str:
    result = cli.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ topic files of the real track


def test_real_topic_files_load_exactly(shared_data):
    rag24 = read_tsv(shared_data / "trec-rag" / "topics.rag24.test.txt")
    assert len(rag24) == 301 and rag24[0].qid == "2024-145979"
    assert rag24[0].text == "what is vicarious trauma and how can it be coped with?"
    rag25 = read_jsonl(shared_data / "trec-rag" / "topics.rag25.test.jsonl")
    assert len(rag25) == 105 and rag25[0].qid == "464"
    raw = json.loads((shared_data / "trec-rag" / "topics.rag25.test.jsonl").read_text().splitlines()[0])
    assert rag25[0].text == raw["title"]  # byte for byte, quotes and all


@pytest.mark.parametrize("year", [2024, 2025])
def test_records_of_real_topics_validate(shared_data, tmp_path, year):
    name = "topics.rag24.test.txt" if year == 2024 else "topics.rag25.test.jsonl"
    topics = (read_tsv if year == 2024 else read_jsonl)(shared_data / "trec-rag" / name)
    refs = [f"msmarco_v2.1_doc_{i}_{i * 7}#{i % 3}_{i * 11}" for i in range(30)]
    long = [CitedSentence(text="word " * 150, citations=[0, 0, 1]) for _ in range(4)]  # 600 words
    out = tmp_path / "run.jsonl"
    with out.open("w") as f:
        for t in topics:
            answer = RagAnswer(topic_id=t.qid, topic=t.text, references=refs + refs[:2], answer=long)
            f.write(json.dumps(answer_record(answer, year=year, run_id="r1", topic_text=t.text, team_id="team")) + "\n")
    result = validate(out, {t.qid: t.text for t in topics})
    assert result.ok and result.year == year and result.lines == len(topics), result.problems[:3]
    record = lines(out)[0]
    words = sum(len(s["text"].split()) for s in record["answer"])
    assert words == 400 and len(record["references"]) == (20 if year == 2024 else 30)
    if year == 2025:
        assert record["metadata"] == {
            "team_id": "team",
            "run_id": "r1",
            "type": "automatic",
            "narrative_id": topics[0].qid,
            "narrative": topics[0].text,
        }
    else:
        assert record["response_length"] == 400 and record["topic"] == topics[0].text


def test_normalise_keeps_cited_references_and_remaps_citations():
    refs = ["a", "b", "a", "c"]
    answer = [CitedSentence(text="x y", citations=[2, 3, 3]), CitedSentence(text="z", citations=[9])]
    unique, sentences = normalise(refs, answer, max_references=2)  # "b" is neither cited nor needed
    assert unique == ["a", "c"] and [s.citations for s in sentences] == [[0, 1], []]
    unique, sentences = normalise(["a", "b", "c"], [CitedSentence(text="q", citations=[2, 1, 0])], 2)
    assert unique == ["a", "b"] and sentences[0].citations == [1, 0]  # over the limit: the best-ranked kept
    assert [s.text for s in trim_words(answer, 2)] == ["x y"]
    assert [s.text for s in trim_words(answer, 1)] == ["x"]


# ------------------------------------------------------------------ the validator's rules

TOPICS = {"t1": "what is x", "t2": "what is y"}


def good(tid: str = "t1", **changes) -> dict:
    record = {
        "run_id": "r",
        "topic_id": tid,
        "topic": TOPICS[tid],
        "references": [SEG],
        "response_length": 2,
        "answer": [{"text": "X is.", "citations": [0]}],
    }
    return {**record, **changes}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([good(), good()], "topic answered again"),
        ([good(), good("t2", run_id="other")], "more than one run_id"),
        ([good(topic="What is x")], "topic text differs"),
        ([good(references=[SEG, "msmarco_v2.1_doc_51#2"])], "not MS MARCO V2.1 segment ids"),
        ([good(references=[SEG, SEG])], "repeated references"),
        ([good(references=[SEG] * 21)], "21 references; at most 20"),
        ([good(answer=[{"text": "X is.", "citations": [1]}])], "outside references"),
        ([good(answer=[{"text": "X is.", "citations": [0, 0]}])], "repeats a citation"),
        ([good(response_length=3)], "response_length is 3 but the answer has 2 words"),
        ([good(answer=[{"text": "w " * 401, "citations": []}], response_length=401)], "401 words; at most 400"),
        ([{k: v for k, v in good().items() if k != "references"}], "references is missing"),
        ([good(answer=[{"text": 3, "citations": []}])], "answer[0] must be"),
    ],
)
def test_validator_errors(tmp_path, records, message):
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "{not json\n")
    result = validate(path, TOPICS)
    assert not result.ok
    assert any(message in p.message for p in result.errors), [str(p) for p in result.problems]
    assert any(p.line == len(records) + 1 and "not a JSON line" in p.message for p in result.errors)


def test_missing_topic_is_a_warning_and_fix_trims(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(good(answer=[{"text": "w " * 450, "citations": [0, 0]}], response_length=450)) + "\n")
    result = validate(path, TOPICS)
    assert [p.level for p in result.problems].count("warning") == 1 and "t2" in result.warnings[0].message
    assert not result.ok
    assert fix(result, tmp_path / "fixed.jsonl").lines == 1
    fixed = validate(tmp_path / "fixed.jsonl", TOPICS)
    assert fixed.ok and lines(tmp_path / "fixed.jsonl")[0]["response_length"] == 400
    with pytest.raises(ValueError, match="writes a new file"):
        fix(result, path)


def test_validate_cli(tmp_path, shared_data):
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(good(answer=[{"text": "w " * 450, "citations": []}], response_length=450)) + "\n")
    topics = tmp_path / "topics.tsv"
    topics.write_text("t1\twhat is x\n")
    out = ragnarok("validate", path, "--topics", topics, code=1)
    assert "450 words" in out and "INVALID" in out
    out = ragnarok("validate", path, "--topics", topics, "--fix", tmp_path / "fixed.jsonl")
    assert "valid TREC RAG 2024 run" in out.splitlines()[-1]
    assert "error: cannot read" in ragnarok("validate", tmp_path / "nope.jsonl", code=2)


def test_track_topics_count_references_that_are_not_v21_segments_in_one_line(tmp_path, shared_data):
    """With rag24 or rag25 topics, a run citing other docids (a demo run's) is invalid, as the official checkers
    count it; --no-v21 lets a demo run through."""
    from ragnarok.core.topics import read_topics

    topics = read_topics(shared_data / "trec-rag" / "topics.rag24.test.txt")[:3]
    path = tmp_path / "demo-run.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "run_id": "r",
                    "topic_id": t.qid,
                    "topic": t.text,
                    "references": ["stdlib.gzip#0_0", "stdlib.argparse#2_9"],
                    "response_length": 2,
                    "answer": [{"text": "X is.", "citations": [0, 1]}],
                }
            )
            + "\n"
            for t in topics
        )
    )
    for topic_set in ("rag24", "rag24.test", str(shared_data / "trec-rag" / "topics.rag24.test.txt")):
        out = ragnarok("validate", path, "--topics", topic_set, code=1)
        said = [line for line in out.splitlines() if "not MS MARCO V2.1 segment ids" in line]
        assert len(said) == 1 and "6 references in 3 answers are not MS MARCO V2.1 segment ids" in said[0], out
        assert "'stdlib.gzip#0_0', on line 1 (--no-v21 allows other docids" in said[0]
    out = ragnarok("validate", path, "--topics", "rag24", "--no-v21")  # 298 topics unanswered: warnings only
    assert "not MS MARCO V2.1" not in out and "298 of 301 topics have no answer" in out


# ------------------------------------------------------------------ runs on the demo corpus


def test_r_task_then_ag_only_then_evaluate(env, tmp_path):
    run = tmp_path / "bm25.run"
    out = ragnarok(
        "run",
        "--topics",
        "demo",
        "--pipeline",
        "bm25@100",
        "--task",
        "r",
        "--run-id",
        "bm25",
        "--output",
        run,
        "--concurrency",
        "8",
    )
    assert "50 topics written" in out
    rows = [line.split() for line in run.read_text().splitlines()]
    assert {len(r) for r in rows} == {6} and {r[5] for r in rows} == {"bm25"}
    assert max(int(r[3]) for r in rows) == 100
    given = tmp_path / "bm25.run.requests.jsonl"
    first = json.loads(given.read_text().splitlines()[0])
    assert set(first) == {"query", "candidates"} and len(first["candidates"]) == 100  # rank_llm Request
    table = ragnarok("eval", "topics/qrels.demo.txt", run, "--run-name", "BM25")
    assert "BM25" in table and "nDCG@10" in table
    ndcg = float(table.splitlines()[-1].split()[1])
    assert 0.3 < ndcg < 1.0

    answers = tmp_path / "ag.jsonl"
    out = ragnarok(
        "run",
        "--requests",
        given,
        "--pipeline",
        "extractive",
        "--run-id",
        "ag-only",
        "--output",
        answers,
        "--topics",
        "demo",
    )
    assert "50 topics written" in out
    ragnarok("validate", answers, "--topics", "demo")
    top20 = {r["query"]["qid"]: {c["docid"] for c in r["candidates"][:20]} for r in lines(given)}
    for record in lines(answers):
        assert record["references"] and set(record["references"]) <= top20[record["topic_id"]]


def test_rag_task_2025_and_resume(env, tmp_path):
    out_path = tmp_path / "run.jsonl"
    args = [
        "run",
        "--topics",
        "demo",
        "--pipeline",
        "bm25@20 | slow200",
        "--run-id",
        "r25",
        "--year",
        "2025",
        "--output",
        out_path,
        "--concurrency",
        "16",
    ]
    assert "50 topics written" in ragnarok(*args)
    ragnarok("validate", out_path, "--topics", "demo")
    assert lines(out_path)[0]["metadata"]["type"] == "automatic"
    kept = out_path.read_bytes().splitlines(keepends=True)
    out_path.write_bytes(b"".join(kept[:20]) + kept[20][:37])  # 20 whole lines and a torn one
    assert "30 topics written, 20 already done" in ragnarok(*args)
    assert out_path.read_bytes().startswith(b"".join(kept[:20]))
    assert sorted(r["metadata"]["narrative_id"] for r in lines(out_path)) == sorted(
        r["metadata"]["narrative_id"] for r in map(json.loads, kept)
    )
    # another run id into the same file: refused, the file untouched
    before = out_path.read_bytes()
    other = [*args[:6], "other", *args[7:]]
    assert "holds run 'r25', not 'other'" in ragnarok(*other, code=2)
    assert out_path.read_bytes() == before


def test_failing_topics_are_retried_then_reported(env, tmp_path):
    out = ragnarok(
        "run",
        "--topics",
        "demo",
        "--pipeline",
        "bm25@5 | broken",
        "--run-id",
        "b",
        "--retries",
        "2",
        "--output",
        tmp_path / "run.jsonl",
        code=1,
    )
    assert "0 topics written" in out and "50 failed" in out and "backend exploded" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topics", "rag24.test"], "fetch it with `ragnarok topics fetch rag24.test`"),
        (["--topics", "nonesuch"], "unknown topic set or file 'nonesuch'"),
        (["--pipeline", "bm25@10 |"], "expected a reranker or generator name"),
        (["--pipeline", "bm25@10 | gpt-9"], "unknown generator 'gpt-9'"),
        (["--output", "/nonexistent/dir/run.jsonl"], "output folder /nonexistent/dir does not exist"),
        (["--year", "2023"], "--year must be one of"),
    ],
)
def test_bad_input_is_one_line_and_loses_nothing(env, tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("RAGNAROK_TOPICS_DIR", str(tmp_path / "no-shared-copies"))  # rag24.test not beside us
    get_settings.cache_clear()
    out_path = tmp_path / "run.jsonl"
    out_path.write_text(json.dumps(good()) + "\n")
    before = out_path.read_bytes()
    base = {"--topics": "demo", "--pipeline": "bm25@10 | extractive", "--run-id": "r", "--output": str(out_path)}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    out = ragnarok("run", *[x for kv in base.items() for x in kv], code=2)
    assert out.startswith("error: ") and message in out, out
    assert out_path.read_bytes() == before


def test_malformed_topic_file_names_the_line(env, tmp_path):
    bad = tmp_path / "topics.tsv"
    bad.write_text("q1\tfine\nno tab here\n")
    out = ragnarok(
        "run", "--topics", bad, "--pipeline", "bm25@10 | extractive", "--output", tmp_path / "o.jsonl", code=2
    )
    assert f"{bad}:2" in out


def test_topics_fetch_from_a_local_mirror(env, shared_data, tmp_path, monkeypatch):
    from fastapi import FastAPI
    from fastapi.responses import FileResponse

    mirror = FastAPI()
    mirror.get("/healthz")(lambda: {"ok": True})
    mirror.get("/tools/{name}")(lambda name: FileResponse(shared_data / "trec-rag" / name))
    with serve_app(mirror) as url:
        monkeypatch.setenv("RAGNAROK_TOPICS_SOURCE_URL", f"{url}/tools")
        monkeypatch.setenv("RAGNAROK_DATA_DIR", str(tmp_path / "data"))
        get_settings.cache_clear()
        assert "301 topics" in ragnarok("topics", "fetch", "rag24.test")
        assert "rag24.test\tavailable" in ragnarok("topics", "list")
    monkeypatch.setenv("RAGNAROK_TOPICS_SOURCE_URL", "http://127.0.0.1:9/none")
    get_settings.cache_clear()
    assert "cannot fetch" in ragnarok("topics", "fetch", "rag25.test", code=2)


def test_torn_last_line_is_dropped_on_open(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"topic_id": "a"}\n{"topic_id": "b"}\n{"topic_id": "c", "ans')
    with JsonLinesLog(path, lambda r: r.get("topic_id")) as log:
        assert log.done == {"a", "b"}
        log.append({"topic_id": "c"})
    assert path.read_bytes() == b'{"topic_id": "a"}\n{"topic_id": "b"}\n{"topic_id": "c"}\n'
