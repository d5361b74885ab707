"""Splitting text into sentences, shared below the stages (core): the segmenter's sentence spans (the index
builder and ``compress``), and the prose sentences of a segment (the extractive generator chooses from them, the
sentence store keeps their vectors), with code lines told apart from prose (also post-processing's).

Sentences come from blingfire (a compiled, offline splitter); a blank line always ends a sentence.
"""

from __future__ import annotations

import re
from functools import lru_cache

import blingfire

from ragnarok.core.types import word_count

MIN_WORDS, MAX_WORDS = 5, 60
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\s*\n[ \t]*\n|\s*$)", re.S)


def sentence_spans(body: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``body``, paragraph by paragraph."""
    spans = []
    for paragraph in _PARAGRAPH.finditer(body):
        _, offsets = blingfire.text_to_sentences_and_offsets(paragraph.group(0))
        spans.extend((paragraph.start() + a, paragraph.start() + b) for a, b in offsets if b > a)
    return spans


CODE_LINE = re.compile(
    r"^(?:>>>|\.\.\.(?:\s|$)|\$ |[=\-~^*#+|]{3,}|\||\+-"  # doctest and shell prompts, tables, rules
    r"|(?:def|class|import|from\s+\S+\s+import|return|raise|yield|elif|else:|try:|except\b|finally:|with\s.*:$)"
    r"|[\w.\[\]'\"]+\s*(?:[-+*/|&]?=)\s*\S"  # an assignment: x = 1, a.b += c
    r"|[\w.]+\(.*\)\s*[;:]?$"  # a bare call or signature: foo(a, b)
    r"|[@{}<]|[\])}]+[,;]?$)"
)


def is_code(line: str, min_letters: float = 0.55) -> bool:
    """Whether a line is code, a prompt, a table rule or (under ``min_letters`` of letters) mostly symbols."""
    s = line.strip()
    if not s:
        return False
    letters = sum(map(str.isalpha, s))
    return bool(CODE_LINE.match(s)) or letters < min_letters * len(s.replace(" ", ""))


_NOT_PROSE = re.compile(r">>>|<\w+>|\s--\s.*\s--\s|\(\).*\(\)|\|")
_BULLET = re.compile(r"^[-*•]\s+")
_ENDS = re.compile(r"[.!?][\"')\]]*$")
#: A line that starts with a name and a colon (``gzip.open: Open a ...``, a module's contents listing). A line
#: break after a sentence end, or before such a line, ends a sentence: wrapped lines are joined before blingfire
#: splits them, and blingfire does not split before a lowercase word (``string. gzip.open: Open``), so without
#: it one line's last sentence and the next line's first came out as one sentence, and the first of them again
#: on its own from an overlapping window that starts between them.
_HEADED = re.compile(r"^[A-Za-z_][\w.]*: \S")


def _is_prose(sentence: str, strict: bool = True) -> bool:
    """A whole sentence of prose: 5-60 words, ending as sentences end, mostly letters, no code in it
    (``strict=False``: 3-60 words and any ending, for segments that hold no punctuated sentence at all)."""
    s = sentence.strip()
    least = MIN_WORDS if strict else 3
    if not least <= word_count(s) <= MAX_WORDS or (strict and not _ENDS.search(s)) or _NOT_PROSE.search(s):
        return False
    return sum(map(str.isalpha, s)) >= 0.7 * len(s.replace(" ", ""))


def prose_sentences(text: str, strict: bool = True) -> list[str]:
    """The segment's prose sentences, in order (code lines and fragments left out, see
    :mod:`ragnarok.stages.generate.extractive`; ``strict=False`` keeps unpunctuated runs of words too). Remembered for the
    last few thousand segments: the same segments come back across topics, battles and runs."""
    return list(_prose_sentences(text, strict))


@lru_cache(maxsize=4096)
def _prose_sentences(text: str, strict: bool) -> tuple[str, ...]:
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or is_code(line):
            flush()
            continue
        if _HEADED.match(stripped):  # "gzip.open: Open a ..." (a listing's entry) starts a sentence
            flush()
        current.append(_BULLET.sub("", stripped))
        if _ENDS.search(stripped):  # a line that ends as a sentence ends, ends it (see _HEADED)
            flush()
    flush()
    out = []
    for paragraph in paragraphs:
        for s in blingfire.text_to_sentences(" ".join(paragraph.split())).split("\n"):
            s = s.strip()  # brackets stay: the answer quotes its segment, and citations are never read from it
            if _is_prose(s, strict):
                out.append(s)
    return tuple(out)
