"""``ragnarok judge nuggets``: nuggets per topic from its judged-relevant segments or from given candidates,
and the UMBRELA-style relevance labels of ``ragnarok judge relevance``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from ragnarok.judge.nuggets import MAX_NUGGETS, TopicNuggets
from ragnarok.judge.service import Judge, run_all

Search = Callable[[str, int], list[tuple[str, str]]]  # query, k -> [(segment id, text)]


def read_candidates(path: str | Path) -> dict[str, tuple[str, list[str]]]:
    """nuggetizer's create input (rank_llm Request JSONL): ``{"query": {"qid", "text"} | str, "qid"?,
    "candidates": [{"docid", "doc": {"segment"}} | str]}`` -> qid -> (query, segment texts)."""
    out: dict[str, tuple[str, list[str]]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                query = data["query"]
                qid = str(query.get("qid") if isinstance(query, dict) else data.get("qid", n))
                text = query.get("text", "") if isinstance(query, dict) else str(query)
                segments = []
                for c in data.get("candidates", []):
                    doc = c.get("doc", {}) if isinstance(c, dict) else {}
                    body = (
                        c
                        if isinstance(c, str)
                        else (doc.get("segment") or doc.get("contents") or doc.get("text") or "")
                    )
                    title = doc.get("title") if isinstance(doc, dict) else None
                    if body:
                        segments.append(f"{title}: {body}" if title else body)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path}:{n}: expected {{query, candidates}} ({exc!r})") from None
            out[qid] = (text, segments)
    return out


def relevant_segments(
    qrels: Mapping[str, Mapping[str, int]],
    topics: Mapping[str, str],
    min_grade: int,
    segment_text: Callable[[str], str | None],
    search: Search | None,
    depth: int = 100,
) -> dict[str, tuple[str, list[str]]]:
    """Per topic, the text of its judged segments with grade >= ``min_grade``. Document-level judgments
    (ids the index does not hold as segments) take the segments of those documents found in the top
    ``depth`` of ``search`` for the topic."""
    out: dict[str, tuple[str, list[str]]] = {}
    for qid, query in topics.items():
        wanted = {d for d, g in qrels.get(qid, {}).items() if g >= min_grade}
        texts, documents = [], set()
        for docid in sorted(wanted):
            if (text := segment_text(docid)) is not None:
                texts.append(text)
            else:
                documents.add(docid)
        if documents and search is not None:
            texts += [text for sid, text in search(query, depth) if sid.split("#")[0] in documents]
        if texts:
            out[qid] = (query, texts)
    return out


def create_nuggets(
    judge: Judge,
    sources: Mapping[str, tuple[str, list[str]]],
    max_nuggets: int = MAX_NUGGETS,
    concurrency: int = 4,
    progress: bool | None = None,
) -> list[TopicNuggets]:
    items = sorted(sources.items())
    made = run_all(
        items,
        lambda item: judge.create(item[1][0], item[1][1], max_nuggets),
        concurrency,
        "creating nuggets",
        judge,
        progress,
    )
    return [TopicNuggets(qid=qid, query=query, nuggets=nuggets) for (qid, (query, _)), nuggets in zip(items, made)]


def relevance_labels(
    judge: Judge,
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    topics: Mapping[str, str],
    segment_text: Callable[[str], str | None],
    depth: int,
    concurrency: int = 4,
    progress: bool | None = None,
    mode: str = "umbrela",
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """0-3 grades for the top-``depth`` segments of ``run`` the qrels do not judge. Returns the new labels and
    what could not be labelled (no topic text, no segment text, or the judge failed)."""
    todo: list[tuple[str, str, str, str]] = []
    problems: list[str] = []
    for qid, ranking in sorted(run.items()):
        if qid not in topics:
            problems.append(f"{qid}: no topic text")
            continue
        for docid, _ in sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]:
            if docid in qrels.get(qid, {}):
                continue
            if (text := segment_text(docid)) is None:
                problems.append(f"{qid} {docid}: segment not in the index")
                continue
            todo.append((qid, docid, topics[qid], text))
    grades = run_all(todo, lambda t: judge.relevance(t[2], t[3], mode=mode), concurrency, "labelling", judge, progress)
    labels: dict[str, dict[str, int]] = {}
    for (qid, docid, _, _), grade in zip(todo, grades):
        if grade is None:
            problems.append(f"{qid} {docid}: the judge's grade could not be read")
        else:
            labels.setdefault(qid, {})[docid] = grade
    return labels, problems


def write_qrels(path: str | Path, *parts: Mapping[str, Mapping[str, int]]) -> int:
    merged: dict[str, dict[str, int]] = {}
    for part in parts:
        for qid, docs in part.items():
            merged.setdefault(qid, {}).update(docs)
    lines = [f"{qid} 0 {docid} {grade}" for qid in sorted(merged) for docid, grade in sorted(merged[qid].items())]
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def pairwise(judge: Judge, query: str, answer_a: str, answer_b: str) -> str:
    """Judged twice with the sides swapped: A, B, or tie (the two disagree, or a judgment failed)."""
    first = judge.prefer(query, answer_a, answer_b)
    second = judge.prefer(query, answer_b, answer_a)
    swapped = {"A": "B", "B": "A", "tie": "tie"}.get(second or "", None)
    return first if first is not None and first == swapped else "tie"


def pairwise_runs(
    judge: Judge,
    a: Mapping[str, str],
    b: Mapping[str, str],
    queries: Mapping[str, str],
    concurrency: int = 4,
    progress: bool | None = None,
) -> dict[str, str]:
    common = sorted(set(a) & set(b))
    verdicts = run_all(
        common, lambda q: pairwise(judge, queries.get(q, ""), a[q], b[q]), concurrency, "pairwise", judge, progress
    )
    return dict(zip(common, verdicts))


def summarise_pairwise(verdicts: Mapping[str, str], name_a: str, name_b: str) -> str:
    wins = sum(v == "A" for v in verdicts.values())
    losses = sum(v == "B" for v in verdicts.values())
    return (
        f"{name_a} vs {name_b} over {len(verdicts)} topics: {wins} wins, {losses} losses, "
        f"{len(verdicts) - wins - losses} ties"
    )
