"""The proxy judge's prefetch (speed): every text a run's judgments need is encoded in one call
before judging, the judgments then only read the memo, and their labels are those without it."""

from __future__ import annotations

import pytest

from ragnarok.judge import entail
from ragnarok.judge.answers import Answer
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.nuggets import Nugget, TopicNuggets
from ragnarok.judge.proxy import ProxyJudge
from ragnarok.judge.service import Watched
from ragnarok.stages.embed.vectors import text_vectors
from ragnarok.stages.retrieve.dense import shared_encoder

QUERY = "compress a file with gzip"
NUGGETS = [
    "use the gzip module",
    "gzip.open opens a file for compressed writing",
    "shutil.copyfileobj copies the data into the gzip file",
]
ANSWERS = [
    (
        "Use the gzip module, which reads and writes gzip-compressed files. Open the output with "
        "gzip.open(filename, 'wb'), which opens a gzip file for compressed writing. Then copy the data into it "
        "with shutil.copyfileobj(f_in, f_out), which copies the data from one file object to another."
    ),
    (
        "To write compressed output, call the open function of gzip in binary write mode. The copyfileobj "
        "helper from shutil streams the bytes of the source into the gzip file object."
    ),  # a paraphrase
    "gzip module gzip.open shutil.copyfileobj data file compressed writing.",  # a word list
    (
        "Never use the gzip module. gzip.open does not open a file for compressed writing. "
        "shutil.copyfileobj cannot copy the data into the gzip file."
    ),  # negated
    (
        "Compressing a file with gzip is a common task, and how you do it depends on your situation. "
        "Compressing files with gzip can be done in several ways."
    ),  # an echo of the question
    "Use bz2.open(filename, 'wb'), which opens a file for compressed writing.",  # another module
    "Use the gzip module. " * 6,  # repetition
]
SEGMENT = (
    "gzip: This module provides a simple interface to compress and decompress files just like the "
    "GNU programs gzip and gunzip would. The gzip.open() function opens a gzip-compressed file in "
    "binary or text mode, returning a file object."
)
CLAIMS = [
    "The gzip.open() function opens a gzip-compressed file in binary or text mode.",
    "The gzip.open() function never opens a gzip-compressed file in binary mode.",
    "The bz2.open() function opens a compressed file in binary mode.",
    "gzip module gzip.open compress decompress files binary text mode.",
    "gzip.open() returns a file object, and the module compresses files like GNU gzip.",
    "Use tarfile to build archives.",
]


def fresh() -> None:
    """No sentence encoded, no plan made."""
    text_vectors("minilm").clear()
    entail.plan_nuggets.cache_clear()
    entail.plan_support.cache_clear()


def judge_all(judge: ProxyJudge) -> tuple[list, list]:
    return ([judge.assign(QUERY, a, NUGGETS) for a in ANSWERS], [judge.support(c, SEGMENT) for c in CLAIMS])


def test_prefetch_encodes_once_and_the_labels_do_not_change(monkeypatch):
    fresh()
    want = judge_all(ProxyJudge())
    fresh()
    judge = ProxyJudge()
    encoded = judge.prefetch(assign=[(QUERY, a, NUGGETS) for a in ANSWERS], support=[(c, SEGMENT) for c in CLAIMS])
    assert encoded > 0
    assert entail.plan_nuggets.cache_info().currsize == len(ANSWERS)

    def no_model(*_args, **_kwargs):
        raise AssertionError("prefetch should have encoded this")

    monkeypatch.setattr(shared_encoder("minilm"), "encode", no_model)
    assert judge_all(judge) == want
    assert want[0][0] == ["support"] * 3 and want[0][2] == ["not_support"] * 3  # the judge still judges
    assert want[1][:4] == ["full_support", "no_support", "no_support", "no_support"]
    assert entail.plan_nuggets.cache_info().hits >= len(ANSWERS)  # planned once


def test_prefetch_encodes_in_one_call_and_skips_what_is_known(monkeypatch):
    fresh()
    calls = []
    encode = shared_encoder("minilm").encode
    monkeypatch.setattr(
        shared_encoder("minilm"), "encode", lambda texts, *a, **k: calls.append(len(texts)) or encode(texts)
    )
    judge = ProxyJudge()
    n = judge.prefetch(assign=[(QUERY, a, NUGGETS) for a in ANSWERS], support=[(c, SEGMENT) for c in CLAIMS])
    assert calls == [n]
    assert judge.prefetch(assign=[(QUERY, ANSWERS[0], NUGGETS)], support=[(CLAIMS[0], SEGMENT)]) == 0
    assert calls == [n]


def test_prefetch_skips_cached_judgments(tmp_path):
    cache = JudgeCache(tmp_path / "judgments.db")
    fresh()
    judge_all(ProxyJudge(cache))
    fresh()
    assert (
        ProxyJudge(cache).prefetch(
            assign=[(QUERY, a, NUGGETS) for a in ANSWERS], support=[(c, SEGMENT) for c in CLAIMS]
        )
        == 0
    )
    assert entail.plan_nuggets.cache_info().currsize == 0  # nothing planned either


def test_a_subset_of_nuggets_is_planned_as_assign_will_ask():
    """With some nuggets cached, assign judges the others: prefetch plans exactly those."""
    fresh()
    judge = ProxyJudge()
    judge.prefetch(assign=[(QUERY, ANSWERS[1], NUGGETS[1:])])
    judge.assign(QUERY, ANSWERS[1], NUGGETS[1:])
    info = entail.plan_nuggets.cache_info()
    assert info.currsize == 1 and info.hits == 1


class Recording:
    """A judge that records what it is asked (the proxy's interface, without a model)."""

    proxy, name = True, "recording"

    def __init__(self) -> None:
        self.stats = ProxyJudge().stats
        self.prefetched: list[dict] = []
        self.asked: list[tuple] = []

    def describe(self) -> str:
        return "recording"

    def prefetch(self, **items) -> int:
        self.prefetched.append(items)
        return 0

    def assign(self, query, passage, nuggets):
        self.asked.append(("assign", query, passage, tuple(nuggets)))
        return ["support"] * len(nuggets)

    def support(self, sentence, passage):
        self.asked.append(("support", sentence, passage))
        return "full_support"


@pytest.mark.parametrize("wrap", [False, True])
def test_eval_rag_prefetches_once_per_run_what_it_then_asks(wrap):
    from ragnarok.judge.evalrag import evaluate_run

    answers = {
        q: Answer(q, f"query {q}", [(f"sentence one of {q}.", [0]), (f"sentence two of {q}.", [1, 0])], ["d0", "d1"])
        for q in ("q1", "q2")
    }
    nuggets = {q: TopicNuggets(qid=q, query="", nuggets=[Nugget(text=f"nugget of {q}")]) for q in ("q1", "q2")}
    looked_up = []

    def segments(docid):
        looked_up.append(docid)
        return f"text of {docid}"

    judge = Recording()
    evaluate_run(
        "run",
        answers,
        Watched(judge) if wrap else judge,
        nuggets=nuggets,
        segments=segments,
        concurrency=2,
        progress=False,
    )
    assert len(judge.prefetched) == 1
    items = judge.prefetched[0]
    assert sorted((("assign", q, p, tuple(n)) for q, p, n in items["assign"])) == sorted(
        a for a in judge.asked if a[0] == "assign"
    )
    assert sorted(("support", s, p) for s, p in items["support"]) == sorted(a for a in judge.asked if a[0] == "support")
    assert sorted(looked_up) == ["d0", "d1"]  # each segment read once, for the prefetch and the judging


def test_a_judge_without_prefetch_is_judged_as_before():
    class Plain:
        proxy, name, stats = False, "plain", None

        def assign(self, *_a):
            return []

    assert getattr(Watched(Plain()), "prefetch", None) is None  # type: ignore[arg-type]


def test_eval_rag_prefetches_every_run_in_one_encoder_call(monkeypatch):
    """``prefetch_runs`` (eval-rag with several runs): one encoder call for all runs, then judging them encodes
    nothing more, and every label is the one judged without it."""
    from ragnarok.judge.evalrag import evaluate_run, prefetch_runs

    nuggets = {"q": TopicNuggets(qid="q", query=QUERY, nuggets=[Nugget(text=n) for n in NUGGETS])}
    runs = [{"q": Answer("q", QUERY, [(a, [0])], ["d0"])} for a in ANSWERS[:3]]
    looked_up = []

    def segments(docid):
        looked_up.append(docid)
        return SEGMENT

    def labels(judge, segments):
        out = []
        for n, answers in enumerate(runs):
            topic = evaluate_run(f"run{n}", answers, judge, nuggets=nuggets, segments=segments, progress=False).topics[
                "q"
            ]
            out.append((topic.labels, topic.support))
        return out

    fresh()
    want = labels(ProxyJudge(), segments)
    fresh()
    calls = []
    encode = shared_encoder("minilm").encode
    monkeypatch.setattr(
        shared_encoder("minilm"), "encode", lambda texts, *a, **k: calls.append(len(texts)) or encode(texts, *a, **k)
    )
    judge = ProxyJudge()
    looked_up.clear()
    remembered = prefetch_runs(judge, runs, nuggets=nuggets, segments=segments)
    assert len(calls) == 1
    assert labels(judge, remembered) == want
    assert len(calls) == 1  # the runs' own prefetch and their judgments found every vector
    assert looked_up == ["d0"]  # the segment read once for all runs
    assert prefetch_runs(judge, runs, nuggets=nuggets) is None
