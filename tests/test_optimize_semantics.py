"""``ragnarok optimize`` semantics: a study is keyed by its config (a changed config starts a new
study, or is refused under the same explicit name, with the difference shown), every config field is checked
before the first trial, load is not a verdict (a candidate that failed or was too slow is retried once at the
end; the speed threshold scales with the load measured beside it), reports and presets per strategy outside
the source tree, line progress in logs, and report.html as real HTML (also in a real browser)."""

from __future__ import annotations

import html.parser
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from ragnarok.core.settings import Settings
from ragnarok.optimize.config import ConfigError, load_config
from ragnarok.optimize.objective import TrialError, TrialResult
from ragnarok.optimize.space import build_space

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ROOT / "topics" / "demo.tsv"
QRELS = ROOT / "topics" / "qrels.demo.txt"
LEXICAL = """nodes:
  - node: lexical
    modules:
      - {module: bm25, k1: [0.9, 1.2]}
      - {module: bm25+rocchio, terms: 10}
  - node: retrieval
    modules:
      - {module: lexical, depth: 20}
"""


def write(tmp_path: Path, body: str, name: str = "search.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def header(index: str = "demo", objective: str = "nDCG@10", extra: str = "") -> str:
    return f"index: {index}\ntopics: {TOPICS}\nqrels: {QRELS}\nobjective: {objective}\nbudget: {{trials: 1}}\n{extra}"


def optimize(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ragnarok.cli", "optimize", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=dict(os.environ),
    )


# --- every field checked before the first trial ------------------------------------------------------------


def test_a_mistyped_objective_is_one_line_and_rc_2_at_once(tmp_path):
    path = write(tmp_path, header(str(tmp_path / "no-index"), "ndcg@10") + LEXICAL)
    start = time.monotonic()
    done = optimize(str(path), "--output", str(tmp_path / "out"), timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: {path}:4: objective: unknown metric 'ndcg@10'; did you mean 'nDCG@10'?"], done.stderr
    assert time.monotonic() - start < 60  # no index opened, no trial run
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "body, line, words",
    [
        (header(objective="strictall") + LEXICAL, 4, ["unknown metric 'strictall'", "did you mean 'strict_all'?"]),
        (
            header() + LEXICAL.replace("  - node: retrieval\n", "  - node: retrieval\n    metric: RR@1O\n"),
            12,
            ["nodes.1.metric", "did you mean 'RR@10'?"],
        ),
        (header(extra="baselines: ['bm25@10 |']\n") + LEXICAL, 6, ["baselines.0"]),
        (header(objective="xyzzy") + LEXICAL, 4, ["unknown metric 'xyzzy'", "nDCG@10"]),
    ],
)
def test_every_metric_and_baseline_is_checked_with_its_line(tmp_path, body, line, words):
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ") and "\n" not in message, message
    for word in words:
        assert word in message, message


# --- a study is keyed by its config ------------------------------------------------------------------------


def _fake_config(tmp_path: Path, objective: str = "nDCG@10", extra: str = ""):
    config, located = load_config(write(tmp_path, header(objective=objective, extra=extra) + LEXICAL))
    return config, build_space(config, located, Settings(data_dir=tmp_path / "data"))


def test_a_changed_config_gets_a_new_study_or_is_refused_by_name(tmp_path):
    from ragnarok.optimize.study import open_study
    from ragnarok.optimize.study_keys import StudyConflict, fingerprint, mark, study_name

    url = f"sqlite:///{tmp_path / 'study.db'}"
    config, space = _fake_config(tmp_path)
    first = fingerprint(config, space)
    name, note = study_name(url, "search.greedy.seed0", first, explicit=False)
    assert (name, note) == ("search.greedy.seed0", None)
    study = open_study(config, space, url, name, "greedy")
    mark(study, first)
    study.add_trial(create_trial(value=0.5, params={}, distributions={}))
    assert study_name(url, "search.greedy.seed0", first, explicit=True) == ("search.greedy.seed0", None)

    config, space = _fake_config(tmp_path, objective="AP")
    changed = fingerprint(config, space)
    name, note = study_name(url, "search.greedy.seed0", changed, explicit=False)
    assert name.startswith("search.greedy.seed0.") and name != "search.greedy.seed0"
    assert note is not None and "\n" not in note and "objective: nDCG@10 -> AP" in note and "new study" in note
    with pytest.raises(StudyConflict) as refused:
        study_name(url, "search.greedy.seed0", changed, explicit=True)
    assert "objective: nDCG@10 -> AP" in str(refused.value) and "\n" not in str(refused.value)
    # the strategy is part of the key and of the name: another strategy never meets this study
    assert fingerprint(config.model_copy(update={"strategy": "tpe"}), space)["strategy"] == "tpe"


@pytest.fixture
def demo_index(demo_settings) -> str:
    return str(demo_settings.demo_index_dir)


@pytest.mark.slow
def test_cli_changed_config_preset_notice_reports_per_strategy_and_log_lines(tmp_path, demo_index):
    """The reported session: the same output directory, the objective changed; then an explicit name."""
    data = Path(os.environ["RAGNAROK_DATA_DIR"])
    configs = tmp_path / "configs"
    configs.mkdir()
    path = write(configs, header(demo_index) + LEXICAL)
    first = optimize(str(path))
    assert first.returncode == 0, first.stderr
    out = data / "optimize" / "search"  # the data directory, never beside the config
    assert sorted(p.name for p in configs.iterdir()) == ["search.yaml"]
    assert (out / "report.greedy.html").exists() and (out / "report.greedy.md").exists()
    log = [line for line in first.stderr.splitlines() if " trial 0 " in line]
    assert len(log) == 1 and "[1/1]" in log[0] and "elapsed" in log[0] and "eta" in log[0], first.stderr

    path.write_text(header(demo_index, "AP") + LEXICAL, encoding="utf-8")
    second = optimize(str(path))
    assert second.returncode == 0, second.stderr
    notes = [line for line in second.stderr.splitlines() if "config changed" in line]
    assert len(notes) == 1 and "objective: nDCG@10 -> AP" in notes[0] and "starting new study" in notes[0], (
        second.stderr
    )
    assert "1 trials; best on train AP" in second.stdout, second.stdout  # a trial run, not the old ones shown
    assert (
        "preset 'search-greedy' replaced" in second.stderr
        or "preset 'search-greedy' was already saved" in second.stderr
    ), second.stderr

    named = write(configs, header(demo_index, extra="study: mine\n") + LEXICAL, "named.yaml")
    assert optimize(str(named)).returncode == 0
    named.write_text(header(demo_index, "AP", "study: mine\n") + LEXICAL, encoding="utf-8")
    refused = optimize(str(named))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: {named}:6: study 'mine.greedy.seed0' holds trials of another config (objective: nDCG@10 -> AP"
    ), refused.stderr


def test_saving_a_preset_over_another_says_so(tmp_path):
    from ragnarok.core.presets import saved_presets
    from ragnarok.optimize.cli import save_preset_noting

    assert save_preset_noting("tuned", "bm25@10", tmp_path)[1] is None
    assert save_preset_noting("tuned", "bm25@10", tmp_path)[1] == "preset 'tuned' was already saved with this spec"
    _, note = save_preset_noting("tuned", "bm25+rocchio@10", tmp_path)
    assert note == "preset 'tuned' replaced: it was 'bm25@10'"
    assert saved_presets(tmp_path) == {"tuned": "bm25+rocchio@10"}


# --- load is not a verdict ---------------------------------------------------------------------------------


class FlakyEvaluator:
    """Scores specs by a table; the first evaluation of each spec in ``flaky`` raises a timeout, of each in
    ``slow`` comes back too slow (a busy minute)."""

    def __init__(self, values: dict[str, float], flaky: set[str] = frozenset(), slow: set[str] = frozenset()):
        self.values, self.flaky, self.slow, self.calls = values, set(flaky), set(slow), []

    def score(self, spec, qids, check_speed=True):  # type: ignore[no-untyped-def]
        self.calls.append(spec)
        if spec in self.flaky:
            self.flaky.discard(spec)
            raise TrialError("topic demo-01: the R service did not answer within 120 s (504 Gateway Timeout)")
        if spec in self.slow:
            self.slow.discard(spec)
            return TrialResult(spec, math.nan, {}, {}, {"retrieval": 9.0}, ["retrieval"], load=1.0)
        value = self.values[spec]
        return TrialResult(spec, value, {"q": value}, {"lexical": value, "retrieval": value}, {"retrieval": 0.01})


@pytest.mark.parametrize("strategy", ["greedy", "grid"])
def test_a_candidate_that_timed_out_or_was_too_slow_once_is_retried_at_the_end(tmp_path, strategy):
    from ragnarok.optimize.study import best_trial, open_study, search

    config, space = _fake_config(tmp_path)
    values = {"bm25@20": 0.30, "bm25:k1_1.2@20": 0.50, "bm25+rocchio@20": 0.40}
    evaluator = FlakyEvaluator(values, flaky={"bm25:k1_1.2@20"}, slow={"bm25+rocchio@20"})
    study = open_study(config, space, f"sqlite:///{tmp_path / 'study.db'}", "flaky", strategy)
    seen = []
    search(study, evaluator, space, strategy, ["q"], 3, None, seen.append)
    trials = study.get_trials()
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert [t.user_attrs["verdict"] for t in failed] == ["timeout"]
    assert [t.user_attrs["too_slow"] for t in trials if t.state == TrialState.PRUNED] == [["retrieval"]]
    retries = {t.user_attrs["retry_of"]: t for t in trials if "retry_of" in t.user_attrs}
    assert len(retries) == 2 and all(t.state == TrialState.COMPLETE for t in retries.values())
    assert retries[failed[0].number].user_attrs["spec"] == "bm25:k1_1.2@20"
    best = best_trial(study)
    assert best is not None and best.user_attrs["spec"] == "bm25:k1_1.2@20" and best.value == 0.5
    assert len(seen) == 5  # every trial reported (a progress line each), the retries too
    assert sorted(evaluator.calls) == sorted([*values, "bm25:k1_1.2@20", "bm25+rocchio@20"])  # once more, not more


def test_the_speed_threshold_scales_with_the_load_measured_beside_it(tmp_path):
    from ragnarok.optimize.objective import Evaluator

    config, located = load_config(
        write(
            tmp_path, header() + LEXICAL.replace("  - node: retrieval\n", "  - node: retrieval\n    max_seconds: 1\n")
        )
    )
    settings = Settings(data_dir=tmp_path / "data")
    evaluator = Evaluator(config, build_space(config, located, settings), settings)
    try:
        assert evaluator.probe_min > 0
        evaluator.probe_min = 0.01
        assert evaluator.load([0.01, 0.012, 0.01]) == 1.0
        assert evaluator.load([0.03, 0.03]) == pytest.approx(3.0)
        assert evaluator._over({"retrieval": [1.5]}, 1.0) == ["retrieval"]  # idle: 1.5 s is over 1 s
        assert evaluator._over({"retrieval": [1.5]}, evaluator.load([0.03, 0.03])) == []  # 3x loaded: not
        assert evaluator._over({"retrieval": [4.0]}, 3.0) == ["retrieval"]  # slow even for the load
    finally:
        evaluator.close()


# --- the report --------------------------------------------------------------------------------------------

SPEC = "bm25:k1_1.2@20 | cutoff:0@5 | extractive"
ERROR = (
    "topic demo-07: simcutoff: the R service did not answer within 120 s (HTTP 504 Gateway Timeout from "
    "http://localhost:8081/rerank, after 2 attempts) while the machine was at load 36"
)


def _report(tmp_path: Path) -> Path:
    from ragnarok.optimize.report import FoldResult, write_report

    body = header() + LEXICAL + "  - node: generator\n    modules: [{module: extractive, k: [5, 10]}]\n"
    config, located = load_config(write(tmp_path, body))
    space = build_space(config, located, Settings(data_dir=tmp_path / "data"))
    dists = {n.name: CategoricalDistribution([c.label for c in n.candidates]) for n in space.nodes}

    def trial(number, labels, state, value=None, **attrs):  # type: ignore[no-untyped-def]
        params = {**space.default(), **labels}
        made = create_trial(
            state=state,
            value=value,
            params=params,
            distributions=dists,
            user_attrs={"spec": space.spec(params), **attrs},
        )
        made.number = number
        return made

    trials = [
        trial(0, {}, TrialState.COMPLETE, 0.4312, **{"metric.lexical": 0.4312, "metric.generator": 0.4312}),
        trial(
            1,
            {"lexical": "bm25:k1_1.2"},
            TrialState.COMPLETE,
            0.4420,
            **{"metric.lexical": 0.4420, "metric.generator": 0.4420, "seconds": {"retrieval": 0.01}},
        ),
        trial(2, {"lexical": "bm25+rocchio"}, TrialState.FAIL, error=ERROR, verdict="timeout"),
        trial(3, {"generator": "extractive[k=10]"}, TrialState.PRUNED, too_slow=["generator"], load=2.5),
        trial(
            4,
            {"lexical": "bm25+rocchio"},
            TrialState.COMPLETE,
            0.4401,
            retry_of=2,
            **{"metric.lexical": 0.4401, "metric.generator": 0.4401},
        ),
    ]
    study = optuna.create_study(direction="maximize")
    fold = FoldResult(
        "search.greedy.seed0",
        ["a"] * 25,
        ["b"] * 25,
        SPEC,
        0.4420,
        {"nDCG@10": 0.5123, "MAP": 0.31},
        baselines={"bm25@100 | extractive": {"nDCG@10": 0.4711}},
    )
    md, page = write_report(
        tmp_path / "out",
        "search (greedy)",
        "nDCG@10",
        [fold],
        [("search.greedy.seed0", study, trials)],
        space,
        {},
        stem="report.greedy",
    )
    assert md.name == "report.greedy.md" and page.name == "report.greedy.html"
    return page


class _Cells(html.parser.HTMLParser):
    def __init__(self):  # type: ignore[no-untyped-def]
        super().__init__()
        self.tables, self.cells, self.images, self._cell = 0, [], [], None

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        if tag == "table":
            self.tables += 1
        elif tag == "td":
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag == "td":
            self.cells.append(self._cell)
            self._cell = None

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if self._cell is not None:
            self._cell += data


def test_report_html_is_html_tables_with_whole_specs_and_errors(tmp_path):
    page = _report(tmp_path)
    text = page.read_text(encoding="utf-8")
    parsed = _Cells()
    parsed.feed(text)
    assert parsed.tables >= 2  # held-out scores, trials
    assert "best: " + SPEC in parsed.cells  # the spec with its `|`s in one cell
    assert any(cell.startswith("failed: " + ERROR) and "retried as #4: 0.4401" in cell for cell in parsed.cells)
    assert any(cell.startswith("too slow (generator) at load x2.5") for cell in parsed.cells)
    assert "**" not in text and "`" not in text and "![" not in text  # no raw Markdown
    assert "0.5123" in text and "0.4711" in text  # held-out scores and the baseline's
    for src in parsed.images:
        assert (page.parent / src).stat().st_size > 5_000, src
    assert {"search.greedy.seed0.best.png", "search.greedy.seed0.modules.png"} <= set(parsed.images)
    md = (page.parent / "report.greedy.md").read_text(encoding="utf-8")
    assert "bm25:k1_1.2@20 \\| cutoff:0@5 \\| extractive" in md
    row = next(line for line in md.splitlines() if line.startswith("| 2 |"))
    assert row.count("(") == row.count(")")  # a shortened error keeps its parentheses closed


def test_shortened_errors_keep_their_parentheses_closed():
    from ragnarok.optimize.report import shorten

    assert (
        shorten("did not answer within 120 s (504 from http://x, after 2 attempts)", 40)
        == "did not answer within 120 s (504 from …)"
    )
    assert shorten("short (enough)", 40) == "short (enough)"


CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
]


@pytest.mark.slow
def test_report_html_in_a_real_browser(tmp_path):
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError as exc:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"playwright is not installed: {exc}")
        pytest.skip("playwright is not installed")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} not found")
    page_path = _report(tmp_path)
    shot = tmp_path / "report.png"
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.goto(page_path.as_uri())
            trials = page.locator("table.trials")
            trials.wait_for(timeout=30_000)
            expect(trials).to_be_visible()
            spec = page.locator("table.held td.spec", has_text=SPEC)
            expect(spec).to_have_count(1)
            box = spec.bounding_box()
            assert box is not None and box["width"] > 100 and box["x"] + box["width"] <= 1280
            expect(page.locator("table.trials tr.failed td.state")).to_contain_text("after 2 attempts)")
            loaded = page.evaluate("() => [...document.images].every(i => i.complete && i.naturalWidth > 300)")
            assert loaded, "a plot did not load"
            page.screenshot(path=shot, full_page=True)
        finally:
            context.close()
    assert shot.stat().st_size > 10_000
