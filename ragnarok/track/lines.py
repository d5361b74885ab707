"""The track's run lines as pydantic models, for their JSON Schemas (``ragnarok schema run-line-2024|2025``).

They accept what the official checkers accept for the fields they check (castorini/ragnarok's 2024 checker and
2025 validator, restated in tests/test_track_parity.py): the required fields, 2024's 20 references at most,
2025's ``metadata.type`` ``automatic`` or ``manual`` when present, citations non-negative integers. What a
schema cannot say is left to ``ragnarok validate``: citations inside ``references``, 400 words by the NFKC
count, known topic ids and their text, MS MARCO V2.1 segment ids. 2025's validator fixes repeated and surplus
(over 100) references rather than refusing them: the schema does not limit them either. Fields the checkers do
not know are allowed, as they allow them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from ragnarok.track.formats import MAX_REFERENCES


class _Line(BaseModel):
    model_config = ConfigDict(extra="allow")


class Sentence(_Line):
    text: str
    citations: list[NonNegativeInt] = Field(description="0-based indices into references.")


class RunLine2024(_Line):
    """One topic's answer in a TREC RAG 2024 submission."""

    run_id: str
    topic_id: str
    topic: str = Field(description="The topic's text, verbatim.")
    references: list[str] = Field(max_length=MAX_REFERENCES[2024], description="Segment ids, unique.")
    response_length: int = Field(description="The answer's words (NFKC count); the checker rewrites a wrong one.")
    answer: list[Sentence]


class Metadata2025(_Line):
    team_id: str
    run_id: str
    narrative_id: str | int
    type: Literal["automatic", "manual"] = Field("automatic", description="Optional (a warning when missing).")
    narrative: str = Field("", description="Optional (a warning when missing).")
    prompt: str = Field("", description="Optional (a warning when missing): the prompt the generator was given.")


class RunLine2025(_Line):
    """One topic's answer in a TREC RAG 2025 submission."""

    metadata: Metadata2025
    references: list[str] = Field(
        default_factory=list,
        description=f"Segment ids; the validator keeps the first {MAX_REFERENCES[2025]} unique ones.",
    )
    answer: list[Sentence] = Field(default_factory=list)
