"""``ragnarok optimize``: config errors with file:line, the space's specs, and real searches on the demo index
(Lucene, in subprocesses like a user's shell): held-out scores, the preset, two workers on one SQLite and one
PostgreSQL study, a killed worker resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragnarok.core.settings import Settings
from ragnarok.optimize.config import ConfigError, load_config
from ragnarok.optimize.space import build_space

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ROOT / "topics" / "demo.tsv"
QRELS = ROOT / "topics" / "qrels.demo.txt"


def write(tmp_path: Path, body: str, name: str = "search.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def header(index: str = "demo", extra: str = "") -> str:
    return f"index: {index}\ntopics: {TOPICS}\nqrels: {QRELS}\nobjective: nDCG@10\nbudget: {{trials: 3}}\n{extra}"


LEXICAL = """nodes:
  - node: lexical
    modules:
      - {module: bm25, k1: [0.9, 1.2]}
      - {module: bm25+rocchio, terms: 10}
  - node: retrieval
    modules:
      - {module: lexical, depth: 20}
"""


def test_space_makes_specs(tmp_path):
    config, located = load_config(write(tmp_path, header() + LEXICAL))
    space = build_space(config, located, Settings(data_dir=tmp_path))
    assert [c.label for c in space.node("lexical").candidates] == ["bm25", "bm25:k1_1.2", "bm25+rocchio"]
    assert space.spec({"lexical": "bm25:k1_1.2"}) == "bm25:k1_1.2@20"
    assert space.size() == 3


def test_fused_spec_with_weights_and_generation_k(tmp_path):
    body = (
        header()
        + """nodes:
  - node: lexical
    modules: [{module: bm25+rm3, weight: 0.6}]
  - node: semantic
    modules: [{module: dense, model: minilm}]
  - node: retrieval
    modules: [{module: cc, weight: 0.3, depth: 1000}]
  - node: passage
    modules: [{module: compress, arg: 0.5, depth: 20}]
  - node: generator
    modules: [{module: extractive, k: 5}]
"""
    )
    config, located = load_config(write(tmp_path, body))
    space = build_space(config, located, Settings(data_dir=tmp_path))
    assert space.spec({}) == "cc(bm25+rm3:weight_0.6=0.3, dense:minilm=0.7)@1000 | compress:0.5@5 | extractive"


@pytest.mark.parametrize(
    "body, line, words",
    [
        (LEXICAL.replace("module: bm25, k1", "module: bm99, k1"), 9, ["unknown module 'bm99'", "bm25+rocchio"]),
        (LEXICAL.replace("terms: 10", "trems: 10"), 10, ["unknown parameter 'trems'", "terms"]),
        (LEXICAL.replace("k1: [0.9, 1.2]", "k1: [0.9, 99]"), 9, ["k1", "99"]),
        (LEXICAL.replace("node: retrieval", "node: retreival"), 11, ["unknown node 'retreival'"]),
        ("nodes: []\n", 6, ["search space is empty"]),
        (LEXICAL + "bogus: 1\n", 14, ["unknown key 'bogus'"]),
    ],
)
def test_config_errors_name_file_line_and_token(tmp_path, body, line, words):
    path = write(tmp_path, header() + body)
    with pytest.raises(ConfigError) as caught:
        config, located = load_config(path)
        build_space(config, located, Settings(data_dir=tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert "\n" not in message
    for word in words:
        assert word in message


def test_toml_config_errors_name_the_line(tmp_path):
    path = write(
        tmp_path,
        f'index = "demo"\ntopics = "{TOPICS}"\nqrels = "{QRELS}"\n\n[budget]\ntrials = 0\n\n'
        '[[nodes]]\nnode = "lexical"\nmodules = [{module = "bm25"}]\n',
        "search.toml",
    )
    with pytest.raises(ConfigError, match=rf"^{path}:5: the budget is 0"):
        load_config(path)


def optimize(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "optimize", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def test_cli_bad_input_is_one_line_and_non_zero(tmp_path):
    unjudged = tmp_path / "other.qrels"
    unjudged.write_text("nope 0 doc 1\n", encoding="utf-8")
    path = write(tmp_path, header(str(tmp_path / "no-index")).replace(str(QRELS), str(unjudged)) + LEXICAL)
    done = optimize(str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: 0 of the 50 topics"), done.stderr
    done = optimize(str(write(tmp_path, header() + LEXICAL, "ok.yaml")), "--trials", "0")
    assert (
        done.returncode == 2 and done.stderr.strip() == "error: the budget is 0: --trials and --seconds must be above 0"
    )


def _study(url: str, name: str):
    import optuna

    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    from ragnarok.optimize.study import quiet

    quiet()
    return optuna.load_study(study_name=name, storage=url)


@pytest.fixture
def demo_index(demo_settings) -> str:
    return str(demo_settings.demo_index_dir)


@pytest.mark.slow
def test_search_scores_held_out_topics_and_saves_a_preset(tmp_path, demo_index):
    path = write(tmp_path, header(demo_index, "strategy: greedy\npreset: tuned-demo\n") + LEXICAL)
    done = optimize(str(path), "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    best = done.stdout.strip().splitlines()[-1]
    assert best in {"bm25@20", "bm25:k1_1.2@20", "bm25+rocchio@20"}
    assert "held-out nDCG@10" in done.stdout and "(25 topics)" in done.stdout  # 50 judged topics, half held out
    from ragnarok.core.presets import saved_presets

    assert saved_presets(Path(os.environ["RAGNAROK_DATA_DIR"])) == {"tuned-demo": best}
    report = (tmp_path / "out" / "report.greedy.md").read_text()  # one report per strategy
    assert "## Held-out scores" in report and best in report
    assert (tmp_path / "out" / "report.greedy.html").exists()
    trials = _study(f"sqlite:///{tmp_path / 'out' / 'study.db'}", "search.greedy.seed0").get_trials()
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    # the preset runs where a spec does: `ragnarok search --pipeline NAME`
    run = tmp_path / "run.txt"
    searched = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragnarok.cli",
            "search",
            "--topics",
            str(TOPICS),
            "--index",
            demo_index,
            "--pipeline",
            "tuned-demo",
            "--output",
            str(run),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert searched.returncode == 0, searched.stderr
    assert len(run.read_text().splitlines()) == 50 * 20


def _two_workers(tmp_path: Path, demo_index: str, url: str, strategy: str, trials: int) -> list:
    path = write(
        tmp_path,
        header(demo_index, f"strategy: {strategy}\nstudy: shared\n")
        + LEXICAL.replace("- {module: bm25+rocchio, terms: 10}", "- {module: bm25+rocchio, terms: [10, 20]}"),
    )
    args = [str(path), "--worker", "--storage", url, "--trials", str(trials)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ragnarok.cli", "optimize", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    return _study(url, f"shared.{strategy}.seed0").get_trials()


def _check_no_duplicates(all_trials: list, n: int) -> None:
    done = [t for t in all_trials if t.state.name == "COMPLETE"]
    assert len(done) == n, [(t.number, t.state.name, t.user_attrs) for t in all_trials]
    specs = [t.user_attrs["spec"] for t in done]
    assert len(set(specs)) == n, specs  # no pipeline run twice
    assert len({t.number for t in done}) == n
    assert len({t.user_attrs["worker"] for t in done}) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["greedy", "grid"])
def test_two_workers_share_a_sqlite_study(tmp_path, demo_index, strategy):
    trials = _two_workers(tmp_path, demo_index, f"sqlite:///{tmp_path / 'shared.db'}", strategy, 4)
    _check_no_duplicates(trials, 4)


@pytest.mark.slow
def test_two_workers_share_a_postgres_study(tmp_path, demo_index, postgres_url):
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)  # as a user writes it
    trials = _two_workers(tmp_path, demo_index, plain, "greedy", 4)
    _check_no_duplicates(trials, 4)


@pytest.mark.slow
def test_a_killed_search_resumes(tmp_path, demo_index):
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    path = write(tmp_path, header(demo_index, "strategy: grid\nstudy: resume\nconcurrency: 1\n") + LEXICAL)
    env = {"RAGNAROK_OPTIMIZE_HEARTBEAT_S": "1"}
    args = [sys.executable, "-m", "ragnarok.cli", "optimize", str(path), "--worker", "--storage", url]
    first = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    running = False
    while time.monotonic() < deadline and first.poll() is None and not running:
        time.sleep(0.2)
        if not (tmp_path / "resume.db").exists():
            continue
        try:
            running = any(t.state.name == "RUNNING" for t in _study(url, "resume.grid.seed0").get_trials())
        except Exception:  # noqa: BLE001 - the worker is still creating the tables or the study
            continue
    assert running, "the first worker never claimed a trial"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    time.sleep(4)  # past the heartbeat's grace period (3 intervals)
    done = subprocess.run(args, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    trials = _study(url, "resume.grid.seed0").get_trials()
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert sorted(t.user_attrs["spec"] for t in complete) == ["bm25+rocchio@20", "bm25:k1_1.2@20", "bm25@20"], [
        (t.number, t.state.name, t.user_attrs) for t in trials
    ]
    assert any(t.state.name == "FAIL" for t in trials)  # the killed trial, failed by its stopped heartbeat


@pytest.mark.slow
def test_stage_cache_serves_repeated_and_shallower_retrievals(tmp_path, demo_index):
    from ragnarok.optimize.objective import Evaluator

    nuggets = ROOT / "topics" / "eval" / "demo.nuggets.jsonl"
    body = (
        header(demo_index, f"nuggets: {nuggets}\n").replace("objective: nDCG@10", "objective: all")
        + LEXICAL
        + "  - node: generator\n    modules: [{module: extractive, k: 5}]\n"
    )
    config, located = load_config(write(tmp_path, body))
    settings = Settings(data_dir=tmp_path / "data")
    evaluator = Evaluator(config, build_space(config, located, settings), settings)
    try:
        qids = evaluator.judged[:4]
        spec = "bm25@20 | cutoff:0@5 | extractive"
        first = evaluator.score(spec, qids)
        misses = evaluator.cache.misses
        assert 0 <= first.value <= 1 and set(first.per_topic) == set(qids)
        assert set(first.node_metrics) == {"lexical", "retrieval", "generator"}
        assert evaluator.score(spec, qids).per_topic == first.per_topic  # a pipeline suggested again: remembered
        evaluator._scores.clear()  # the stage cache alone from here
        second = evaluator.score(spec, qids)
        assert second.per_topic == first.per_topic
        assert second.node_seconds["retrieval"] == first.node_seconds["retrieval"]  # the time it took when it ran
        assert evaluator.cache.misses == misses  # retrieval, cutoff and generation all served from the cache
        evaluator.score("bm25@10 | extractive", qids)  # a shallower ranking: the depth-20 one, cut
        assert evaluator.cache.misses == misses + len(qids)  # only the new generations
    finally:
        evaluator.close()
    config.cache.memory_mb = 0
    uncached = Evaluator(config, build_space(config, located, settings), settings)
    try:
        assert uncached.score(spec, qids).per_topic == first.per_topic
        assert uncached.cache.hits == 0
    finally:
        uncached.close()


def test_bm25_arguments_are_one_canonical_token():
    from ragnarok.core.registry import ComponentArgumentError
    from ragnarok.core.spec import parse
    from ragnarok.stages.retrieve.bm25_args import format_args, parse_args

    params = parse_args("k1_1.2-b_0.75")
    assert (params.k1, params.b) == (1.2, 0.75)
    assert parse_args("terms_20-docs_5-beta_0.5", "rocchio").fb_terms == 20
    assert format_args({"k1": 1.2, "b": 0.4, "terms": 20}) == "k1_1.2-terms_20"  # b=0.4 is the default
    assert format_args({"k1": 0.9}) is None
    assert (
        str(parse("cc(bm25:k1_1.2-b_0.75=0.3, dense:minilm=0.7)@1000"))
        == "cc(bm25:k1_1.2-b_0.75=0.3, dense:minilm=0.7)@1000"
    )
    for bad, words in [
        ("k9_1", "unknown BM25 parameter 'k9'"),
        ("b_2", "from 0 to 1"),
        ("k1_1-k1_2", "twice"),
        ("terms_10", "unknown BM25 parameter 'terms'"),
    ]:
        with pytest.raises(ComponentArgumentError, match=words):
            parse_args(bad)


def test_saved_presets_resolve_and_builtins_are_kept(tmp_path):
    from ragnarok.core.presets import PRESETS, resolve, save_preset, saved_presets

    save_preset("mine", "bm25:k1_1.2@100 | extractive", tmp_path)
    assert saved_presets(tmp_path) == {"mine": "bm25:k1_1.2@100 | extractive"}
    with pytest.raises(ValueError, match="built-in"):
        save_preset("offline", "bm25@10", tmp_path)
    assert resolve("offline") == PRESETS["offline"]
    assert resolve("not-a-preset@10") == "not-a-preset@10"


@pytest.mark.slow
def test_a_saved_preset_runs_in_rag_and_the_arena_pool(tmp_path, demo_index):
    from fastapi.testclient import TestClient

    from api.main import create_app
    from ragnarok.arena.pool import identify
    from ragnarok.core.presets import save_preset

    save_preset("searched", "bm25:k1_1.2@20 | cutoff:0@5 | extractive", tmp_path)
    settings = Settings(data_dir=tmp_path, indexes={"d": demo_index}, default_index="d")
    with TestClient(create_app(settings, arena=False)) as client:
        answer = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": "searched"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["Ragnarok-Pipeline"] in ("searched", "bm25:k1_1.2@20 | cutoff:0@5 | extractive")
        assert 1 <= len(answer.json()["references"]) <= 5
    os.environ["RAGNAROK_DATA_DIR"] = str(tmp_path)  # the arena resolves names with the process's settings
    from ragnarok.core.settings import get_settings

    get_settings.cache_clear()
    try:
        assert identify("searched").spec == "bm25:k1_1.2@20 | cutoff:0@5 | extractive"
    finally:
        get_settings.cache_clear()


@pytest.mark.slow
def test_a_candidate_over_its_speed_threshold_is_dropped(tmp_path, demo_index):
    from ragnarok.optimize.objective import Evaluator

    body = header(demo_index) + LEXICAL.replace(
        "  - node: retrieval\n", "  - node: retrieval\n    max_seconds: 0.000001\n"
    )
    config, located = load_config(write(tmp_path, body))
    settings = Settings(data_dir=tmp_path / "data")
    evaluator = Evaluator(config, build_space(config, located, settings), settings)
    try:
        qids = evaluator.judged[:12]
        slow = evaluator.score("bm25@20", qids)
        assert slow.too_slow == ["retrieval"] and slow.per_topic == {}
        assert evaluator.cache.misses == 4  # stopped after the first topics (concurrency 4)
        scored = evaluator.score("bm25@20", qids, check_speed=False)  # held-out scoring never drops
        assert not scored.too_slow and len(scored.per_topic) == 12
    finally:
        evaluator.close()


def test_fused_rankings_from_the_stage_cache_are_the_gateways(tmp_path):
    """A warm fused trial builds nothing and calls no service, and gives what the uncached runner gives: the
    same candidates (ids, scores, fields) and stage rankings, at every depth; per-topic metric values are
    ir-measures' own, computed once per ranking."""
    import asyncio
    import json

    from ragnarok.core.evaluation import per_query
    from ragnarok.core.spec import parse
    from ragnarok.core.types import Query
    from ragnarok.optimize.cache import CachingRunner, StageCache
    from ragnarok.optimize.objective import Evaluator, _run
    from ragnarok.service.gateway import PipelineRunner, Services

    class Fake(Services):
        calls = 0

        async def post(self, client, stage, path, body):  # type: ignore[no-untyped-def]
            Fake.calls += 1
            asked = json.loads(body)
            seed = sum(map(ord, asked["retriever"] + asked["query"]))
            ids = [f"d{(seed * 7 + i * 13) % 97}" for i in range(60)]
            hits = [
                {
                    "docid": d,
                    "score": round(10 - i * 0.17 + (seed % 5) * 0.01, 3) + (i % 3 == 0) * 0.01,
                    "doc": {"segment": f"text of {d}", "title": d.upper()},
                }
                for i, d in enumerate(dict.fromkeys(ids))
            ][: asked["k"]]  # at most k, as the R service
            return json.dumps(
                {"query": {"text": asked["query"], "qid": asked["qid"]}, "candidates": hits}
            ).encode(), 5.0

    plain = PipelineRunner(Fake(None, None), "idx")  # type: ignore[arg-type]
    cached = CachingRunner(Fake(None, None), "idx", StageCache(64))  # type: ignore[arg-type]
    specs = [
        "cc(bm25=0.3, dense:minilm=0.7)@40",
        "cc(bm25=0.7, dense:minilm=0.3)@40",
        "rrf(bm25, dense:minilm)@40",
        "dbsf(bm25+rm3, dense:minilm)@20",
        "cc(bm25, rrf(bm25+rm3, dense:minilm))@30",
        "bm25@10",
    ]

    def run(runner, spec, qid):  # type: ignore[no-untyped-def]
        done = asyncio.run(runner.run(parse(spec), Query(text=f"topic {qid}", qid=qid)))
        return done.result.model_dump_json(exclude_unset=True), [t.ranking for t in done.traces]

    for spec in specs:
        for qid in ("1", "2"):
            want = run(plain, spec, qid)
            assert run(cached, spec, qid) == want, spec  # cold
            calls = Fake.calls
            assert run(cached, spec, qid) == want, spec  # warm: from memory, built once
            assert Fake.calls == calls

    qrels = {"1": {"d3": 1, "d20": 2, "d50": 1}, "2": {"d7": 1, "d8": 0}}
    evaluator = Evaluator.__new__(Evaluator)
    evaluator.qrels, evaluator._metric_values = qrels, {}
    rankings = {"1": [f"d{i}" for i in range(60)], "2": [f"d{i}" for i in range(59, -1, -1)], "3": ["d1"]}
    want = {
        q: v["nDCG@10"]
        for q, v in per_query(qrels, {q: _run(r) for q, r in rankings.items()}, {"nDCG@10": "nDCG@10"}).items()
    }
    assert evaluator._per_topic(rankings, "nDCG@10") == want
    assert evaluator._per_topic(rankings, "nDCG@10") == want  # from memory
    assert len(evaluator._metric_values) == 3  # topic 3 has no qrels: remembered as not scored
