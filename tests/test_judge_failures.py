"""Failed judgments: an unreadable LLM judgment is cached as a failure and read back as one, unless
``--retry-failed`` asks again; ``judge relevance`` and ``judge pairwise`` exit non-zero when the judge gave
nothing readable."""

from __future__ import annotations

import json

from judge_server import judge_env, scripted  # noqa: F401 - fixtures
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.llm import LLMJudge


class Model:
    def __init__(self, answers: list[str]):
        self.answers, self.calls = list(answers), 0

    def __call__(self, messages):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.answers.pop(0)


def test_failures_are_cached_and_retried_only_when_asked(tmp_path):
    cache = JudgeCache(tmp_path / "judgments.db")
    broken = Model(["hmm", "hmm again"])  # unreadable, and again after the reminder
    assert LLMJudge("m", broken, cache).support("s", "p") is None and broken.calls == 2

    silent = Model([])
    again = LLMJudge("m", silent, cache)
    assert again.support("s", "p") is None and silent.calls == 0  # the failure came from the cache
    assert again.stats.failed == 1 and again.stats.cached == 1

    fixed = Model(['["full_support"]'])
    retried = LLMJudge("m", fixed, cache, retry_failed=True)
    assert retried.support("s", "p") == "full_support" and fixed.calls == 1
    assert LLMJudge("m", Model([]), cache).support("s", "p") == "full_support"  # the retry replaced it
    done = Model([])
    assert LLMJudge("m", done, cache, retry_failed=True).support("s", "p") == "full_support" and done.calls == 0


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def answers(path, text: str):  # type: ignore[no-untyped-def]
    path.write_text(
        "".join(
            json.dumps(
                {
                    "run_id": "r",
                    "topic_id": q,
                    "topic": f"question {q}",
                    "references": [],
                    "answer": [{"text": text, "citations": []}],
                }
            )
            + "\n"
            for q in ("q1", "q2")
        )
    )
    return path


def test_pairwise_with_only_unreadable_verdicts_says_so_and_fails(judge_env, tmp_path):  # noqa: F811
    a = answers(tmp_path / "a.jsonl", "MALFORMED one")
    b = answers(tmp_path / "b.jsonl", "MALFORMED two")
    result = invoke("judge", "pairwise", a, b, "--judge", "scripted")
    assert result.exit_code == 1, result.output
    assert "every verdict of the judge was unreadable" in result.output
    good, plain = answers(tmp_path / "g.jsonl", "A GOOD answer"), answers(tmp_path / "p.jsonl", "A plain one")
    readable = invoke("judge", "pairwise", good, plain, "--judge", "scripted")
    assert readable.exit_code == 0, readable.output


def test_relevance_that_labels_nothing_fails(judge_env, demo_settings, monkeypatch, tmp_path):  # noqa: F811
    from ragnarok.core.settings import get_settings

    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
    get_settings.cache_clear()
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 stdlib.gzip#0_0 1 9.0 r\nq1 Q0 stdlib.csv#0_0 2 8.0 r\n")
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\tMALFORMED question\n")  # the scripted judge answers nothing readable
    out = tmp_path / "qrels.txt"
    strict = invoke(
        "judge",
        "relevance",
        run,
        "--topics",
        topics,
        "--output",
        out,
        "--judge",
        "scripted",
        "--umbrela-mode",
        "strict",
    )
    assert strict.exit_code == 1 and "no segment was labelled" in strict.output, strict.output
    parity = invoke("judge", "relevance", run, "--topics", topics, "--output", out, "--judge", "scripted")
    assert parity.exit_code == 1 and "none of the judge's 2 grades could be read" in parity.output, parity.output
    assert "2 unreadable grades set to 0 as umbrela does" in parity.output
    topics.write_text("q1\tcompress a file\n")
    fine = invoke("judge", "relevance", run, "--topics", topics, "--output", out, "--judge", "scripted")
    assert fine.exit_code == 0, fine.output


def test_a_failing_backend_is_one_error_not_one_line_per_judgment_in_flight(caplog):
    import logging

    import pytest

    from ragnarok.judge.llm import JudgeStats
    from ragnarok.judge.service import JudgeFailed, run_all
    from ragnarok.stages.generate.base import GenerationError

    log = logging.getLogger("ragnarok.stages.generate.base")

    def work(item: int) -> int:
        log.warning("generator %r failed after %.0f ms: %s", "down", 1.0, "cannot reach it")
        raise GenerationError("down", "cannot reach it", False)

    class Judge:
        stats = JudgeStats()

        def describe(self) -> str:
            return "LLM judge down"

    with caplog.at_level(logging.WARNING), pytest.raises(JudgeFailed, match="cannot reach it"):
        run_all(list(range(8)), work, 4, "judging", Judge(), progress=False)  # type: ignore[arg-type]
    assert not [r for r in caplog.records if "failed after" in r.getMessage()]
    log.warning("generator %r failed after %.0f ms: %s", "other", 1.0, "elsewhere")  # outside: still logged
    assert [r for r in caplog.records if "elsewhere" in r.getMessage()]
