"""The proxy judge: a nugget is supported only by a well-formed statement that agrees with it.
Each adversarial kind -- a word list, negation, repetition, an echo of the question, a wrong entity, an
antonym, a wrong value -- earns nothing; correct statements and a paraphrase do. Citation support the same
way; every proxy judgment is cached."""

from __future__ import annotations

import pytest

from ragnarok.judge import textrules as tr
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.proxy import ProxyJudge

QUERY = "compress a file with gzip"
NUGGETS = [
    "use the gzip module",
    "gzip.open opens a file for compressed writing",
    "shutil.copyfileobj copies the data into the gzip file",
]
GOLD = (
    "Use the gzip module, which reads and writes gzip-compressed files. Open the output with "
    "gzip.open(filename, 'wb'), which opens a gzip file for compressed writing. Then copy the data into it "
    "with shutil.copyfileobj(f_in, f_out), which copies the data from one file object to another."
)
SEGMENT = (
    "gzip: This module provides a simple interface to compress and decompress files just like the GNU "
    "programs gzip and gunzip would. The gzip.open() function opens a gzip-compressed file in binary or "
    "text mode, returning a file object."
)


@pytest.fixture(scope="module")
def judge():
    return ProxyJudge()


def labels(judge: ProxyJudge, answer: str, nuggets=NUGGETS, query: str = QUERY) -> list[str | None]:
    return judge.assign(query, answer, nuggets)


def test_correct_statements_are_supported(judge):
    assert labels(judge, GOLD) == ["support"] * 3


def test_a_paraphrase_is_supported_by_meaning(judge):
    paraphrase = (
        "To write compressed output, call the open function of gzip in binary write mode. The "
        "copyfileobj helper from shutil streams the bytes of the source into the gzip file object."
    )
    assert labels(judge, paraphrase, NUGGETS[1:]) == ["support", "support"]


@pytest.mark.parametrize(
    "answer",
    [
        "gzip module gzip.open shutil.copyfileobj data file compressed writing.",  # a word list
        "gzip, gzip.open, compressed writing, shutil.copyfileobj, data, gzip file.",  # a list of terms
    ],
)
def test_a_word_list_earns_nothing(judge, answer):
    assert labels(judge, answer) == ["not_support"] * 3
    assert not tr.is_statement(answer)


def test_negated_statements_earn_nothing(judge):
    negated = (
        "Never use the gzip module. gzip.open does not open a file for compressed writing. "
        "shutil.copyfileobj cannot copy the data into the gzip file."
    )
    assert labels(judge, negated) == ["not_support"] * 3


def test_an_antonym_earns_nothing(judge):
    assert labels(
        judge, "gzip.open decompresses a file it reads; it opens nothing for writing.", ["gzip.open compresses a file"]
    ) == ["not_support"]


@pytest.mark.parametrize(
    "answer",
    [
        "Use bz2.open(filename, 'wb'), which opens a file for compressed writing.",  # another module's open
        "Use the lzma module, which opens a file for compressed writing.",  # another module named
        "Use gzip.open(filename, 'wb') with compresslevel=3 for compressed writing.",  # another value
        "Call gzip.compress(data), which opens a file for compressed writing.",  # another function, same module
    ],
)
def test_a_wrong_entity_or_value_earns_nothing(judge, answer):
    nugget = (
        "gzip.open opens a file for compressed writing with compresslevel=9"
        if "compresslevel" in answer
        else "gzip.open opens a file for compressed writing"
    )
    assert labels(judge, answer, [nugget]) == ["not_support"]


def test_echoing_the_question_earns_nothing(judge):
    echo = (
        "Compressing a file with gzip is a common task, and how you do it depends on your situation. "
        "Compressing files with gzip can be done in several ways."
    )
    assert labels(judge, echo) == ["not_support"] * 3


def test_repetition_counts_once(judge):
    once = labels(judge, "Use the gzip module.")
    assert labels(judge, " ".join(["Use the gzip module."] * 12)) == once
    assert once == ["support", "not_support", "not_support"]


def test_citation_support_needs_agreement_not_shared_words(judge):
    assert (
        judge.support("The gzip.open() function opens a gzip-compressed file in binary or text mode.", SEGMENT)
        == "full_support"
    )
    assert (
        judge.support("The gzip.open() function never opens a gzip-compressed file in binary mode.", SEGMENT)
        == "no_support"
    )
    assert judge.support("The bz2.open() function opens a compressed file in binary mode.", SEGMENT) == "no_support"
    assert judge.support("gzip module gzip.open compress decompress files binary text mode.", SEGMENT) == "no_support"


@pytest.mark.parametrize(
    "sentence",
    [
        "The gzip.open() function may or may not open a gzip-compressed file in binary or text mode.",  # a hedge
        "It is still unclear whether gzip.open() opens a gzip-compressed file in binary or text mode.",
        "Opening a gzip-compressed file in binary or text mode is discussed in [1].",  # a pointer
        "Whether gzip.open() opens a gzip-compressed file in binary or text mode is a question developers raise.",
        "It is a myth that the gzip.open() function opens a gzip-compressed file in binary or text mode.",  # a denial
        "It is false that gzip.open() opens a gzip-compressed file in binary or text mode.",
        # talk about the task, not the answer
        "Compressing and decompressing files like the GNU gzip and gunzip programs is a common task in Python.",
        "There are many ways to compress and decompress files like the GNU gzip and gunzip programs.",
    ],
)
def test_citation_support_refuses_sentences_that_state_nothing(judge, sentence):
    assert judge.support(sentence, SEGMENT) == "no_support"


@pytest.mark.parametrize(
    "sentence",
    [
        "The gzip module compresses and decompresses files like the GNU programs, and gzip.open() never opens a "
        "gzip-compressed file in binary mode.",
        "The gzip.open() function does not return a file object; it opens a gzip-compressed file in binary or text mode.",
    ],
)
def test_a_clause_the_segment_contradicts_leaves_the_sentence_unsupported(judge, sentence):
    assert judge.support(sentence, SEGMENT) == "no_support"


def test_citation_support_keeps_conditionals_and_paraphrases(judge):
    assert (
        judge.support("If you pass a text mode, gzip.open() opens the gzip-compressed file as text.", SEGMENT)
        != "no_support"
    )
    assert (
        judge.support(
            "With gzip.open() you get back a file object for a compressed file, in binary or text mode.", SEGMENT
        )
        == "full_support"
    )


def test_citation_support_reads_example_arguments_as_examples(judge):
    segment = (
        "shutil.copyfileobj (shutil) shutil.copyfileobj: Copy data from file-like object fsrc to file-like object fdst."
    )
    assert (
        judge.support(
            "Then copy the data with shutil.copyfileobj(f_in, f_out), which copies data from one "
            "file-like object to another.",
            segment,
        )
        == "full_support"
    )
    assert (
        judge.support(
            "Then copy the data with shutil.copy2(f_in, f_out), which copies data from one "
            "file-like object to another.",
            segment,
        )
        != "full_support"
    )


def test_every_proxy_judgment_is_cached(tmp_path, monkeypatch):
    cache = JudgeCache(tmp_path / "judgments.db")
    first = ProxyJudge(cache)
    want = labels(first, GOLD)
    support = first.support("gzip.open() opens a gzip-compressed file.", SEGMENT)
    assert first.stats.judged == 4 and first.stats.cached == 0 and cache.count() == 4

    import ragnarok.judge.proxy as proxy

    def no_model(*_args):  # a rerun must not encode anything
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(proxy, "cosines", no_model)
    again = ProxyJudge(cache)
    assert labels(again, GOLD) == want
    assert again.support("gzip.open() opens a gzip-compressed file.", SEGMENT) == support
    assert again.stats.cached == 4


def test_rules_on_the_surface():
    assert tr.specifics("Use gzip.open or bz2.open with ISO 8601 and %Y") >= {"gzip", "bz2", "8601", "%y"}
    assert tr.negations("it isn't; it cannot; never") == 3
    assert tr.antonym_clash("encode the text", "decode the text")
    assert not tr.antonym_clash("create it, then delete it yourself", "it creates one; you delete it")
    assert tr.wrong_name("use the logging module", "use the syslog module")
    assert tr.wrong_value("open with newline=''", "open with newline='\\r\\n'")
    assert tr.is_statement("Python's standard gzip package handles this task.")
    assert not tr.is_statement("argparse module ArgumentParser parse_args add_argument positional optional.")


def test_eval_rag_says_what_the_judge_is_and_is_not(tmp_path, monkeypatch):
    """Beside its scores, eval-rag says the judge is a proxy, not an LLM judge, and gives its agreement with
    people on topics it was not tuned on (with where that figure comes from) before judge-dev's, the set its
    rules were tuned on."""
    import json

    from typer.testing import CliRunner

    from ragnarok.cli.main import app
    from ragnarok.core.settings import get_settings
    from ragnarok.judge.agreement import measured

    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    run, nug = tmp_path / "run.jsonl", tmp_path / "n.jsonl"
    run.write_text(
        json.dumps(
            {
                "run_id": "r",
                "topic_id": "q",
                "topic": QUERY,
                "references": [],
                "answer": [{"text": GOLD, "citations": []}],
            }
        )
        + "\n"
    )
    nug.write_text(
        json.dumps({"qid": "q", "query": QUERY, "nuggets": [{"text": n, "importance": "vital"} for n in NUGGETS]})
        + "\n"
    )
    try:
        result = CliRunner().invoke(app, ["eval-rag", str(run), "--nuggets", str(nug)])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("judge proxy:"))
    assert "PROXY" in line and "not an LLM judge" in line and "--judge NAME" in line
    recorded = measured("proxy")
    unseen = f"on unseen topics {recorded['unseen']['kappa_nuggets']:g} (nugget labels)"
    of = f"for {recorded['unseen']['judge']} of {recorded['unseen']['when']}"
    cv = f"cross-validated by topic on judge-dev (held-out folds), {recorded['cv']['kappa_nuggets']:g}"
    assert unseen in line and of in line and recorded["unseen"]["source"] in line and cv in line
    assert line.index(unseen) < line.index(cv)
    assert "0.615" not in line  # an older version's figure is never printed


def test_recording_judge_dev_figures_keeps_the_unseen_ones(tmp_path, monkeypatch):
    import ragnarok.judge.agreement as agreement

    path = tmp_path / "measured.yaml"
    path.write_text(agreement.MEASURED.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(agreement, "MEASURED", path)
    before = agreement.measured("proxy")
    agreement.record("proxy", {"kappa_nuggets": 0.5, "kappa_support": 0.4, "when": "today", "set": "judge-dev"})
    after = agreement.measured("proxy")
    assert after["kappa_nuggets"] == 0.5 and after["unseen"] == before["unseen"] and after["is"] == before["is"]
