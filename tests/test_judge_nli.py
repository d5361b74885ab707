"""The proxy judge's NLI cross-encoder, wired on tiny 3-label checkpoints built here (no hub
access): it loads from a local directory, its labels flow through the judge, the label order comes from the
model's config (never assumed), its name is part of every cached judgment's key, and a model that is not here
is a clear error naming the setting, when the judge is made."""

from __future__ import annotations

import json

import pytest

from ragnarok.core.settings import Settings
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.nli import SETTING, NLIUnavailable, load_nli
from ragnarok.judge.service import make_judge

ORDERS = {
    "entail-first": {0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"},
    "contradict-first": {0: "contradiction", 1: "entailment", 2: "neutral"},
}
QUERY = "compress a file with gzip"
NUGGETS = ["use the gzip module", "gzip.open opens a file for compressed writing"]
ANSWER = "Use the gzip module to compress a file. The gzip.open function opens a file for compressed writing."
SEGMENT = "The gzip.open() function opens a gzip-compressed file in binary or text mode, returning a file object."
SENTENCE = "The gzip.open() function opens a compressed file and returns a file object."


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two tiny NLI cross-encoders with the same weights, which always put output 0 first (by far), and
    ``id2label`` orders that name output 0 entailment in one and contradiction in the other."""
    import torch
    from transformers import BertForSequenceClassification

    from ragnarok.stages.rerank.tiny import build_tiny_cross_encoder

    root = tmp_path_factory.mktemp("nli")
    out = {}
    for name, id2label in ORDERS.items():
        path = build_tiny_cross_encoder(root / name, id2label=id2label)
        model = BertForSequenceClassification.from_pretrained(path)
        with torch.no_grad():
            model.classifier.weight.zero_()
            model.classifier.bias.copy_(torch.tensor([8.0, 0.0, 0.0]))
        model.save_pretrained(path)
        out[name] = str(path)
    return out


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_the_label_order_comes_from_the_config(models):
    entail, contradict = load_nli(models["entail-first"]).entails([SEGMENT, SEGMENT], [SENTENCE, "x"])
    assert entail.min() > 0.99 and contradict.max() < 0.01
    entail, contradict = load_nli(models["contradict-first"]).entails([SEGMENT], [SENTENCE])
    assert entail.max() < 0.01 and contradict.min() > 0.99


def test_the_judges_labels_come_from_the_model(models, tmp_path):
    cache = JudgeCache(tmp_path / "judgments.db")
    yes = make_judge(Settings(data_dir=tmp_path, judge_nli_model=models["entail-first"]), None, cache=cache)
    assert "NLI" in yes.describe() and yes.nli is not None
    from ragnarok.judge.agreement import measured_line  # eval-rag's line claims no measured agreement for it

    assert "never measured" in measured_line(yes.name, yes.nli.name)
    assert yes.assign(QUERY, ANSWER, NUGGETS) == ["support", "support"]
    assert yes.support(SENTENCE, SEGMENT) == "full_support"
    # a sentence that states nothing earns no support, whatever the model says
    assert (
        yes.support("Whether gzip.open opens a compressed file is a question people often ask.", SEGMENT)
        == "no_support"
    )
    no = make_judge(Settings(data_dir=tmp_path, judge_nli_model=models["contradict-first"]), None, cache=cache)
    assert no.assign(QUERY, ANSWER, NUGGETS) == ["not_support", "not_support"]
    assert no.support(SENTENCE, SEGMENT) == "no_support"


def test_the_cache_key_names_the_model(models, tmp_path):
    cache = JudgeCache(tmp_path / "judgments.db")
    rules = make_judge(Settings(data_dir=tmp_path), None, cache=cache)
    assert rules.nli is None and "NLI" not in rules.describe()
    assert rules.assign(QUERY, ANSWER, NUGGETS) == ["support", "support"]
    nli = make_judge(Settings(data_dir=tmp_path, judge_nli_model=models["contradict-first"]), None, cache=cache)
    assert nli.assign(QUERY, ANSWER, NUGGETS) == ["not_support", "not_support"]  # not the rules' cached labels
    assert nli.stats.cached == 0 and cache.count() == 4


def test_a_model_that_is_not_here_is_a_clear_error(models, tmp_path):
    with pytest.raises(NLIUnavailable, match=f"{SETTING}.*not-a-real/nli-model.*Hugging Face cache"):
        make_judge(Settings(data_dir=tmp_path, judge_nli_model="not-a-real/nli-model"), None)
    with pytest.raises(NLIUnavailable, match=f"{SETTING}.*no model directory"):
        make_judge(Settings(data_dir=tmp_path, judge_nli_model=str(tmp_path / "missing")), None)
    from ragnarok.stages.rerank.tiny import build_tiny_cross_encoder

    single = build_tiny_cross_encoder(tmp_path / "relevance")  # a reranker's one label: no entailment label
    with pytest.raises(NLIUnavailable, match=f"{SETTING}.*id2label"):
        make_judge(Settings(data_dir=tmp_path, judge_nli_model=str(single)), None)


def test_eval_rag_refuses_a_missing_model_at_start(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from ragnarok.cli.main import app
    from ragnarok.core.settings import get_settings

    monkeypatch.setenv("RAGNAROK_JUDGE_NLI_MODEL", "not-a-real/nli-model")
    run, nuggets = tmp_path / "run.jsonl", tmp_path / "n.jsonl"
    run.write_text(
        json.dumps(
            {
                "run_id": "r",
                "topic_id": "q",
                "topic": QUERY,
                "references": [],
                "answer": [{"text": ANSWER, "citations": []}],
            }
        )
        + "\n"
    )
    nuggets.write_text(
        json.dumps({"qid": "q", "query": QUERY, "nuggets": [{"text": n, "importance": "vital"} for n in NUGGETS]})
        + "\n"
    )
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["eval-rag", str(run), "--nuggets", str(nuggets)])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2, result.output
    assert f"error: {SETTING}" in result.output and "Traceback" not in result.output
