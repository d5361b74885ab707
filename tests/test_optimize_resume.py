"""``ragnarok optimize`` resumed: a resumed study continues its sampler instead of replaying it, a
proposal identical to a finished trial is neither run again nor counted in the budget, trial numbers go on, and
an interrupted (given-back) trial is listed in the report as such; ties go to the faster pipeline; the report
names trials by Optuna's number (from 0) in its table and plot alike, and its bars start at 0; a spec's parse
error in a config is one whole line; a signal inside a write to the study still gives the trial in flight
back. Real Optuna studies in SQLite files; the evaluator is scripted (each spec's value is fixed) so that what
is compared is the search, not Lucene's timing."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial
from test_optimize import LEXICAL as NARROW  # two bm25 settings and bm25+rocchio, depth 20

from ragnarok.core.settings import Settings
from ragnarok.optimize.config import ConfigError, load_config
from ragnarok.optimize.objective import TrialResult
from ragnarok.optimize.space import build_space

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ROOT / "topics" / "demo.tsv"
QRELS = ROOT / "topics" / "qrels.demo.txt"
WIDE = """nodes:
  - node: lexical
    modules:
      - {module: bm25, k1: [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]}
      - {module: bm25+rocchio, terms: [5, 10, 20]}
  - node: retrieval
    modules:
      - {module: lexical, depth: 20}
"""


def _space(tmp_path: Path, nodes: str, strategy: str = "random"):
    path = tmp_path / "search.yaml"
    path.write_text(
        f"index: demo\ntopics: {TOPICS}\nqrels: {QRELS}\nobjective: nDCG@10\nstrategy: {strategy}\n"
        f"budget: {{trials: 8}}\n{nodes}",
        encoding="utf-8",
    )
    config, located = load_config(path)
    return config, build_space(config, located, Settings(data_dir=tmp_path / "data"))


class Scripted:
    """Each spec's value fixed by its text; every call recorded. ``stop_at``: the call that is interrupted (it
    gives its trial back as the stop does, then leaves as a signal would)."""

    def __init__(self, stop_at: int | None = None):
        self.calls: list[str] = []
        self.stop_at = stop_at

    def score(self, spec, qids, check_speed=True):  # type: ignore[no-untyped-def]
        self.calls.append(spec)
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            from ragnarok.optimize.study import give_back_in_flight

            give_back_in_flight()
            raise KeyboardInterrupt
        value = (zlib.crc32(spec.encode()) % 1000) / 1000
        return TrialResult(spec, value, {"q": value}, {"lexical": value, "retrieval": value}, {"retrieval": 0.01})


def _run_specs(trials) -> list[str]:
    return [
        t.user_attrs["spec"]
        for t in sorted(trials, key=lambda t: t.number)
        if t.state == TrialState.COMPLETE and "same_as" not in t.user_attrs
    ]


@pytest.mark.parametrize("strategy", ["random", "tpe"])
def test_a_resumed_study_continues_its_sampler(tmp_path, strategy):
    from ragnarok.optimize.study import open_study, search, used

    config, space = _space(tmp_path, WIDE, strategy)
    whole, scripted = open_study(config, space, f"sqlite:///{tmp_path / 'a.db'}", "s", strategy), Scripted()
    search(whole, scripted, space, strategy, ["q"], 8, None)
    uninterrupted = _run_specs(whole.get_trials())
    assert len(uninterrupted) == 8 and len(set(scripted.calls)) == len(scripted.calls) == 8, scripted.calls

    url, resumed = f"sqlite:///{tmp_path / 'b.db'}", Scripted()
    search(open_study(config, space, url, "s", strategy), resumed, space, strategy, ["q"], 3, None)
    study = open_study(config, space, url, "s", strategy)  # a new process: a new sampler object
    search(study, resumed, space, strategy, ["q"], 8, None)
    assert len(set(resumed.calls)) == len(resumed.calls) == 8, resumed.calls  # nothing replayed
    assert _run_specs(study.get_trials()) == uninterrupted  # the sequence went on where it stopped
    assert used(study.get_trials()) == 8


@pytest.mark.parametrize("strategy", ["random", "tpe"])
@pytest.mark.parametrize("stop_at", [2, 5])
def test_an_interrupted_and_resumed_study_is_the_uninterrupted_one(tmp_path, strategy, stop_at):
    """The same pipelines scored in the same order and the same winner: the trial an interrupt gave back took no
    place in the sampler's sequence (it had moved every later proposal by one), and its rerun is scored."""
    from ragnarok.optimize.study import best_trial, open_study, search

    config, space = _space(tmp_path, WIDE, strategy)
    whole = open_study(config, space, f"sqlite:///{tmp_path / 'a.db'}", "s", strategy)
    search(whole, Scripted(), space, strategy, ["q"], 8, None)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with pytest.raises(KeyboardInterrupt):
        search(
            open_study(config, space, url, "s", strategy), Scripted(stop_at=stop_at), space, strategy, ["q"], 8, None
        )
    resumed = open_study(config, space, url, "s", strategy)
    search(resumed, Scripted(), space, strategy, ["q"], 8, None)
    assert _run_specs(resumed.get_trials()) == _run_specs(whole.get_trials())
    assert best_trial(resumed).user_attrs["spec"] == best_trial(whole).user_attrs["spec"]


@pytest.mark.parametrize("strategy", ["random", "tpe"])
@pytest.mark.parametrize("done", [2, 4])
def test_a_trial_given_back_before_its_parameters_is_drawn_again_in_its_place(tmp_path, strategy, done):
    from ragnarok.optimize import study as studies

    config, space = _space(tmp_path, WIDE, strategy)
    whole = studies.open_study(config, space, f"sqlite:///{tmp_path / 'a.db'}", "s", strategy)
    studies.search(whole, Scripted(), space, strategy, ["q"], 6, None)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    cut = studies.open_study(config, space, url, "s", strategy)
    studies.search(cut, Scripted(), space, strategy, ["q"], done, None)
    studies._in_flight[:] = [(cut, cut.ask())]  # interrupted while its parameters were being chosen
    studies.give_back_in_flight()
    resumed = studies.open_study(config, space, url, "s", strategy)
    studies.search(resumed, Scripted(), space, strategy, ["q"], 6, None)
    given_back = [t for t in resumed.get_trials() if t.user_attrs.get("interrupted")]
    assert len(given_back) == 1 and not given_back[0].params
    assert _run_specs(resumed.get_trials()) == _run_specs(whole.get_trials())


def test_a_repeated_proposal_is_not_run_nor_counted(tmp_path):
    from ragnarok.optimize.study import best_trial, open_study, search, used

    config, space = _space(tmp_path, NARROW)
    study, scripted = open_study(config, space, f"sqlite:///{tmp_path / 's.db'}", "s", "random"), Scripted()
    search(study, scripted, space, "random", ["q"], 3, None)
    trials = study.get_trials()
    assert sorted(scripted.calls) == sorted({t.user_attrs["spec"] for t in trials}), scripted.calls  # each once
    assert len(scripted.calls) == 3 and used(trials) == 3
    repeats = [t for t in trials if "same_as" in t.user_attrs]
    assert repeats, [(t.number, t.params) for t in trials]  # seed 0 proposes a repeat in a space of 3
    for repeat in repeats:
        known = next(t for t in trials if t.number == repeat.user_attrs["same_as"])
        assert repeat.params == known.params and repeat.value == known.value  # the known value, told again
    assert "same_as" not in best_trial(study).user_attrs
    # a budget larger than the space ends when every pipeline was tried
    search(study, scripted, space, "random", ["q"], 10, None)
    assert len(scripted.calls) == 3 and used(study.get_trials()) == 3


def test_an_interrupted_trial_is_run_first_on_resume_numbers_go_on_and_the_report_lists_it(tmp_path):
    from ragnarok.optimize.cli import _Clock
    from ragnarok.optimize.report import FoldResult, finished, write_report
    from ragnarok.optimize.study import open_study, search, used

    config, space = _space(tmp_path, WIDE)
    url = f"sqlite:///{tmp_path / 's.db'}"
    stopped = Scripted(stop_at=3)
    with pytest.raises(KeyboardInterrupt):
        search(open_study(config, space, url, "s", "random"), stopped, space, "random", ["q"], 6, None)
    study = open_study(config, space, url, "s", "random")
    trials = study.get_trials()
    cut = [t for t in trials if t.state == TrialState.FAIL]
    assert len(cut) == 1 and cut[0].user_attrs["interrupted"] is True and used(trials) == 2
    assert _Clock(6, None, used(trials)).line("s", trials[0], None).split("] ")[0].endswith("[3/6")  # not [1/6]

    resumed = Scripted()
    search(study, resumed, space, "random", ["q"], 6, None)
    assert resumed.calls[0] == stopped.calls[-1]  # the given-back trial first
    trials = study.get_trials()
    again = next(t for t in trials if t.user_attrs.get("rerun_of") == cut[0].number)
    assert again.number > cut[0].number and again.state == TrialState.COMPLETE
    assert len({t.number for t in trials}) == len(trials) and used(trials) == 6
    assert cut[0].number in {t.number for t in finished(trials)}

    fold = FoldResult("s", ["q"], ["r"], again.user_attrs["spec"], again.value, {"nDCG@10": 0.5})
    md, page = write_report(tmp_path / "out", "s (random)", "nDCG@10", [fold], [("s", study, trials)], space, {})
    row = next(line for line in md.read_text().splitlines() if line.startswith(f"| {cut[0].number} |"))
    assert f"interrupted (given back; run again as #{again.number}: " in row, row
    assert "1 interrupted" in md.read_text() and "interrupted (given back" in page.read_text()


def _trials(space, rows):  # type: ignore[no-untyped-def]
    dists = {n.name: CategoricalDistribution([c.label for c in n.candidates]) for n in space.nodes}
    out = []
    for number, labels, value, seconds in rows:
        params = {**space.default(), **labels}
        made = create_trial(
            state=TrialState.COMPLETE,
            value=value,
            params=params,
            distributions=dists,
            user_attrs={
                "spec": space.spec(params),
                "seconds": {"retrieval": seconds},
                "metric.lexical": value,
                "metric.retrieval": value,
            },
        )
        made.number = number
        out.append(made)
    return out


def test_ties_go_to_the_faster_pipeline(tmp_path):
    from ragnarok.optimize.report import table
    from ragnarok.optimize.strategies import greedy_best
    from ragnarok.optimize.study import best_trial

    config, space = _space(tmp_path, NARROW, "greedy")
    rows = [(0, {}, 0.5, 0.30), (1, {"lexical": "bm25:k1_1.2"}, 0.5, 0.01), (2, {"lexical": "bm25+rocchio"}, 0.4, 0.0)]
    trials = _trials(space, rows)
    study = optuna.create_study(direction="maximize")
    for t in trials:
        study.add_trial(t)
    assert best_trial(study).params["lexical"] == "bm25:k1_1.2"  # 0.5 in 0.01 s, not 0.5 in 0.30 s
    assert greedy_best("greedy", space, trials)["lexical"] == "bm25:k1_1.2"
    assert table(trials, space).splitlines()[2].startswith("| 1 |")  # best first: the faster of the tie


def test_the_report_numbers_trials_alike_and_its_bars_start_at_0(tmp_path):
    from ragnarok.optimize.report import bar_span, table, trial_points

    config, space = _space(tmp_path, NARROW)
    trials = _trials(space, [(0, {}, 0.41, 0.1), (1, {"lexical": "bm25:k1_1.2"}, 0.42, 0.1)])
    numbers = [int(line.split("|")[1]) for line in table(trials, space).splitlines()[2:]]
    assert sorted(numbers) == [x for x, _ in trial_points(trials)] == [0, 1]  # the table's # is the axis' x
    left, right = bar_span([0.41, 0.42])
    assert left == 0 and 0.42 < right < 0.5
    assert bar_span([])[0] == 0 and not math.isnan(bar_span([0.0])[1])


def test_a_spec_parse_error_in_a_config_is_one_whole_line(tmp_path):
    path = tmp_path / "search.yaml"
    path.write_text(
        f"index: demo\ntopics: {TOPICS}\nqrels: {QRELS}\nobjective: nDCG@10\nbudget: {{trials: 3}}\n"
        "baselines: ['bm25@10 | , extractive']\n" + NARROW,
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as error:
        config, located = load_config(path)
        build_space(config, located, Settings(data_dir=tmp_path / "data"))
    message = str(error.value)
    assert "\n" not in message and not message.endswith(":"), message
    assert "at position 11: `bm25@10 | , extractive` (here: `, extractive`)" in message, message


INSIDE_A_WRITE = """
import os, signal, sys
from types import SimpleNamespace
from sqlalchemy import event
from ragnarok.optimize.study import _in_flight, give_back_in_flight, open_study
from ragnarok.runtime.interrupt import on_stop, stop_on_signals

with stop_on_signals("stopped"), on_stop(give_back_in_flight):
    study = open_study(SimpleNamespace(seed=0), None, sys.argv[1], "s", "random")
    trial, other = study.ask(), study.ask()
    _in_flight[:] = [(study, trial)]

    def signal_inside(conn, cursor, statement, *_):  # the handler runs before the transaction's commit
        if statement.lstrip().upper().startswith(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGTERM)

    event.listen(study._storage._backend.engine, "after_cursor_execute", signal_inside)
    trial.set_user_attr("step", 1)  # an INSERT (an upsert)
    study.tell(other, 0.5)  # an UPDATE
    signal.pause()
"""


@pytest.mark.parametrize("statement", ["UPDATE", "INSERT"])
def test_a_signal_inside_a_write_still_gives_the_trial_back(tmp_path, statement):
    """Parked inside a write transaction, the main thread kept SQLite's lock: the trial stayed RUNNING and the
    command took the whole callback time to stop. The write now finishes first."""
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", INSIDE_A_WRITE, f"sqlite:///{db}", statement],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 143, done.stderr[-2000:]
    assert "interrupted: stopped" in done.stderr, done.stderr[-2000:]
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    cut = study.get_trials()[0]
    assert cut.state == TrialState.FAIL and cut.user_attrs["interrupted"] is True, (cut.state, cut.user_attrs)
