"""``ragnarok.Experiment`` and ``ragnarok compare``: several pipelines on the demo's real index, their
per-topic figures equal to ``ragnarok eval``'s and ``eval-rag``'s, p-values equal to scipy's, corrections equal to
statsmodels', a RAG experiment whose second run makes no judge call (the scripted LLM judge), a generator that
fails on one topic (a local OpenAI-compatible server), bad input named, DataFrames from the Python API."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from judge_server import judge_app
from scipy import stats
from servers import serve_app
from statsmodels.stats.multitest import multipletests
from typer.testing import CliRunner

import ragnarok
from ragnarok.api import measure
from ragnarok.cli.main import app
from ragnarok.core.evaluation import per_query, read_qrels
from ragnarok.core.settings import get_settings
from ragnarok.core.topic_sets import qrels_path
from ragnarok.core.trec import write_run
from ragnarok.experiment.significance import compare, correct
from ragnarok.stages.generate.base import GeneratorConfig

RANKINGS = ["bm25@100", "bm25+rm3@100", "rrf(bm25, bm25+rocchio)@100"]
FEW = {
    "demo-01": "how do I parse command-line arguments",
    "demo-02": "compress a file with gzip",
    "demo-03": "read and write CSV files",
    "demo-04": "run a shell command and capture its output",
}


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p_values_and_corrections_equal_scipy_and_statsmodels(seed):
    rng = np.random.default_rng(seed)
    base = rng.random(30)
    runs = [base + rng.normal(shift, 0.1, 30) for shift in (0.0, 0.02, 0.05, -0.03)]
    for x in runs:
        assert compare(x, base, "t").p_value == pytest.approx(stats.ttest_rel(x, base).pvalue, rel=1e-12)
        assert compare(x, base, "wilcoxon").p_value == pytest.approx(stats.wilcoxon(x, base).pvalue, rel=1e-12)
    p = [compare(x, base).p_value for x in runs]
    for method in ("holm", "bonferroni"):
        assert correct(p, method) == pytest.approx(list(multipletests(p, method=method)[1]), rel=1e-12)
    got = compare([1, 2, 3, 3], [1, 1, 4, 3])
    assert (got.wins, got.ties, got.losses) == (1, 2, 1)
    assert compare([0.5, 0.2], [0.5, 0.2]).p_value == 1.0  # nothing differs: scipy's nan is 1 here


@pytest.fixture(scope="module")
def demo_runs(demo_settings, tmp_path_factory):
    """Each ranking pipeline's run on the demo topics, written as `ragnarok search` writes it."""
    out = tmp_path_factory.mktemp("runs")
    runs = {spec: ragnarok.search("demo", pipeline=spec, settings=demo_settings) for spec in RANKINGS}
    for n, run in enumerate(runs.values()):
        write_run(out / f"run{n}.txt", run, f"run{n}")
    return runs, out


def test_means_and_per_topic_figures_equal_ragnarok_eval(demo_settings, demo_data_env, demo_runs):
    runs, out = demo_runs
    frame = ragnarok.Experiment(RANKINGS, "demo", qrels="demo", baseline=0, correction="holm", settings=demo_settings)
    assert list(frame["name"]) == RANKINGS and set(frame["topics"]) == {50} and set(frame["missing"]) == {0}
    table = invoke("eval", "demo", *(out / f"run{n}.txt" for n in range(3)))
    assert table.exit_code == 0, table.output
    for n, line in enumerate(table.output.splitlines()[1:]):
        means = [float(v) for v in line.split()[1:]]
        assert [round(frame.loc[n, m], 4) for m in ("nDCG@10", "MAP@100", "Recall@100", "MAP")] == means
    qrels = read_qrels(qrels_path("demo", demo_settings))
    detail = ragnarok.Experiment(RANKINGS, "demo", qrels="demo", perquery=True, settings=demo_settings)
    assert list(detail.columns) == ["name", "qid", "measure", "value"] and len(detail) == 3 * 50 * 4
    for spec, run in runs.items():
        expected = per_query(qrels, run)
        rows = detail[(detail["name"] == spec) & (detail["measure"] == "nDCG@10")]
        assert dict(zip(rows["qid"], rows["value"])) == {q: v["nDCG@10"] for q, v in expected.items()}
    # the baseline's columns are empty; the others' p-values are scipy's on these arrays
    base = detail[(detail["name"] == RANKINGS[0]) & (detail["measure"] == "MAP")]["value"].to_numpy()
    other = detail[(detail["name"] == RANKINGS[1]) & (detail["measure"] == "MAP")]["value"].to_numpy()
    assert frame.loc[1, "MAP p-value"] == pytest.approx(stats.ttest_rel(other, base).pvalue)
    raw = [frame.loc[i, "MAP p-value"] for i in (1, 2)]
    assert [frame.loc[i, "MAP p-value corrected"] for i in (1, 2)] == pytest.approx(
        list(multipletests(raw, method="holm")[1])
    )
    assert math.isnan(frame.loc[0, "MAP p-value"])
    wins, ties, losses = (int(frame.loc[1, f"MAP {s}"]) for s in "+=-")
    assert wins + ties + losses == 50 and wins == int((other > base).sum())


def test_run_files_results_in_hand_and_specs_give_the_same_row(demo_settings, demo_runs):
    runs, out = demo_runs
    frame = ragnarok.Experiment(
        [RANKINGS[0], out / "run0.txt", runs[RANKINGS[0]]],
        "demo",
        qrels="demo",
        names=["spec", "file", "dict"],
        settings=demo_settings,
    )
    values = frame[["nDCG@10", "MAP", "Recall@100"]].to_numpy()
    assert np.allclose(values[0], values[1], atol=1e-6) and np.allclose(values[0], values[2])


def test_a_run_file_missing_topics_scores_them_0_and_says_how_many(demo_settings, demo_runs, tmp_path):
    runs, _ = demo_runs
    partial = {q: hits for n, (q, hits) in enumerate(runs[RANKINGS[0]].items()) if n % 2 == 0}
    write_run(tmp_path / "half.txt", partial, "half")
    frame = ragnarok.Experiment([RANKINGS[0], tmp_path / "half.txt"], "demo", qrels="demo", settings=demo_settings)
    assert list(frame["missing"]) == [0, 25]
    full = per_query(read_qrels(qrels_path("demo", demo_settings)), partial)
    assert frame.loc[1, "MAP"] == pytest.approx(sum(v["MAP"] for v in full.values()) / 50)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"metrics": ["ndcg@10"]}, "unknown metric 'ndcg@10'; did you mean 'nDCG@10'?"),
        ({"metrics": ["vital"]}, "unknown metric 'vital'"),
        ({"baseline": 3}, "baseline 3 is out of range: 1 pipelines, numbered 0 to 0"),
        ({"baseline": "bm25"}, "baseline 'bm25' is not one of the pipelines"),
        ({"test": "z"}, "unknown test 'z'"),
        ({"correction": "fdr"}, "unknown correction 'fdr'"),
        ({"topics": "rag24"}, "share no topic: a different topic set?"),
        ({"names": ["a", "b"]}, "2 names for 1 pipelines"),
        ({"pipelines": ["bm25@10", "bm25@10"]}, "two pipelines are named 'bm25@10'"),
        ({"pipelines": ["bm25@10 | extractiv"]}, "did you mean 'extractive'?"),
        ({"pipelines": ["runs/absent.txt"]}, "absent.txt: no such run file"),
        ({"pipelines": [42]}, "pipeline 0 is not a pipeline: give a spec, a Pipeline, a run file or a run (got int)"),
        ({"qrels": None}, "give qrels"),
    ],
)
def test_bad_input_is_one_clear_error(demo_settings, options, message):
    args = {"pipelines": ["bm25@10"], "topics": "demo", "qrels": "demo", **options}
    with pytest.raises(Exception) as caught:
        ragnarok.Experiment(args.pop("pipelines"), args.pop("topics"), settings=demo_settings, **args)
    assert message in str(caught.value)
    assert isinstance(caught.value, (ValueError, LookupError))


def test_a_run_of_another_topic_set_is_refused(demo_settings, tmp_path):
    write_run(tmp_path / "other.txt", {"2024-1": {"d": 1.0}}, "other")
    with pytest.raises(ValueError, match="has results for none of the experiment's 50 topics"):
        ragnarok.Experiment([tmp_path / "other.txt"], "demo", qrels="demo", settings=demo_settings)


def failing_generator() -> FastAPI:
    """An OpenAI-compatible server that answers every topic but gzip's (500 there)."""
    server = FastAPI()

    @server.get("/healthz")
    def healthz() -> dict:
        return {}

    @server.post("/v1/chat/completions")
    async def chat(request: Request):
        if FEW["demo-02"] in json.dumps((await request.json())["messages"]):
            return JSONResponse({"error": {"message": "the model crashed"}}, status_code=500)
        return {
            "choices": [
                {"message": {"role": "assistant", "content": "Use the library module [0]."}, "finish_reason": "stop"}
            ]
        }

    return server


@pytest.fixture(scope="module")
def rag(demo_settings, tmp_path_factory):
    """Settings on the demo index with the scripted judge and a generator that fails on one topic, and the
    judge server (it counts its calls)."""
    judge = judge_app()
    with serve_app(judge) as judge_base, serve_app(failing_generator()) as generator_base:
        generators = [
            GeneratorConfig(
                name="scripted",
                backend="openai",
                base_url=judge_base + "/v1",
                model="scripted",
                timeout_s=5,
                max_retries=0,
            ),
            GeneratorConfig(
                name="failing", backend="openai", base_url=generator_base + "/v1", model="m", timeout_s=5, max_retries=0
            ),
        ]
        data = tmp_path_factory.mktemp("rag-data")  # a judgment cache of its own, the demo's index
        (data / "indexes").symlink_to(demo_settings.data_dir / "indexes")
        yield (
            demo_settings.model_copy(
                update={"generators": generators, "data_dir": data, "topic_retries": 0, "topic_backoff_s": 0.0}
            ),
            judge,
        )


def test_a_rag_experiment_reports_a_failing_topic_and_equals_eval_rag(rag, tmp_path, monkeypatch):
    settings, _ = rag
    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RAGNAROK_GENERATORS", json.dumps([g.model_dump() for g in settings.generators]))
    get_settings.cache_clear()
    pipelines = ["bm25@20 | extractive", "bm25@20 | failing"]
    measured = measure(
        pipelines,
        FEW,
        nuggets="demo",
        baseline=0,
        metrics=["all", "vital", "strict_all", "response_length"],
        settings=settings,
    )
    frame = measured.means()
    assert list(frame["missing"]) == [0, 1] and list(frame["topics"]) == [4, 4]
    assert list(frame.attrs["failures"]) == ["bm25@20 | failing"]
    assert list(frame.attrs["failures"]["bm25@20 | failing"]) == ["demo-02"]
    assert "500" in frame.attrs["failures"]["bm25@20 | failing"]["demo-02"]
    detail = measured.perquery()
    lengths = detail[(detail["name"] == pipelines[1]) & (detail["measure"] == "response_length")]
    assert dict(zip(lengths["qid"], lengths["value"])) == {
        "demo-01": 4.0,
        "demo-02": 0.0,
        "demo-03": 4.0,
        "demo-04": 4.0,
    }  # "Use the library module."
    # the same answers through eval-rag: the same per-topic scores
    answers = ragnarok.run(FEW, pipeline=pipelines[0], settings=settings)
    path = tmp_path / "run.jsonl"
    path.write_text("".join(a.model_dump_json() + "\n" for a in answers.values()))
    assigned = tmp_path / "assigned.jsonl"
    result = invoke("eval-rag", path, "--nuggets", "demo", "--assignments", assigned)  # the proxy judge
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    eval_rag = {r["qid"]: r["scores"] for r in map(json.loads, assigned.read_text().splitlines())}
    assert any(s["all"] > 0 for s in eval_rag.values())
    for metric in ("all", "vital", "strict_all"):
        rows = detail[(detail["name"] == pipelines[0]) & (detail["measure"] == metric)]
        assert dict(zip(rows["qid"], rows["value"])) == pytest.approx({q: s[metric] for q, s in eval_rag.items()})


def test_a_second_rag_experiment_makes_no_judge_call(rag, tmp_path):
    settings, judge = rag
    settings = settings.model_copy(update={"data_dir": tmp_path})  # an empty judgment cache
    (tmp_path / "indexes").symlink_to(rag[0].data_dir / "indexes")
    answers = ragnarok.run(FEW, pipeline="bm25@20 | extractive", settings=settings)
    before = judge.state.calls
    first = measure([answers], FEW, nuggets="demo", judge="scripted", settings=settings)
    made = judge.state.calls - before
    second = measure([answers], FEW, nuggets="demo", judge="scripted", settings=settings)
    assert made == 4 and judge.state.calls - before == made  # one assignment call per topic, then none
    assert first.scores == second.scores


def test_compare_prints_a_table_that_fits_and_marks_significance(demo_data_env, tmp_path):
    saved = tmp_path / "experiment.json"
    result = invoke(
        "compare",
        *RANKINGS,
        "--topics",
        "demo",
        "--qrels",
        "demo",
        "--baseline",
        "0",
        "--correction",
        "holm",
        "--save",
        saved,
        "--csv",
        tmp_path / "means.csv",
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert all(len(line) <= 100 for line in lines[:-2]), result.output
    assert "*" in result.output and "Holm-corrected for 2 comparisons" in result.output
    assert "+w/-l" in lines[-1]
    rows = json.loads(saved.read_text())
    assert len(rows) == 3 * 50 * 4 and set(rows[0]) == {"name", "qid", "measure", "value"}
    assert (tmp_path / "means.csv").read_text().splitlines()[0].startswith("name,nDCG@10,MAP@100")
    enveloped = invoke(
        "compare", *RANKINGS[:2], "--topics", "demo", "--qrels", "demo", "--baseline", "0", "--output", "json"
    )
    envelope = json.loads(enveloped.stdout, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert envelope["ok"] and envelope["result"][0]["name"] == RANKINGS[0]
    assert envelope["result"][0]["MAP p-value"] is None and envelope["result"][1]["MAP p-value"] > 0
    bad = invoke("compare", "bm25", "--topics", "demo", "--qrels", "demo", "--metric", "ndcg@10")
    assert bad.exit_code == 2 and "did you mean 'nDCG@10'?" in bad.output


def test_results_come_as_dataframes(demo_settings):
    ranking = ragnarok.search(FEW, pipeline="bm25@5", settings=demo_settings).to_pandas()
    assert list(ranking.columns) == ["qid", "docid", "rank", "score"] and len(ranking) == 20
    assert ranking.groupby("qid")["rank"].apply(list).to_dict()["demo-01"] == [1, 2, 3, 4, 5]
    answers = ragnarok.run(FEW, pipeline="bm25@20 | extractive", settings=demo_settings)
    sentences = answers.to_pandas()
    assert list(sentences.columns) == ["qid", "topic", "sentence", "text", "citations", "cited"]
    first = sentences.iloc[0]
    assert first["cited"] == [answers["demo-01"].references[c] for c in first["citations"]]
    topics = ragnarok.load_topics("demo", demo_settings).to_pandas()
    assert topics.shape == (50, 2) and topics.loc[0, "qid"] == "demo-01"
    qrels = ragnarok.load_qrels("demo", demo_settings).to_pandas()
    assert list(qrels.columns) == ["qid", "docid", "grade"] and len(qrels) > 50


def test_view_shows_where_the_pipelines_differ_most(demo_data_env, tmp_path):
    saved = tmp_path / "experiment.json"
    result = invoke("compare", *RANKINGS[:2], "--topics", "demo", "--qrels", "demo", "--save", saved)
    assert result.exit_code == 0, result.output
    shown = invoke("view", "--experiment", saved, "--metric", "MAP")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith("MAP: the 20 of 50 topics where bm25@100 and the others differ most")
    rows = json.loads(saved.read_text())
    ap = {(r["name"], r["qid"]): r["value"] for r in rows if r["measure"] == "MAP"}
    gaps = sorted((abs(ap[(RANKINGS[1], q)] - ap[(RANKINGS[0], q)]), q) for _, q in ap if _ == RANKINGS[0])
    assert lines[2].split()[0] == gaps[-1][1]  # the largest difference first
    assert lines[-1].split()[-1] == f"{sum(v for (n, _), v in ap.items() if n == RANKINGS[1]) / 50:.4f}"
    csv = tmp_path / "experiment.csv"
    import pandas as pd  # noqa: PLC0415

    pd.DataFrame(rows).to_csv(csv, index=False)
    few = invoke("view", "--experiment", csv, "--topics", "demo-01,demo-02")
    assert few.exit_code == 0 and "the 2 of 2 topics" in few.output, few.output
    for args, message in [
        (["--metric", "P@5"], "metric 'P@5' is not in the experiment"),
        (["--topics", "nope"], "none of the topics 'nope'"),
    ]:
        bad = invoke("view", "--experiment", saved, *args)
        assert bad.exit_code == 2 and message in bad.output, bad.output
    (tmp_path / "run.json").write_text('[{"a": 1}]')
    bad = invoke("view", "--experiment", tmp_path / "run.json")
    assert bad.exit_code == 2 and "not an experiment's per-topic scores" in bad.output
