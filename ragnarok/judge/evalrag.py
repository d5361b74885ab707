"""``ragnarok eval-rag``: nugget scores (and citation support, reference metrics) of RAG runs, per topic and
as means with 95 % bootstrap intervals, one row per run, with a paired test between the first run and each
other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragnarok.judge.answers import Answer, SegmentText
from ragnarok.judge.nuggets import SCORES, Nugget, TopicNuggets, nugget_scores
from ragnarok.judge.reference import reference_scores
from ragnarok.judge.service import Judge, run_all
from ragnarok.judge.stats import Interval, PairedTest, bootstrap, paired_test
from ragnarok.judge.support import support_scores


@dataclass
class TopicResult:
    qid: str
    scores: dict[str, float]
    nuggets: list[Nugget] = field(default_factory=list)  # with their assignments
    failed: int = 0  # labels the judge could not give (scored as not_support)
    labels: list[str | None] = field(default_factory=list)  # the judge's nugget labels, None where it failed
    support: list[list[str | None]] | None = None


@dataclass
class RunResult:
    name: str
    topics: dict[str, TopicResult]
    skipped: list[str]  # answered topics without nuggets (or references)
    missing_segments: int = 0

    def per_topic(self, metric: str) -> dict[str, float]:
        return {q: t.scores[metric] for q, t in self.topics.items() if metric in t.scores}

    def means(self, metrics: Sequence[str], resamples: int = 1000) -> dict[str, Interval]:
        return {m: bootstrap(list(v.values()), resamples) for m in metrics if (v := self.per_topic(m))}


SUPPORT_MODES = ("all", "trec24")
TREC24_CITATIONS = 3  # the TREC 2024 support evaluation judged a sentence's first three citations


def judge_topic(
    judge: Judge,
    answer: Answer,
    nuggets: TopicNuggets | None,
    references: list[str] | None,
    segments: SegmentText | None,
    geval: bool = False,
    support_mode: str = "all",
) -> tuple[TopicResult, int]:
    """Every judgment of one answer; the second value counts cited segments whose text was not found.
    ``support_mode``: ``all`` judges every citation; ``trec24`` a sentence's first three, as TREC 2024 did
    (give it ``title: segment`` passages, :func:`~ragnarok.judge.answers.lucene_segments`)."""
    scores: dict[str, float] = {}
    assigned: list[Nugget] = []
    failed = missing = 0
    labels: list[str | None] = []
    query = answer.query or (nuggets.query if nuggets else "")
    if nuggets is not None:
        labels = judge.assign(query, answer.text, [n.text for n in nuggets.nuggets]) if nuggets.nuggets else []
        failed = sum(label is None for label in labels)
        assigned = [
            n.model_copy(update={"assignment": label or "not_support"}) for n, label in zip(nuggets.nuggets, labels)
        ]
        scores.update(nugget_scores(assigned))
    support = None
    if segments is not None:
        support = []
        for text, citations in answer.sentences:
            row: list[str | None] = []
            for c in citations[:TREC24_CITATIONS] if support_mode == "trec24" else citations:
                passage = segments(answer.references[c]) if 0 <= c < len(answer.references) else None
                if passage is None:
                    missing += 1
                    row.append(None)
                else:
                    row.append(judge.support(text, passage))
            support.append(row)
        scores.update(support_scores(support))
    if references:
        scores.update(reference_scores(answer.text, references))
    if geval:
        ratings = judge.geval(query, answer.text)
        failed += sum(v is None for v in ratings.values())
        scores.update({f"geval_{k}": float(v) for k, v in ratings.items() if v is not None})
    return TopicResult(answer.qid, scores, assigned, failed, support=support, labels=labels), missing


def evaluate_run(
    name: str,
    answers: Mapping[str, Answer],
    judge: Judge,
    *,
    nuggets: Mapping[str, TopicNuggets] | None = None,
    segments: SegmentText | None = None,
    references: Mapping[str, list[str]] | None = None,
    geval: bool = False,
    concurrency: int = 4,
    progress: bool | None = None,
    support_mode: str = "all",
) -> RunResult:
    """Judge every answered topic that has nuggets (or references, or, with ``segments``, citations);
    topics with nothing to judge against are skipped and listed."""
    todo, skipped = _to_judge(answers, nuggets, references)
    if (prefetch := getattr(judge, "prefetch", None)) is not None:  # the proxy: every text encoded at once
        segments = _remembered(segments) if segments is not None else None
        prefetch(**_prefetch_items(todo, nuggets=nuggets, segments=segments, support_mode=support_mode))
    done = run_all(
        todo,
        lambda a: judge_topic(
            judge,
            a,
            nuggets.get(a.qid) if nuggets else None,
            references.get(a.qid) if references else None,
            segments,
            geval,
            support_mode,
        ),
        concurrency,
        f"judging {name}",
        judge,
        progress,
    )
    return RunResult(name, {r.qid: r for r, _ in done}, skipped, sum(m for _, m in done))


def _to_judge(
    answers: Mapping[str, Answer],
    nuggets: Mapping[str, TopicNuggets] | None,
    references: Mapping[str, list[str]] | None,
) -> tuple[list[Answer], list[str]]:
    """The answers to judge, in topic order, and the topics skipped (nothing to judge them against)."""
    todo, skipped = [], []
    for qid, answer in sorted(answers.items()):
        if (nuggets is not None and qid not in nuggets) or (references is not None and qid not in references):
            skipped.append(qid)
        else:
            todo.append(answer)
    return todo, skipped


def prefetch_runs(
    judge: Judge,
    runs: Sequence[Mapping[str, Answer]],
    *,
    nuggets: Mapping[str, TopicNuggets] | None = None,
    segments: SegmentText | None = None,
    references: Mapping[str, list[str]] | None = None,
    support_mode: str = "all",
) -> SegmentText | None:
    """The judge's ``prefetch`` (the proxy's) for every run at once, before :func:`evaluate_run` judges them
    one by one: the texts of all runs go to the encoder in one call (full batches, longest first) rather than
    one call per run; each run's own prefetch then finds them done. Labels are the same as without it. Returns
    ``segments`` looked up once per docid (give it to :func:`evaluate_run`), or None without ``segments``."""
    segments = _remembered(segments) if segments is not None else None
    if (prefetch := getattr(judge, "prefetch", None)) is not None:
        todo = [a for answers in runs for a in _to_judge(answers, nuggets, references)[0]]
        prefetch(**_prefetch_items(todo, nuggets=nuggets, segments=segments, support_mode=support_mode))
    return segments


def _remembered(segments: SegmentText) -> SegmentText:
    """``segments`` looked up once per docid (the prefetch and the judging ask for the same ones)."""
    seen: dict[str, str | None] = {}

    def text(docid: str) -> str | None:
        if docid not in seen:
            seen[docid] = segments(docid)
        return seen[docid]

    return text


def _prefetch_items(
    answers: Sequence[Answer],
    nuggets: Mapping[str, TopicNuggets] | None,
    segments: SegmentText | None,
    support_mode: str,
) -> dict[str, list]:
    """What :func:`judge_topic` will ask of the judge for each answer: ``assign`` and ``support`` items for
    the judge's ``prefetch``."""
    assign, support = [], []
    for answer in answers:
        topic = nuggets.get(answer.qid) if nuggets is not None else None
        if topic is not None and topic.nuggets:
            assign.append((answer.query or topic.query, answer.text, [n.text for n in topic.nuggets]))
        if segments is not None:
            for text, citations in answer.sentences:
                for c in citations[:TREC24_CITATIONS] if support_mode == "trec24" else citations:
                    passage = segments(answer.references[c]) if 0 <= c < len(answer.references) else None
                    if passage is not None:
                        support.append((text, passage))
    return {"assign": assign, "support": support}


def metrics_of(runs: Sequence[RunResult]) -> list[str]:
    from ragnarok.judge.reference import METRICS

    present = {m for run in runs for t in run.topics.values() for m in t.scores}
    from ragnarok.judge.llm import GEVAL  # noqa: PLC0415

    ordered = (*SCORES, "support_precision", "support_recall", *METRICS, *(f"geval_{k}" for k in GEVAL))
    return [m for m in ordered if m in present]


def format_report(runs: Sequence[RunResult], metrics: Sequence[str], resamples: int = 1000) -> str:
    """One row per run: topics, then each metric's mean and 95 % bootstrap interval."""
    head = ["run", "topics", *metrics, "failed"]
    rows = []
    for run in runs:
        means = run.means(metrics, resamples)
        rows.append(
            [
                run.name,
                str(len(run.topics)),
                *(
                    f"{means[m].mean:.4f} [{means[m].low:.3f},{means[m].high:.3f}]" if m in means else "-"
                    for m in metrics
                ),
                str(sum(t.failed for t in run.topics.values())),
            ]
        )
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [head, *rows])


def on_shared_topics(runs: Sequence[RunResult]) -> tuple[list[RunResult], dict[str, list[str]]]:
    """The runs restricted to the topics every one of them scored (means of 32 topics beside means of 10 compare
    nothing), and per run the topics left out; the runs unchanged when they scored the same topics."""
    if len(runs) < 2:
        return list(runs), {}
    shared = set.intersection(*(set(run.topics) for run in runs))
    left_out = {run.name: sorted(set(run.topics) - shared) for run in runs}
    if not any(left_out.values()):
        return list(runs), {}
    restricted = [
        RunResult(run.name, {q: t for q, t in run.topics.items() if q in shared}, run.skipped, run.missing_segments)
        for run in runs
    ]
    return restricted, {name: qids for name, qids in left_out.items() if qids}


def paired_tests(runs: Sequence[RunResult], metric: str) -> list[PairedTest]:
    """The first run against each other run on ``metric``."""
    base = runs[0]
    return [paired_test(base.name, base.per_topic(metric), other.name, other.per_topic(metric)) for other in runs[1:]]


def assignment_records(
    run: RunResult, answers: Mapping[str, Answer], nuggets: Mapping[str, TopicNuggets]
) -> list[dict[str, object]]:
    """Per topic, nuggetizer's assign output shape (``qid, query, answer_text, run_id, nuggets`` with
    ``assignment``) plus our scores."""
    return [
        {
            "qid": qid,
            "query": nuggets[qid].query if qid in nuggets else answers[qid].query,
            "answer_text": answers[qid].text,
            "run_id": run.name,
            "nuggets": [n.model_dump(exclude_none=True) for n in t.nuggets],
            "scores": t.scores,
        }
        for qid, t in sorted(run.topics.items())
    ]
