"""What ``ragnarok view`` shows: a run (or two) rendered for people: each topic's answer, every citation resolved to the
cited segment's text (looked up in an index; a docid the index lacks is shown as such) and, given nuggets or
assignments, each nugget's label and the topic's scores. Plain text at 80 columns, or with ``--html`` one
self-contained page (:mod:`ragnarok.viewer.page`)."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ragnarok.core.registry import suggest
from ragnarok.judge.answers import Answer, read_answers
from ragnarok.judge.nuggets import Nugget, json_lines, nugget_scores, read_nuggets, topic_nuggets
from ragnarok.runtime.quoting import quote
from ragnarok.track.formats import record_year

WIDTH = 80
SNIPPET = 160  # characters of a cited segment shown in the terminal


@dataclass(frozen=True)
class Run:
    name: str
    path: Path
    year: int
    run_id: str
    answers: dict[str, Answer]


@dataclass(frozen=True)
class Labels:
    """One topic's nuggets for one run: labelled when they carry assignments."""

    nuggets: list[Nugget]

    @property
    def assessed(self) -> bool:
        return any(n.assignment is not None for n in self.nuggets)

    @property
    def scores(self) -> dict[str, float] | None:
        if not self.assessed:
            return None
        return nugget_scores([n.model_copy(update={"assignment": n.assignment or "not_support"}) for n in self.nuggets])


@dataclass
class View:
    runs: list[Run]
    qids: list[str]
    segments: dict[str, str | None] = field(default_factory=dict)  # docid -> text (None: not in the index)
    labels: list[dict[str, Labels]] = field(default_factory=list)  # per run: qid -> nuggets

    def differs(self, qid: str) -> str:
        """Why two runs differ on a topic ('' when they do not, or when there is one run)."""
        if len(self.runs) < 2:
            return ""
        answers = [run.answers.get(qid) for run in self.runs]
        if any(a is None for a in answers):
            return "answered by one run only"
        why = []
        if len({frozenset(cited(a)) for a in answers if a}) > 1:
            why.append("cites differently")
        first, second = (labels[qid].scores if qid in labels else None for labels in self.labels)
        if first is not None and second is not None and abs(first["all"] - second["all"]) > 1e-9:
            why.append(f"scores differ ({first['all']:.2f} vs {second['all']:.2f})")
        return "; ".join(why)

    def topics(self) -> list[tuple[str, str, list[RunAnswer | None]]]:
        """Per topic: its id, its query (the first run's that has one) and each run's answer with its labels
        (None where that run has no answer)."""
        out = []
        for qid in self.qids:
            answers = [
                None if (a := run.answers.get(qid)) is None else RunAnswer(a, labels.get(qid))
                for run, labels in zip(self.runs, self.labels)
            ]
            query = next((r.answer.query for r in answers if r is not None and r.answer.query), "")
            out.append((qid, query, answers))
        return out


class RunAnswer(NamedTuple):
    """One run's answer to a topic, and its nuggets for that topic (None: none given)."""

    answer: Answer
    labels: Labels | None


def cited(answer: Answer) -> list[str]:
    """The docids an answer's sentences cite, in first-cited order."""
    refs = answer.references
    return list(dict.fromkeys(refs[c] for _, cs in answer.sentences for c in cs if 0 <= c < len(refs)))


def read_run(path: Path) -> Run:
    """A 2024 or 2025 run file; a missing file, a file that is not JSONL or JSONL that is not a run is a
    ValueError (with a hint when the file looks like something else the command takes)."""
    if not path.is_file():
        siblings = [p.name for p in path.parent.glob("*.jsonl")] if path.parent.is_dir() else []
        near = suggest(path.name, siblings)
        hint = f"; did you mean {path.parent / near}?" if near else ""
        raise ValueError(f"no such run file: {path}{hint}")
    first = None
    try:
        first = next(json_lines(path), (None, None))[1]
        if not isinstance(first, dict):
            raise ValueError(f"{path}: empty, or a line that is no JSON object")
        answers = read_answers(path)
    except ValueError as exc:
        hint = ""
        if isinstance(first, dict) and "nuggets" in first and "qid" in first:
            hint = (
                "; it looks like a nugget file: give it with --assignments"
                if any(isinstance(n, dict) and "assignment" in n for n in first["nuggets"] or [])
                else "; it looks like a nugget file: give it with --nuggets"
            )
        raise ValueError(f"{exc}: not a TREC RAG run (2024 or 2025 format){hint}") from None
    meta = first.get("metadata")
    run_id = (meta if isinstance(meta, dict) else first).get("run_id") or path.stem
    return Run(path.name, path, record_year(first), str(run_id), answers)


def read_assignments(path: Path, runs: list[Run]) -> list[dict[str, Labels]]:
    """Per run, qid -> labelled nuggets from an assignments file (``eval-rag --assignments``, nuggetizer's
    assign output, or judge-dev's labels): a line tagged ``run_id`` (or ``variant``) goes to the run with that
    run id or file name; untagged lines, or a file with one tag only, go to every run."""
    tagged: dict[str | None, dict[str, Labels]] = {}
    for where, data in json_lines(path):
        topic = topic_nuggets(data, where)
        tag = data.get("run_id", data.get("variant"))
        tagged.setdefault(None if tag is None else str(tag), {})[topic.qid] = Labels(topic.nuggets)
    if not any(labels.assessed for group in tagged.values() for labels in group.values()):
        raise ValueError(f"{path}: no nugget carries an assignment; a nugget file without labels goes to --nuggets")
    out = []
    for run in runs:
        names = {run.run_id, run.name, run.path.stem}
        chosen = next((tagged[t] for t in tagged if t in names), None)
        if chosen is None:
            chosen = tagged.get(None) or (next(iter(tagged.values())) if len(tagged) == 1 else {})
        out.append(chosen)
    if not any(set(group) & set(run.answers) for group, run in zip(out, runs)):
        raise ValueError(
            f"{path}: no assignment is for a topic and run given (tags: "
            f"{', '.join(sorted(str(t) for t in tagged))[:200]})"
        )
    return out


def chosen_topics(topics: str | None, runs: list[Run], resolve: Callable[[str], list[str]]) -> list[str]:
    """The topics to show, in the first run's order: all, or ``topics`` (comma-separated ids, or a topic
    set/file as ``--topics`` takes it elsewhere, resolved by ``resolve``). An id no run answers is an
    error."""
    answered = list(dict.fromkeys(q for run in runs for q in run.answers))
    if topics is None:
        return answered
    pieces = [p.strip() for p in topics.split(",") if p.strip()]
    if not any(p in answered for p in pieces):
        try:
            wanted = set(resolve(topics))
        except (FileNotFoundError, ValueError):
            wanted = None
        if wanted is not None:
            shown = [q for q in answered if q in wanted]
            if not shown:
                raise ValueError(f"none of the {len(wanted)} topics of {quote(topics)} is in the run")
            return shown
    for piece in pieces:
        if piece not in answered:
            near = suggest(piece, answered)
            hint = (
                f"; did you mean {near}?"
                if near
                else " (--topics takes topic ids, comma-separated, or a topic set or file)"
            )
            raise ValueError(
                f"topic {quote(piece)} is not in {runs[0].name}{' or ' + runs[1].name if len(runs) > 1 else ''}{hint}"
            )
    return list(dict.fromkeys(pieces))


def load_view(
    paths: list[Path],
    topics: str | None,
    nuggets: Path | None,
    assignments: Path | None,
    segment_text: Callable[[], Callable[[str], str | None]],
    resolve: Callable[[str], list[str]],
) -> View:
    """Everything the page or the terminal shows: bad input fails before the index is opened."""
    runs = [read_run(path) for path in paths]
    if len(runs) == 2 and runs[0].name == runs[1].name:
        runs[1] = dataclasses.replace(runs[1], name=f"{runs[1].path.parent.name}/{runs[1].name}")
    view = View(runs, chosen_topics(topics, runs, resolve))
    if assignments is not None:
        view.labels = read_assignments(assignments, runs)
    elif nuggets is not None:
        try:
            plain = {qid: Labels(t.nuggets) for qid, t in read_nuggets(nuggets).items()}
        except ValueError as exc:
            twice = "appears twice" in str(exc)
            hint = "; labels of several runs? give them with --assignments" if twice else ""
            raise ValueError(f"{exc}{hint}") from None
        view.labels = [plain for _ in runs]
    else:
        view.labels = [{} for _ in runs]
    text = segment_text()
    for qid in view.qids:
        for run in runs:
            if (answer := run.answers.get(qid)) is not None:
                for docid in answer.references:
                    if docid not in view.segments:
                        view.segments[docid] = text(docid)
    return view


def _wrap(text: str, indent: str, first: str = "") -> list[str]:
    lines = textwrap.wrap(
        " ".join(text.split()),
        WIDTH,
        initial_indent=indent + first,
        subsequent_indent=indent + " " * len(first),
        break_on_hyphens=False,
    )
    return lines or [indent + first.rstrip()]


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1].rstrip() + "…"


def score_line(scores: dict[str, float]) -> str:
    return " · ".join(f"{name} {value:.2f}" for name, value in scores.items())


def topic_text(view: View, qid: str) -> list[str]:
    """One topic in plain text, every run's answer in turn."""
    answers = [run.answers.get(qid) for run in view.runs]
    query = next((a.query for a in answers if a and a.query), "")
    lines = _wrap(query, "", f"== {qid}: ")
    if why := view.differs(qid):
        lines.append(f"   ≠ the runs differ: {why}")
    for run, answer, labels in zip(view.runs, answers, view.labels):
        if len(view.runs) > 1:
            lines.append(f"-- {run.name}")
        if answer is None:
            lines.append("   (no answer in this run)")
            continue
        shown_above: set[str] = set()
        for number, (sentence, citations) in enumerate(answer.sentences, 1):
            lines += _wrap(sentence, "  ", f"{number}. ")
            for c in citations:
                docid = answer.references[c] if 0 <= c < len(answer.references) else None
                if docid is None:
                    lines.append(f"       [{c}] (no such reference: the run has {len(answer.references)})")
                    continue
                text = view.segments.get(docid)
                shown = (
                    "(not in the index)"
                    if text is None
                    else "(shown above)"
                    if docid in shown_above
                    else _snippet(text)
                )
                shown_above.add(docid)
                lines += _wrap(f"{docid}: {shown}", "       ", f"[{c}] ")
        if (topic := labels.get(qid)) is not None:
            if (scores := topic.scores) is not None:
                lines.append(f"   scores: {score_line(scores)}")
            lines.append("   nuggets:")
            for n in topic.nuggets:
                lines += _wrap(n.text, "     ", f"{n.assignment or '-':<15} {n.importance:<6} ")
    return lines


def terminal(view: View) -> str:
    head = [f"{run.name}: TREC RAG {run.year} run {run.run_id!r}, {len(run.answers)} topics" for run in view.runs]
    body = [line for qid in view.qids for line in ["", *topic_text(view, qid)]]
    return "\n".join(head + body) + "\n"


def view_json(view: View) -> str:
    """The page's data: runs, topics (each run's sentences, references, nuggets, scores, the diff) and the
    cited segments' texts once each. Safe inside ``<script>``: ``<``, ``>`` and ``&`` are escaped."""
    topics = [
        {
            "q": qid,
            "t": query,
            "d": view.differs(qid),
            "a": [
                None
                if r is None
                else {
                    "s": [[text, cs] for text, cs in r.answer.sentences],
                    "r": r.answer.references,
                    "n": [[n.text, n.importance, n.assignment] for n in r.labels.nuggets] if r.labels else None,
                    "sc": r.labels.scores if r.labels else None,
                }
                for r in answers
            ],
        }
        for qid, query, answers in view.topics()
    ]
    data = {
        "runs": [{"name": r.name, "year": r.year, "id": r.run_id} for r in view.runs],
        "docs": view.segments,
        "topics": topics,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
