"""``--output json`` (``--output-format json`` where ``--output`` names a file): one envelope on stdout, the human
text on stderr, on success and on failure alike."""

from __future__ import annotations

import json

from test_cli_consistency import _answers, _nuggets
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import get_settings

KEYS = {"command", "ok", "result", "errors", "warnings"}


def envelope(*args: object, code: int | None = 0) -> tuple[dict, str]:
    """The envelope (the whole of stdout) and stderr of ``ragnarok ARGS`` (exit ``code``; None: any)."""
    got = CliRunner().invoke(app, [str(a) for a in args])
    assert code is None or got.exit_code == code, (got.exit_code, got.stdout, got.stderr)
    parsed = json.loads(got.stdout)  # stdout is one JSON object and nothing else
    assert set(parsed) == KEYS and got.stdout.count("\n") == 1, got.stdout
    return parsed, got.stderr


def test_search_eval_run_validate_envelopes(demo_data_env, tmp_path):
    run = tmp_path / "bm25.txt"
    found, text = envelope("search", "--topics", "demo", "--output", run, "--k", "20", "--output-format", "json")
    assert found["command"] == "search" and found["ok"] and not found["errors"]
    assert found["result"] == {"output": str(run), "run_id": "bm25", "topics": 50, "lines": 1000, "failed": []}
    assert "wrote 1,000 lines for 50 topics" in text

    half = tmp_path / "half.txt"
    half.write_text("".join(line + "\n" for line in run.read_text().splitlines()[:500]))  # 25 topics
    scored, text = envelope("eval", "topics/qrels.demo.txt", run, half, "--output", "json")
    runs = scored["result"]["runs"]
    assert scored["ok"] and [r["name"] for r in runs] == ["bm25.txt", "half.txt"] and scored["result"]["topics"] == 50
    assert 0.3 < runs[0]["scores"]["nDCG@10"] < 1 and [r["topics"] for r in runs] == [50, 25]
    assert len(scored["warnings"]) == 1 and "half.txt covers 25 of the 50 topics" in scored["warnings"][0]
    assert "nDCG@10" in text and "warning: half.txt covers" in text  # the table and the warning, on stderr

    answers, topics = tmp_path / "ext.jsonl", tmp_path / "two.tsv"
    topics.write_text("demo-01\thow do I parse command-line arguments\ndemo-02\tcompress a file with gzip\n")
    ran, text = envelope(
        "run",
        "--topics",
        topics,
        "--pipeline",
        "bm25@20 | extractive",
        "--run-id",
        "ext",
        "--output",
        answers,
        "--output-format",
        "json",
    )
    assert ran["ok"] and ran["result"] == {
        "output": str(answers),
        "topics": 2,
        "written": 2,
        "skipped": 0,
        "failed": [],
    }
    assert "2 topics written" in text
    checked, text = envelope("validate", answers, "--topics", topics, "--output", "json")
    assert checked["ok"] and checked["result"]["year"] == 2024 and checked["result"]["lines"] == 2
    assert "valid TREC RAG 2024 run" in text


def test_failures_still_give_the_envelope(demo_data_env, tmp_path):
    failed, text = envelope(
        "run", "--topics", "nonesuch", "--output", tmp_path / "r.jsonl", "--output-format", "json", code=2
    )
    assert not failed["ok"] and failed["command"] == "run" and failed["result"] is None
    assert len(failed["errors"]) == 1 and "unknown topic set or file 'nonesuch'" in failed["errors"][0]
    assert text.startswith("error: unknown topic set or file 'nonesuch'")
    assert not (tmp_path / "r.jsonl").exists()

    missing, text = envelope("eval", "topics/qrels.demo.txt", tmp_path / "none.txt", "--output", "json", code=2)
    assert not missing["ok"] and missing["errors"] and text.startswith("error: ")

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(
            {
                "run_id": "r",
                "topic_id": "1",
                "topic": "t",
                "references": [],
                "answer": [{"text": "x", "citations": [3]}],
            }
        )
        + "\n"
    )
    checked, text = envelope("validate", bad, "--output", "json", code=1)
    assert not checked["ok"] and checked["result"]["errors"] == len(checked["errors"]) >= 1
    assert all(e.startswith("error: line 1") for e in checked["errors"]) and "INVALID" in text
    fixed, _ = envelope("validate", bad, "--fix", tmp_path / "fixed.jsonl", "--output", "json")
    assert fixed["ok"] and not fixed["errors"] and fixed["result"]["fixed"]["ok"]
    assert fixed["result"]["fixed"]["changes"]["citations_dropped"] == 1


def test_eval_rag_doctor_and_keys_envelopes(demo_data_env, tmp_path, monkeypatch):
    a = _answers(tmp_path / "a.jsonl", ["1", "2"])
    scored, text = envelope("eval-rag", a, "--nuggets", _nuggets(tmp_path / "n.jsonl", ["1", "2"]), "--output", "json")
    run = scored["result"]["runs"][0]
    assert scored["ok"] and run["name"] == "a.jsonl" and run["topics"] == 2
    assert set(run["means"]["strict_all"]) >= {"mean", "low", "high"} and "bootstrap" in text

    doctor, text = envelope("doctor", "--output", "json", code=None)
    assert doctor["result"]["checks"] and doctor["ok"] == (not doctor["result"]["missing"])
    assert doctor["errors"] == doctor["result"]["missing"] and "java" in text

    # keys in a data directory of this test's own: the session's demo one is shared (the docs' runnable blocks
    # create their own team-a there)
    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(tmp_path / "keys"))
    get_settings.cache_clear()
    made = CliRunner().invoke(app, ["keys", "create", "--name", "team-a", "--scopes", "retrieve"])
    assert made.exit_code == 0, made.output
    listed, text = envelope("keys", "list", "--output", "json")
    assert listed["command"] == "keys list" and [k["name"] for k in listed["result"]] == ["team-a"]
    assert made.stdout.strip() not in json.dumps(listed) and "team-a" in text
    legacy, _ = envelope("keys", "list", "--json")  # the deprecated flag: the same envelope
    assert legacy["result"] == listed["result"]


def test_output_json_on_a_command_whose_output_is_its_file(tmp_path, monkeypatch):
    """``run`` and ``search`` write the file ``--output`` names: ``--output json`` there is refused (the envelope
    is ``--output-format json``), and no file called ``json`` is written."""
    monkeypatch.chdir(tmp_path)
    for command in (["search", "--topics", "demo"], ["run", "--topics", "demo"]):
        got = CliRunner().invoke(app, [*command, "--output", "json"])
        assert got.exit_code == 2 and "--output-format json" in got.stderr, (got.exit_code, got.stderr)
        assert got.stderr.count("\n") == 1 and not (tmp_path / "json").exists()


def test_a_result_is_strict_json():
    """NaN and infinity are no JSON numbers (a strict parser refuses them): the envelope writes null instead."""
    from ragnarok.runtime.cli_output import Envelope

    written = Envelope("eval", result={"nDCG@10": float("nan"), "t": [float("inf"), 1.5], "n": 3}).dumps()
    assert "NaN" not in written and json.loads(written)["result"] == {"nDCG@10": None, "t": [None, 1.5], "n": 3}


def test_logged_warnings_are_in_the_envelope(capsys, monkeypatch):
    """A warning logged while a command runs (its code's or a library's) is in ``warnings``, and on stderr."""
    import logging

    from ragnarok.runtime.cli_output import PARAM, enveloped

    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # as in the CLI: no logging configured
    with enveloped({PARAM: "json"}):
        logging.getLogger("ragnarok.somewhere").warning("the cache is %s", "cold")
        logging.getLogger("ragnarok.somewhere").info("not a warning")
    out, err = capsys.readouterr()
    assert json.loads(out)["warnings"] == ["the cache is cold"] and err == "the cache is cold\n"
    assert logging.getLogger().handlers == []  # the envelope's handler is gone with it
