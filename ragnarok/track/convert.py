"""``ragnarok convert trec25-format IN OUT [--prompts F]``: a TREC RAG 2024 submission (``run_id, topic_id,
topic, references, response_length, answer``) as a 2025 one (``metadata{team_id, run_id, type, narrative_id,
narrative, prompt?}, references, answer``), as castorini/ragnarok's ``convert_to_trec25_format.py`` does, and
then normalised as ``ragnarok run --year 2025`` writes its lines (references unique and at most 100, citations
inside them, at most 400 words), so the output passes ``ragnarok validate`` and the official 2025 validator.

``--prompts``: JSONL, one prompt per topic, in castorini's shape (``{"query": {"qid"}, "rag_exec_summary":
{"prompt"}}``) or a flat one (``{"qid"|"topic_id"|"narrative_id", "prompt"}``, e.g. ``ragnarok prompt
--output json``'s result); a prompt given as chat messages is written as ``role: content`` blocks, as
``run --with-prompt`` writes it. Without a prompt for a topic, its line has none (the 2025 validator warns:
``optional field 'prompt' is missing from metadata``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragnarok.core.types import CitedSentence, RagAnswer
from ragnarok.track.formats import RUN_TYPES, answer_record, record_year
from ragnarok.track.output import atomic_write
from ragnarok.track.prompt import as_text


@dataclass
class Converted:
    lines: int = 0
    prompts: int = 0  # lines given a prompt
    citations_dropped: int = 0  # outside references in the input
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        dropped = f", {self.citations_dropped} out-of-range citations dropped" if self.citations_dropped else ""
        return f"{self.lines} lines converted to the 2025 format, {self.prompts} with a prompt{dropped}"


def read_prompts(path: Path) -> dict[str, str]:
    """Topic id -> prompt text, from ``path`` (see the module docstring); a line of another shape is an error
    naming it."""
    prompts: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {n} is not JSON ({exc.msg})") from None
        record = record.get("result", record) if isinstance(record, dict) else record  # an --output json envelope
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {n} is not a JSON object")
        query = record.get("query")
        qid = (
            query.get("qid")
            if isinstance(query, dict)
            else next((record[k] for k in ("qid", "topic_id", "narrative_id") if k in record), None)
        )
        summary = record.get("rag_exec_summary")
        prompt = summary.get("prompt") if isinstance(summary, dict) else record.get("prompt", record.get("messages"))
        if qid is None or prompt is None:
            raise ValueError(
                f'{path}: line {n} has no topic id and prompt: expected {{"query": {{"qid"}}, '
                '"rag_exec_summary": {"prompt"}} or {"qid", "prompt"}'
            )
        prompts[str(qid)] = prompt if isinstance(prompt, str) else as_text(prompt)
    return prompts


def convert_trec25(
    source: Path,
    target: Path,
    prompts: dict[str, str] | None = None,
    team_id: str | None = None,
    run_type: str = "automatic",
) -> Converted:
    """Write ``source`` (2024 lines) to ``target`` in the 2025 format, at once (atomically); ``source`` is
    never written. A line that is not a 2024 answer is an error naming it, and nothing is written."""
    if run_type not in RUN_TYPES:
        raise ValueError(f"--run-type must be one of {', '.join(RUN_TYPES)}, got {run_type!r}")
    if target.resolve() == source.resolve():
        raise ValueError(f"convert writes a new file; {target} is the input")
    try:
        raw = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OSError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
    done, out = Converted(), []
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        record = _record_2024(source, n, line)
        answer, dropped = _answer(record)
        done.citations_dropped += dropped
        prompt = (prompts or {}).get(str(record["topic_id"]))
        done.prompts += prompt is not None
        out.append(
            answer_record(
                answer,
                year=2025,
                run_id=str(record["run_id"]),
                topic_text=record["topic"],
                team_id=team_id,
                run_type=run_type,
                prompt=prompt,
            )
        )
        done.lines += 1
    if not out:
        raise ValueError(f"{source}: no answer lines to convert")
    if prompts is not None:
        unused = set(prompts) - {str(r["metadata"]["narrative_id"]) for r in out}
        if done.prompts < done.lines:
            done.warnings.append(
                f"{done.lines - done.prompts} of {done.lines} topics have no prompt in the "
                "prompts file: their lines have none"
            )
        if unused:
            done.warnings.append(
                f"{len(unused)} prompts are for topics the run does not answer: {', '.join(sorted(unused)[:5])}"
            )
    atomic_write(target, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out).encode())
    return done


def _record_2024(source: Path, n: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source}: line {n} is not JSON ({exc.msg})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{source}: line {n} is not a JSON object")
    if record_year(record) == 2025:
        raise ValueError(f"{source}: line {n} is already in the 2025 format (it has metadata)")
    missing = [k for k in ("run_id", "topic_id", "topic", "references", "answer") if k not in record]
    if missing:
        raise ValueError(
            f"{source}: line {n} is not a 2024 answer: no {', '.join(missing)} (check it with `ragnarok validate`)"
        )
    answer, refs = record["answer"], record["references"]
    if not (
        isinstance(refs, list)
        and all(isinstance(r, str) for r in refs)
        and isinstance(answer, list)
        and all(
            isinstance(s, dict) and isinstance(s.get("text"), str) and isinstance(s.get("citations", []), list)
            for s in answer
        )
    ):
        raise ValueError(
            f"{source}: line {n}: references must be a list of segment ids and answer a list of {{text, citations}}"
        )
    return record


def _answer(record: dict[str, Any]) -> tuple[RagAnswer, int]:
    """The line as an answer, with the citations outside its references dropped (and how many)."""
    size, dropped, sentences = len(record["references"]), 0, []
    for s in record["answer"]:
        cites = [c for c in s.get("citations", []) if isinstance(c, int) and not isinstance(c, bool) and 0 <= c < size]
        dropped += len(s.get("citations", [])) - len(cites)
        sentences.append(CitedSentence(text=s["text"], citations=cites))
    return RagAnswer(
        topic_id=str(record["topic_id"]), topic=record["topic"], references=record["references"], answer=sentences
    ), dropped
