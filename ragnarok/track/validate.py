"""``ragnarok validate``: check a submission against the track's rules, and optionally fix what can be fixed.

Errors make the file invalid; warnings (a topic with no answer; a 2025 line without the optional
``metadata.type``, ``narrative`` or ``prompt``: one warning per line and field, worded as the official 2025
validator words them) do not. An empty file is invalid. Words are counted as the official checkers count them
(``ragnarok.core.types.word_count``). ``fix`` rewrites what has one right answer: an answer over 400 words is
trimmed from the end, ``response_length`` recomputed, repeated citations in a sentence dropped, citations
outside ``references`` (< 0 or >= its length) dropped. Everything else (a wrong topic text, a repeated topic, a
missing field) stays an error for a person to look at.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragnarok.core.types import cut_words, word_count
from ragnarok.runtime.quoting import quote
from ragnarok.track.formats import MAX_REFERENCES, MAX_WORDS, RUN_TYPES, record_run_id, record_topic, record_year
from ragnarok.track.output import atomic_write

V21_SEGMENT = re.compile(r"^msmarco_v2\.1_doc_\d+_\d+#\d+_\d+$")
#: 2025 metadata fields the official validator warns about (once per line) when they are missing.
OPTIONAL_METADATA = ("type", "narrative", "prompt")
WINDOW = 30  # characters shown each side of the first difference between two topic texts


def differs(text: str, expected: str) -> str:
    """Where ``text`` first differs from ``expected``: the character offset and a window around it in each."""
    at = next((i for i, (a, b) in enumerate(zip(text, expected)) if a != b), min(len(text), len(expected)))
    start = max(0, at - WINDOW)

    def window(s: str) -> str:
        return ("..." if start else "") + repr(s[start : at + WINDOW]) + ("..." if len(s) > at + WINDOW else "")

    def char(s: str) -> str:
        return repr(s[at]) if at < len(s) else "the end"

    return (
        f"at offset {at} ({char(text)} vs {char(expected)}; lengths {len(text)} and {len(expected)}): "
        f"{window(text)} vs the file's {window(expected)}"
    )


@dataclass(frozen=True)
class Problem:
    level: Literal["error", "warning"]
    message: str
    line: int | None = None
    topic_id: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "file"
        topic = f" (topic {self.topic_id})" if self.topic_id else ""
        return f"{self.level}: {where}{topic}: {self.message}"


@dataclass
class Validation:
    path: Path
    year: int | None = None
    lines: int = 0
    problems: list[Problem] = field(default_factory=list)
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.level == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        verdict = "valid" if self.ok else "INVALID"
        return (
            f"{self.path}: {verdict} TREC RAG {self.year or '?'} run, {self.lines} lines, "
            f"{len(self.errors)} errors, {len(self.warnings)} warnings"
        )


class _Checker:
    def __init__(self, result: Validation, topics: dict[str, str] | None, v21: bool | None):
        self.result, self.topics, self.v21 = result, topics, v21
        self.not_v21: list[tuple[int, int, str]] = []  # (line, references that are not V2.1 ids, the first)

    def not_v21_summary(self) -> None:
        """The references that are not V2.1 segment ids, counted over the whole run in one error (the official
        checkers reject each)."""
        if not self.not_v21:
            return
        refs, (line, _, first) = sum(count for _, count, _ in self.not_v21), self.not_v21[0]
        self.add(
            "error",
            f"{refs} references in {len(self.not_v21)} answers are not MS MARCO V2.1 segment ids "
            f"(msmarco_v2.1_doc_<a>_<b>#<c>_<d>), as the official checkers count them; the first, "
            f"{quote(first, 60)}, on line {line} (--no-v21 allows other docids, for demo runs)",
        )

    def add(
        self, level: Literal["error", "warning"], message: str, line: int | None = None, topic: str | None = None
    ) -> None:
        self.result.problems.append(Problem(level, message, line, topic))

    def fields(self, n: int, record: dict[str, Any], year: int) -> bool:
        """Required fields with the right types; False when the line cannot be checked further."""
        required: dict[str, type | tuple[type, ...]] = {"references": list, "answer": list}
        where: dict[str, Any] = record
        if year == 2024:
            required |= {"run_id": str, "topic_id": str, "topic": str, "response_length": int}
        else:
            meta = record["metadata"]
            for key in ("team_id", "run_id", "narrative_id"):
                if not isinstance(meta.get(key), str) or not meta.get(key):
                    self.add("error", f"metadata.{key} is missing or not a non-empty string", n, record_topic(record))
                    return False
            for key in OPTIONAL_METADATA:  # optional for the official checker: a warning when missing
                if key not in meta:
                    self.add("warning", f"optional field {key!r} is missing from metadata", n, record_topic(record))
            if "type" in meta and meta["type"] not in RUN_TYPES:
                got = quote(meta["type"]) if isinstance(meta["type"], str) else f"a {type(meta['type']).__name__}"
                self.add(
                    "error", f"metadata.type must be one of {', '.join(RUN_TYPES)}, got {got}", n, record_topic(record)
                )
            for key in ("narrative", "prompt"):
                if key in meta and not isinstance(meta[key], str):
                    self.add("error", f"metadata.{key} must be a string", n, record_topic(record))
        for key, kind in required.items():
            value = where.get(key)
            if value is None or not isinstance(value, kind) or isinstance(value, bool):
                self.add(
                    "error", f"{key} is missing or not a {getattr(kind, '__name__', kind)}", n, record_topic(record)
                )
                return False
        for i, sentence in enumerate(record["answer"]):
            if not (
                isinstance(sentence, dict)
                and isinstance(sentence.get("text"), str)
                and isinstance(sentence.get("citations"), list)
                and all(isinstance(c, int) and not isinstance(c, bool) for c in sentence["citations"])
            ):
                self.add(
                    "error", f"answer[{i}] must be {{text: string, citations: [integers]}}", n, record_topic(record)
                )
                return False
        if not all(isinstance(r, str) for r in record["references"]):
            self.add("error", "references must be segment id strings", n, record_topic(record))
            return False
        return True

    def answer(self, n: int, record: dict[str, Any], year: int) -> None:
        topic = record_topic(record)
        refs: list[str] = record["references"]
        if len(refs) > MAX_REFERENCES[year]:
            self.add("error", f"{len(refs)} references; at most {MAX_REFERENCES[year]} in {year}", n, topic)
        repeated = [r for r, k in Counter(refs).items() if k > 1]
        if repeated:
            self.add("error", f"repeated references: {', '.join(repeated[:5])}", n, topic)
        if self.v21:
            bad = [r for r in refs if not V21_SEGMENT.match(r)]
            if bad:
                self.not_v21.append((n, len(bad), bad[0]))
        for i, sentence in enumerate(record["answer"]):
            cites = sentence["citations"]
            outside = [c for c in cites if not 0 <= c < len(refs)]
            if outside:
                self.add("error", f"answer[{i}] cites {outside} outside references (0..{len(refs) - 1})", n, topic)
            if len(set(cites)) != len(cites):
                self.add("error", f"answer[{i}] repeats a citation: {cites}", n, topic)
        words = sum(word_count(s["text"]) for s in record["answer"])
        if "response_length" in record and record["response_length"] != words:
            self.add(
                "error", f"response_length is {record['response_length']} but the answer has {words} words", n, topic
            )
        if words > MAX_WORDS:
            self.add("error", f"answer has {words} words; at most {MAX_WORDS} (--fix trims it)", n, topic)
        if not record["answer"]:
            self.add("warning", "empty answer", n, topic)

    def topic_text(self, n: int, record: dict[str, Any], year: int) -> None:
        topic = record_topic(record)
        if self.topics is None or topic is None:
            return
        if topic not in self.topics:
            self.add("error", f"topic {topic!r} is not in the topic file", n, topic)
            return
        text = record["topic"] if year == 2024 else record["metadata"].get("narrative")
        if isinstance(text, str) and text != self.topics[topic]:
            self.add("error", f"topic text differs from the topic file {differs(text, self.topics[topic])}", n, topic)


class NotASubmission(ValueError):
    """A file of another kind (a TREC ranking): said in one line rather than as an error per line."""


def _is_trec_ranking(raw: bytes, sample: int = 20) -> bool:
    """Whether the file's first lines are a TREC run's six columns: ``qid Q0 docid rank score tag``."""
    lines = [line for line in raw[: 1 << 16].split(b"\n")[: sample + 1] if line.strip()][:sample]
    if not lines or lines[0].lstrip().startswith((b"{", b"[")):
        return False
    for line in lines[:-1] if len(lines) > 1 else lines:  # the last may be cut at the sample's end
        fields = line.split()
        if len(fields) != 6:
            return False
        try:
            int(fields[3])
            float(fields[4])
        except ValueError:
            return False
    return True


def validate(
    path: str | Path, topics: dict[str, str] | None = None, year: int | None = None, v21: bool | None = None
) -> Validation:
    """Check every line of a submission. ``topics`` (id -> text) enables the topic checks; ``year`` forces
    the format (default: from the first line); ``v21`` forces the segment-id check (default: on when any
    reference looks like an MS MARCO V2.1 segment)."""
    path = Path(path)
    result = Validation(path, year)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read {path}: {exc.strerror or exc}") from None
    if _is_trec_ranking(raw):
        raise NotASubmission(
            f"{path} is a TREC ranking file (qid Q0 docid rank score tag), not a RAG answer "
            "submission (JSONL): score a ranking with `ragnarok eval QRELS RUN`"
        )
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        result.lines += 1
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            result.problems.append(Problem("error", f"not a JSON line: {exc}", n))
            continue
        if not isinstance(record, dict):
            result.problems.append(Problem("error", "not a JSON object", n))
            continue
        result.records.append((n, record))
    if result.year is None and result.records:
        result.year = record_year(result.records[0][1])
    if v21 is None:
        v21 = any(
            str(r).startswith("msmarco_v2.1_doc_")
            for _, rec in result.records
            for r in (rec.get("references") or [])
            if isinstance(rec.get("references"), list)
        )
    check = _Checker(result, topics, v21)
    run_ids: Counter[str] = Counter()
    seen: dict[str, int] = {}
    for n, record in result.records:
        year_here = record_year(record)
        if year_here != result.year:
            check.add("error", f"a {year_here} line in a {result.year} run", n, record_topic(record))
            continue
        if not check.fields(n, record, year_here):
            continue
        topic = record_topic(record)
        run_ids[record_run_id(record) or ""] += 1
        if topic in seen:
            check.add("error", f"topic answered again (first at line {seen[topic]})", n, topic)
        else:
            seen[topic] = n  # type: ignore[index]
        check.topic_text(n, record, year_here)
        check.answer(n, record, year_here)
    check.not_v21_summary()
    if len(run_ids) > 1:
        check.add("error", f"more than one run_id: {', '.join(sorted(run_ids))}")
    if topics is not None:
        missing = [t for t in topics if t not in seen]
        if missing:
            check.add(
                "warning",
                f"{len(missing)} of {len(topics)} topics have no answer: "
                f"{', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}",
            )
    if result.lines == 0:
        check.add("error", "the run is empty: no answer lines")
    return result


@dataclass(frozen=True)
class Fixed:
    """What :func:`fix` changed: lines, citations dropped for pointing outside ``references``, references
    dropped (repeated, or past 2025's 100), sentences dropped from the end of answers over 400 words, and
    2025 narratives added from the topic file."""

    lines: int = 0
    citations_dropped: int = 0
    references_dropped: int = 0
    sentences_dropped: int = 0
    narratives_added: int = 0

    def __str__(self) -> str:
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.citations_dropped, "out-of-range citations dropped"),
                (self.references_dropped, "repeated or surplus references dropped"),
                (self.sentences_dropped, "sentences dropped from over-long answers"),
                (self.narratives_added, "narratives added"),
            )
            if n
        ]
        return f"{self.lines} lines changed" + "".join(f", {p}" for p in parts)


def fix(validation: Validation, output: str | Path, topics: dict[str, str] | None = None) -> Fixed:
    """Write ``validation``'s lines to ``output`` fixed as the official checkers fix them (their ``.fixed``
    files): repeated references dropped and a 2025 line's kept to its first 100, citations repeated or outside
    ``references`` dropped, answers over 400 words losing whole sentences from the end, ``response_length``
    recomputed, and a 2025 line without ``metadata.narrative`` given the topic's text (with ``topics``).
    Beyond theirs: an answer of one sentence over 400 words is cut to 400 (theirs is left with none), citations are remapped when a repeated reference goes (the 2025 validator leaves them
    pointing at whatever moved into their place), citations keep their order, and lines the 2024 checker leaves
    out of its ``.fixed`` (unknown topic, a field missing) are kept, still reported. Lines that are not JSON
    objects are left out. ``output`` is replaced atomically, and never when it is the input."""
    output = Path(output)
    if output.resolve() == validation.path.resolve():
        raise ValueError(f"--fix writes a new file; {output} is the run being checked")
    totals = Counter[str]()
    lines = []
    for _, record in validation.records:
        fixed, counts = _fixed(record, topics or {})
        totals["lines"] += fixed != record
        totals.update(counts)
        lines.append(json.dumps(fixed, ensure_ascii=False) + "\n")
    atomic_write(output, "".join(lines).encode())
    return Fixed(**totals)


def _fixed(record: dict[str, Any], topics: dict[str, str]) -> tuple[dict[str, Any], Counter[str]]:
    """The record fixed, and what was dropped or added."""
    counts = Counter[str]()
    answer = record.get("answer")
    if not isinstance(answer, list) or not all(isinstance(s, dict) and isinstance(s.get("text"), str) for s in answer):
        return record, counts
    year = record_year(record)
    references = record.get("references")
    refs = references if isinstance(references, list) and all(isinstance(r, str) for r in references) else None
    remap = {i: i for i in range(len(references) if isinstance(references, list) else 0)}
    out = dict(record)
    if refs is not None:
        unique: dict[str, int] = {}
        remap = {i: unique.setdefault(ref, len(unique)) for i, ref in enumerate(refs)}
        kept = list(unique)[: MAX_REFERENCES[2025]] if year == 2025 else list(unique)
        remap = {old: new for old, new in remap.items() if new < len(kept)}
        counts["references_dropped"] += len(refs) - len(kept)
        if kept != refs:
            out["references"] = kept
    sentences = []
    for s in answer:
        given = s.get("citations") or []
        cites = [c for c in given if isinstance(c, int) and not isinstance(c, bool)]
        inside = [remap[c] for c in cites if c in remap]
        counts["citations_dropped"] += len(cites) - len(inside)
        sentences.append({**s, "citations": list(dict.fromkeys(inside))})
    words = sum(word_count(s["text"]) for s in sentences)
    while words > MAX_WORDS and len(sentences) > 1:  # as the official checkers: whole sentences from the end
        words -= word_count(sentences.pop()["text"])
        counts["sentences_dropped"] += 1
    if words > MAX_WORDS:  # one sentence over 400 words: cut to 400 rather than no answer (theirs: none left)
        sentences[0]["text"] = cut_words(sentences[0]["text"], MAX_WORDS)
        words = word_count(sentences[0]["text"])
    out["answer"] = sentences
    if "response_length" in record or year == 2024:
        out["response_length"] = words
    meta = record.get("metadata")
    if year == 2025 and isinstance(meta, dict) and "narrative" not in meta and record_topic(record) in topics:
        out["metadata"] = {**meta, "narrative": topics[record_topic(record)]}  # type: ignore[index]
        counts["narratives_added"] += 1
    return out, counts
