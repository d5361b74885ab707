"""Topic sets and qrels by name (demo, rag24, rag25, ...) wherever a topics or qrels file is taken, with
did-you-mean; the project's own topics inside the package (the wheel carries them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragnarok.cli.main import app
from ragnarok.core.settings import Settings, get_settings
from ragnarok.core.topic_sets import UnknownTopicSetError, qrels_path, resolve_topics, set_names, topics_path

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def track(shared_data, monkeypatch) -> Settings:
    """Settings whose RAGNAROK_TOPICS_DIR is the shared track data, wherever ../shared is."""
    monkeypatch.setenv("RAGNAROK_TOPICS_DIR", str(shared_data / "trec-rag"))
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_names_and_aliases_resolve_to_the_track_files(track, shared_data):
    assert topics_path("rag24", track) == shared_data / "trec-rag" / "topics.rag24.test.txt"
    assert len(resolve_topics("rag24", track)) == 301
    assert len(resolve_topics("rag25", track)) == len(resolve_topics("rag25.test", track)) == 105
    assert len(resolve_topics("rag24.raggy-dev", track)) == 120
    assert [t.qid for t in resolve_topics("demo", track)][:2] == ["demo-01", "demo-02"]
    assert qrels_path("rag24", track) == shared_data / "trec-rag" / "qrels.rag24.test.txt"
    assert qrels_path("demo", track).read_bytes() == (ROOT / "topics" / "qrels.demo.txt").read_bytes()
    assert {"demo", "rag24", "rag24.test", "rag25", "rag24.researchy-dev"} <= set(set_names(track))


def test_the_project_topics_live_in_the_package_and_topics_links_there():
    from ragnarok.core.topic_sets import PACKAGE_TOPICS

    assert PACKAGE_TOPICS.parent.parent == ROOT / "ragnarok"
    assert (PACKAGE_TOPICS / "demo.tsv").is_file() and (PACKAGE_TOPICS / "eval" / "demo.nuggets.jsonl").is_file()
    assert (ROOT / "topics").resolve() == PACKAGE_TOPICS  # every old path (topics/demo.tsv, ...) still works


def test_a_fetched_set_and_a_topics_dir_are_found(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "topics.week1.txt").write_text("w1\twhat is a week\n")
    (mine / "qrels.week1.txt").write_text("w1 0 doc1 2\n")
    settings = Settings(data_dir=tmp_path / "data", topics_dir=mine)
    assert resolve_topics("week1", settings)[0].text == "what is a week"
    assert qrels_path("week1", settings) == mine / "qrels.week1.txt"
    (tmp_path / "data" / "topics").mkdir(parents=True)
    (tmp_path / "data" / "topics" / "topics.week1.txt").write_text("f1\tfetched first\n")
    assert resolve_topics("week1", settings)[0].qid == "f1"  # the fetched copy comes before the topics dir


def test_unknown_names_suggest_the_closest(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", topics_dir=tmp_path / "none")
    with pytest.raises(UnknownTopicSetError, match=r"unknown topic set or file 'dem'.*did you mean 'demo'\?"):
        resolve_topics("dem", settings)
    with pytest.raises(UnknownTopicSetError, match="fetch it with `ragnarok topics fetch rag24.test`"):
        resolve_topics("rag24", settings)  # an alias of a set that is not here: how to get it
    with pytest.raises(FileNotFoundError, match=r"unknown qrels set or file 'dmeo'.*did you mean 'demo'\?"):
        qrels_path("dmeo", settings)


def test_the_cli_takes_set_names_for_topics_and_qrels(track, tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("demo-01 Q0 stdlib.gzip#0_0 1 9.0 r\n")
    out = invoke("eval", "demo", run)  # qrels by name
    assert out.exit_code == 0, out.output
    assert "covers 1 of the 50 topics of qrels.demo.txt" in out.output
    out = invoke("eval", "rag2", run)
    assert out.exit_code == 2 and out.output.startswith("error: unknown qrels set or file 'rag2'"), out.output
    assert "did you mean" in out.output
    out = invoke("search", "--topics", "rag24.tset", "--output", tmp_path / "x.txt")
    assert out.exit_code == 2 and "did you mean 'rag24.test'?" in out.output, out.output
    listed = invoke("topics", "list").output
    assert "rag24.test\tavailable (also rag24)" in listed and "rag25.test\tavailable (also rag25)" in listed
    answers = tmp_path / "answers.jsonl"
    answers.write_text("")
    out = invoke("validate", answers, "--topics", "rag25")  # resolved: the empty run is what fails
    assert "unknown topic set" not in out.output and out.exit_code != 0, out.output


def test_an_optimize_config_takes_set_names(tmp_path):
    from ragnarok.optimize.config import load_config
    from ragnarok.optimize.objective import Evaluator
    from ragnarok.optimize.space import build_space

    path = tmp_path / "search.yaml"
    path.write_text(
        "index: demo\ntopics: demo\nqrels: demo\nnuggets: demo\nobjective: nDCG@10\nbudget: {trials: 1}\n"
        "nodes:\n  - node: lexical\n    modules:\n      - {module: bm25}\n",
        encoding="utf-8",
    )
    config, located = load_config(path)
    settings = Settings(data_dir=tmp_path / "data")
    evaluator = Evaluator(config, build_space(config, located, settings), settings)
    try:
        assert len(evaluator.topics) == 50 and len(evaluator.judged) == 50 and "demo-01" in evaluator.nuggets
    finally:
        evaluator.close()


def test_eval_rag_takes_a_nugget_set_name(tmp_path):
    """``eval-rag --nuggets demo`` scores as the demo's nugget file does; an unknown name is one line, exit 2."""
    import json  # noqa: PLC0415

    answers = tmp_path / "a.jsonl"
    answers.write_text(
        json.dumps(
            {
                "run_id": "r",
                "topic_id": "demo-01",
                "topic": "how do I parse command-line arguments",
                "references": [],
                "answer": [{"text": "Use the argparse module.", "citations": []}],
            }
        )
        + "\n"
    )
    by_name = invoke("eval-rag", answers, "--nuggets", "demo", "--output", "json")
    by_file = invoke(
        "eval-rag", answers, "--nuggets", ROOT / "topics" / "eval" / "demo.nuggets.jsonl", "--output", "json"
    )
    assert by_name.exit_code == by_file.exit_code == 0, (by_name.stderr, by_file.stderr)
    assert json.loads(by_name.stdout)["result"] == json.loads(by_file.stdout)["result"]
    assert json.loads(by_name.stdout)["result"]  # scored something
    typo = invoke("eval-rag", answers, "--nuggets", "dmeo")
    assert typo.exit_code == 2 and "did you mean 'demo'" in typo.stderr and typo.stderr.count("\n") == 1
