"""Nugget files and the four AutoNuggetizer scores.

A nugget file is JSONL, one topic a line: ``{"qid", "query", "nuggets": [{"text", "importance"}]}`` with
``importance`` ``vital`` or ``okay`` -- castorini/nuggetizer's create output, so files flow both ways. Reading
also takes nuggetizer's other shapes: ``query`` as ``{"qid", "text"}``, and assign output (nuggets carrying an
``assignment``, kept).

The scores are nuggetizer's ``calculate_nugget_scores``: strict vital (vital nuggets labelled ``support`` over
vital nuggets), vital (``partial_support`` counts 0.5), strict all and all; a set with no vital nugget scores
0 on the vital scores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

Importance = Literal["vital", "okay"]
Assignment = Literal["support", "partial_support", "not_support"]
ASSIGNMENTS: tuple[str, ...] = ("support", "partial_support", "not_support")
SCORES = ("strict_vital", "vital", "strict_all", "all")
MAX_NUGGETS = 30


class Nugget(BaseModel):
    text: str = Field(min_length=1)
    importance: Importance = "okay"
    assignment: Assignment | None = None

    @field_validator("importance", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class TopicNuggets(BaseModel):
    qid: str
    query: str = ""
    nuggets: list[Nugget]


def topic_nuggets(data: object, where: str) -> TopicNuggets:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    query, qid = data.get("query", ""), data.get("qid")
    if isinstance(query, dict):  # nuggetizer's create input: {"qid", "text"}
        qid, query = qid if qid is not None else query.get("qid"), query.get("text", "")
    if qid is None:
        raise ValueError(f"{where}: no qid")
    try:
        return TopicNuggets(qid=str(qid), query=str(query or ""), nuggets=data.get("nuggets", []))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{where}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def json_lines(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` for each non-blank line of a JSONL file; ``where`` is ``path:line`` for messages.
    A line that is not JSON is a ValueError naming it."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            yield f"{path}:{n}", record


def read_nuggets(path: str | Path) -> dict[str, TopicNuggets]:
    """A nugget file (ours or nuggetizer's) by qid; a line that is no nugget set is a ValueError naming it."""
    out: dict[str, TopicNuggets] = {}
    for where, data in json_lines(path):
        topic = topic_nuggets(data, where)
        if topic.qid in out:
            raise ValueError(f"{where}: topic {topic.qid} appears twice")
        out[topic.qid] = topic
    return out


def nugget_record(topic: TopicNuggets) -> dict[str, object]:
    """One line of a nugget file (assignments only where set, as nuggetizer writes them)."""
    return {"qid": topic.qid, "query": topic.query, "nuggets": [n.model_dump(exclude_none=True) for n in topic.nuggets]}


def write_nuggets(path: str | Path, topics: Iterable[TopicNuggets]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(nugget_record(topic), ensure_ascii=False) + "\n" for topic in topics)


def nugget_scores(nuggets: Sequence[Mapping[str, object] | Nugget]) -> dict[str, float]:
    """The four scores of one answer's assigned nuggets, exactly as nuggetizer's ``calculate_nugget_scores``."""
    rows = [n.model_dump() if isinstance(n, Nugget) else dict(n) for n in nuggets]
    vital = [n for n in rows if n["importance"] == "vital"]

    def credit(group: list[dict[str, object]], partial: float) -> float:
        return sum(
            1.0 if n["assignment"] == "support" else partial if n["assignment"] == "partial_support" else 0.0
            for n in group
        )

    def ratio(value: float, group: list[dict[str, object]]) -> float:
        return value / len(group) if group else 0.0

    return {
        "strict_vital": ratio(credit(vital, 0.0), vital),
        "vital": ratio(credit(vital, 0.5), vital),
        "strict_all": ratio(credit(rows, 0.0), rows),
        "all": ratio(credit(rows, 0.5), rows),
    }
