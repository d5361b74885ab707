"""The standardized data model shared by every service.

``Request`` is byte-compatible with rank_llm's Request JSON (``{"query": {"text", "qid"}, "candidates":
[{"docid", "score", "doc": {...}}]}``): a file written by rank_llm loads here and dumps back unchanged
(``Request.model_validate_json(s).to_json() == s`` for compact JSON), and ours load in rank_llm.
``RagAnswer`` is the TREC RAG answer format; ``word_count`` is the one definition of ``response_length``.

Input is taken as the JSON type it is: a number is not read from a string (``"5"``) or a boolean (``true``),
and an id from a boolean or a float; ids (``qid``, ``topic_id``) have at most ``MAX_ID_CHARS`` characters.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

#: An id (a query's ``qid``, an answer's ``topic_id``) has at most this many characters.
MAX_ID_CHARS = 256


def _refusing(kinds: tuple[type, ...], error: str, message: str) -> BeforeValidator:
    """Refuse values of ``kinds`` rather than convert them (pydantic's lax mode reads ``true`` as 1 and ``"5"``
    as 5); everything else is validated as usual."""

    def check(value: Any) -> Any:
        if isinstance(value, kinds):
            raise PydanticCustomError(error, message)
        return value

    return BeforeValidator(check)


def _short_id(value: str | int) -> str | int:
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        raise PydanticCustomError(
            "string_too_long", "String should have at most {max_length} characters", {"max_length": MAX_ID_CHARS}
        )
    return value


#: An integer: not a boolean, not a string of digits.
Integer = Annotated[int, _refusing((bool, str), "int_type", "Input should be a valid integer")]
#: An index (a citation): an integer, not a boolean, a string of digits nor a float such as 0.0.
Index = Annotated[int, _refusing((bool, str, float), "int_type", "Input should be a valid integer")]
#: A number, integer or not: not a boolean, not a string.
Number = Annotated[float, _refusing((bool, str), "float_type", "Input should be a valid number")]
#: An id given as a string (at most MAX_ID_CHARS characters) or an integer: not a boolean, not a float.
Id = Annotated[
    str | int, _refusing((bool, float), "id_type", "Input should be a string or an integer"), AfterValidator(_short_id)
]
#: A bounded string id.
ShortStr = Annotated[str, Field(max_length=MAX_ID_CHARS)]


def word_count(text: str) -> int:
    """The one definition of ``response_length`` in this project: the TREC RAG checkers' count, whitespace
    words of the NFKC-normalised text (``isn´t`` is two words: NFKC makes ``´`` a space and an accent).

    Both official checkers of castorini/ragnarok count this way (``check_trec_rag24_gen.py`` and
    ``validate_trec_rag25_gen.py``: ``len(unicodedata.normalize("NFKC", text.strip()).split())``)."""
    return len(unicodedata.normalize("NFKC", text).split())


def cut_words(text: str, max_words: int) -> str:
    """``text`` kept up to its last whole whitespace token that fits in ``max_words`` words (``word_count``);
    the kept tokens are joined by single spaces. A token that NFKC splits in two counts as two."""
    kept, left = [], max_words
    for token in text.split():
        n = word_count(token)
        if n > left:
            break
        kept.append(token)
        left -= n
    return " ".join(kept)


class _Model(BaseModel):
    def to_json(self) -> str:
        """Compact JSON holding the fields that were set (so foreign files round-trip byte for byte)."""
        return json.dumps(self.model_dump(mode="json", exclude_unset=True), ensure_ascii=False)


class Query(_Model):
    text: str
    qid: Id = ""


class Doc(_Model):
    """A segment's stored fields; extra keys (rank_llm's ``contents``, say) are kept as they are."""

    model_config = ConfigDict(extra="allow")

    segment: str | None = None
    title: str | None = None
    url: str | None = None
    headings: str | None = None
    start_char: Integer | None = None
    end_char: Integer | None = None


class Candidate(_Model):
    docid: str
    score: Number
    doc: Doc = Field(default_factory=Doc)


class Request(_Model):
    """A query and its ranked candidates: what the R service returns and the AG service consumes."""

    query: Query
    candidates: list[Candidate] = Field(default_factory=list)


class CitedSentence(_Model):
    text: str
    citations: list[Index] = Field(default_factory=list)


class RagAnswer(_Model):
    """The TREC RAG answer: sentences citing 0-based indices into ``references`` (segment ids)."""

    topic_id: ShortStr
    topic: str
    references: list[str] = Field(default_factory=list)
    response_length: Integer = 0
    answer: list[CitedSentence] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "RagAnswer":
        for sentence in self.answer:
            for c in sentence.citations:
                if not 0 <= c < len(self.references):
                    raise ValueError(f"citation {c} is outside references (0..{len(self.references) - 1})")
        return self

    @classmethod
    def build(cls, topic_id: str, topic: str, references: list[str], answer: list[CitedSentence]) -> "RagAnswer":
        """An answer with ``response_length`` computed from its sentences."""
        length = sum(word_count(s.text) for s in answer)
        return cls(topic_id=topic_id, topic=topic, references=references, response_length=length, answer=answer)


class PromptTemplate(BaseModel):
    """A prompt template (:mod:`ragnarok.stages.generate.prompts` loads them): a core type, since the
    :class:`~ragnarok.core.protocols.Generator` protocol names it."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    system: str
    user: str
    context_format: str = "[{i}] {title}: {text}"
    max_words: int = 400

    def format_context(self, i: int, title: str, text: str, docid: str = "") -> str:
        """One numbered context; without a title, ``{title}: `` is left out of the format."""
        fmt = self.context_format
        if not title:
            fmt = fmt.replace("{title}: ", "").replace("{title}", "")
        return fmt.format(i=i, title=title, text=text, docid=docid).rstrip()
