"""The track's answer formats (2024 and 2025), and the normalisation that makes any answer follow the rules.

Both formats allow at most 400 words (the official checkers' NFKC count), unique references, and citations
inside ``references`` and not repeated within a sentence; normalising here means no submission is rejected by
the track's checkers.

Design notes: docs/internals/track.md.
"""

from __future__ import annotations

from typing import Any

from ragnarok.core.types import CitedSentence, RagAnswer, cut_words, word_count

YEARS = (2024, 2025)
MAX_WORDS = 400
MAX_REFERENCES = {2024: 20, 2025: 100}
RUN_TYPES = ("automatic", "manual")  # 2025 metadata.type: exactly what the official validator accepts


def trim_words(answer: list[CitedSentence], max_words: int = MAX_WORDS) -> list[CitedSentence]:
    """The answer cut from the end to at most ``max_words`` words; a sentence cut in the middle keeps its
    citations."""
    out, left = [], max_words
    for sentence in answer:
        words = word_count(sentence.text)
        if left <= 0:
            break
        if words > left:
            cut = cut_words(sentence.text, left)
            if cut:
                out.append(CitedSentence(text=cut, citations=sentence.citations))
            break
        out.append(sentence)
        left -= words
    return out


def normalise(
    references: list[str], answer: list[CitedSentence], max_references: int, max_words: int = MAX_WORDS
) -> tuple[list[str], list[CitedSentence]]:
    """References without repeats (citations remapped), citations in range and unique per sentence,
    uncited references beyond ``max_references`` dropped, and at most ``max_words`` words."""
    index: dict[str, int] = {}
    remap: dict[int, int] = {}
    for i, ref in enumerate(references):
        remap[i] = index.setdefault(ref, len(index))
    unique = list(index)
    sentences = [
        CitedSentence(text=s.text, citations=list(dict.fromkeys(remap[c] for c in s.citations if c in remap)))
        for s in trim_words(answer, max_words)
    ]
    if len(unique) > max_references:  # keep every cited reference first, then the best uncited ones
        cited = sorted({c for s in sentences for c in s.citations})
        keep = (cited + [i for i in range(len(unique)) if i not in set(cited)])[:max_references]
        keep.sort()
        new = {old: n for n, old in enumerate(keep)}
        unique = [unique[i] for i in keep]
        sentences = [CitedSentence(text=s.text, citations=[new[c] for c in s.citations if c in new]) for s in sentences]
    return unique, sentences


def answer_record(
    answer: RagAnswer,
    *,
    year: int,
    run_id: str,
    topic_text: str,
    team_id: str | None = None,
    run_type: str = "automatic",
    prompt: str | None = None,
) -> dict[str, Any]:
    """The submission line for one topic, already normalised (so it passes ``ragnarok validate``)."""
    if year not in YEARS:
        raise ValueError(f"unknown track year {year}; expected one of {YEARS}")
    references, sentences = normalise(answer.references, answer.answer, MAX_REFERENCES[year])
    body = [s.model_dump(mode="json") for s in sentences]
    if year == 2024:
        return {
            "run_id": run_id,
            "topic_id": str(answer.topic_id),
            "topic": topic_text,
            "references": references,
            "response_length": sum(word_count(s.text) for s in sentences),
            "answer": body,
        }
    if run_type not in RUN_TYPES:
        raise ValueError(f"run type must be one of {RUN_TYPES}, got {run_type!r}")
    metadata = {
        "team_id": team_id or run_id,
        "run_id": run_id,
        "type": run_type,
        "narrative_id": str(answer.topic_id),
        "narrative": topic_text,
    }
    if prompt:
        metadata["prompt"] = prompt
    return {"metadata": metadata, "references": references, "answer": body}


def record_topic(record: dict[str, Any]) -> str | None:
    """The topic id of a submission line of either year (None when it has none)."""
    meta = record.get("metadata")
    value = meta.get("narrative_id") if isinstance(meta, dict) else record.get("topic_id")
    return None if value is None else str(value)


def record_run_id(record: dict[str, Any]) -> str | None:
    meta = record.get("metadata")
    value = meta.get("run_id") if isinstance(meta, dict) else record.get("run_id")
    return None if value is None else str(value)


def record_year(record: dict[str, Any]) -> int:
    """2025 when the line has ``metadata``, else 2024."""
    return 2025 if isinstance(record.get("metadata"), dict) else 2024
