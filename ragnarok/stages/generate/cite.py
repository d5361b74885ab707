"""Post-processing raw LLM output into a sentence-level cited answer (the TREC RAG format).

``postprocess(text, docids)`` cleans what is not content (thinking, self-written reference lists, Markdown,
code), splits sentences and parses every citation marker models write, caps the answer's words, and makes
citations 0-based indices into the answer's ``references``. One path for every backend, so all answers follow
the track's rules the same way.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import re

import blingfire

from ragnarok.core.sentences import CODE_LINE
from ragnarok.core.types import CitedSentence, cut_words, word_count

NO_ANSWER_TEXT = "The provided context does not contain the information needed to answer this question."

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_THINK_CLOSE = re.compile(r"^.*</think>", re.S | re.I)  # the opening tag was part of the prompt
_THINK_OPEN = re.compile(r"<think>.*", re.S | re.I)  # never closed: the model ran out thinking
_REFS_WORD = r"(?:references|sources|bibliography|citations|works\s+cited|reference\s+list)"
_REFS_HEADING = re.compile(
    rf"^\s*(?:#{{1,6}}\s*)?(?:\*\*)?\s*{_REFS_WORD}\s*(?:\*\*)?\s*:?\s*(?:\*\*)?\s*$"  # a heading line
    rf"|^\s*(?:\*\*)?{_REFS_WORD}\s*(?:\*\*)?\s*:",
    re.I,
)  # or "Sources: [1] …"
_HEADING = re.compile(r"^\s*#{1,6}\s+")
_ALL_BOLD = re.compile(r"^\s*\*\*([^*]+)\*\*\s*:?\s*$")
_LIST_PREFIX = re.compile(r"^\s*(?:[-*•>]\s+|\d{1,2}[.)]\s+(?=\D))")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ANSWER_LABEL = re.compile(r"^\s*(?:final\s+)?(?:answer|response)\s*:\s*", re.I)
_REF_LINE = re.compile(r"^\s*[\[【]\s*\d{1,3}\s*[\]】]\s*\S")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_ORPHAN_MARKER = re.compile(r"^\s*(?:[-*•>]|\d{1,2}[.)])\s*$")

_NUM = r"(?:(?:doc(?:ument)?|context|passage|source)\s*#?\s*)?\d{1,3}(?:\s*[-–—]\s*\d{1,3})?"
_SEP = r"\s*(?:,\s*and|[,;&]|and)\s*"
GROUP_SRC = rf"[\[【]\s*{_NUM}(?:{_SEP}{_NUM})*\s*[\]】]"  # one marker group (also read by streaming)
_GROUP = re.compile(GROUP_SRC, re.I)
_LEADING = re.compile(rf"^\s*(?:{GROUP_SRC}\s*)+", re.I)
# "First. [1][2] Second" -> "First [1][2]. Second" before splitting (blingfire keeps "First. [1][2] Second"
# as one sentence); only where a new sentence follows, so "e.g. [1] is" is left alone.
_AFTER_STOP = re.compile(rf"([.!?])((?:\s*{GROUP_SRC})+)(?=\s*$|\s+[\"'“(]?[A-Z0-9])", re.I)
_PAREN = re.compile(rf"\s*\(\s*(?:(?:see|cf\.?)(?:\s+also)?\s*)?(?:{GROUP_SRC}\s*[,;]?\s*)+\)", re.I)
_RANGE = re.compile(r"(\d+)(?:\s*[-–—]\s*(\d+))?")
_SENTENCE_END = re.compile(r"[.!?…][\"'”)]*\s*$")


def _strip_think(text: str) -> str:
    text = _THINK_BLOCK.sub("", text)
    text = _THINK_CLOSE.sub("", text)
    return _THINK_OPEN.sub("", text)


def _drop_reference_paragraph(text: str) -> str:
    """A final paragraph made only of ``[n] Title …`` lines is a references list without a heading."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    last = [line for line in paragraphs[-1].split("\n") if line.strip()]
    if len(paragraphs) > 1 and last and all(_REF_LINE.match(line) for line in last):
        return "\n\n".join(paragraphs[:-1])
    return text


def _markers_only(line: str) -> str:
    """What of a code line is kept: its citation markers (they go to the sentence before), nothing else."""
    return " ".join(_GROUP.findall(line))


def clean(text: str) -> str:
    """Remove thinking, a self-written references section, code (fenced blocks, code-only lines: their citation
    markers stay) and markdown that is not content (keeping text)."""
    lines: list[str] = []
    fenced = False
    for line in _drop_reference_paragraph(_strip_think(text)).split("\n"):
        if _REFS_HEADING.match(line):
            break
        if _FENCE.match(line) or fenced:
            fenced = fenced != bool(_FENCE.match(line))  # a fence opens or closes a block
            lines.append(_markers_only(line))
            continue
        if _ORPHAN_MARKER.match(line):
            continue  # "2." or "-" alone on its line
        bare = _GROUP.sub("", _LIST_PREFIX.sub("", line)).strip()
        if CODE_LINE.match(bare) and not _SENTENCE_END.search(bare):  # a sentence ends as prose does
            lines.append(_markers_only(line))  # "import argparse [2]": the citation stays, the code goes
            continue
        body = None
        if bold := _ALL_BOLD.match(line):
            body = bold.group(1)
        elif heading := _HEADING.match(line):
            body = line[heading.end() :].strip().strip("#")
        if body is not None:
            if not _SENTENCE_END.search(body.replace("**", "")) and not _GROUP.search(body):
                continue  # a label such as "## Background" or "**Key findings:**"
            line = body
        line = _ITALIC.sub(r"\1", _LIST_PREFIX.sub("", line).replace("**", ""))
        line = _ANSWER_LABEL.sub("", line)
        lines.append(line.strip())
    return "\n".join(lines).strip()


def _numbers(group: str) -> list[int]:
    out: list[int] = []
    for start, end in _RANGE.findall(group):
        a, b = int(start), int(end or start)
        if 0 <= b - a <= 100:  # a range like [1-3]; reversed or absurd ones are ignored
            out.extend(range(a, b + 1))
    return out


def _markers(text: str) -> list[int]:
    return [n for group in _GROUP.findall(text) for n in _numbers(group)]


def _tidy(sentence: str) -> str:
    """The sentence without its markers, and without the spaces and commas they leave behind."""
    sentence = _GROUP.sub("", _PAREN.sub("", sentence))
    sentence = re.sub(r"\s+([.,;:!?)])", r"\1", sentence)
    sentence = re.sub(r"[,;]+(?=[.,;:!?]|$)", "", sentence)
    return re.sub(r"\s{2,}", " ", sentence).strip()


def _split(text: str) -> list[tuple[str, list[int]]]:
    """Sentences with their 1-based citation numbers, markers removed."""
    out: list[tuple[str, list[int]]] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        line = _AFTER_STOP.sub(r"\2\1", line.strip())
        for raw in blingfire.text_to_sentences(line).split("\n"):
            leading = _LEADING.match(raw)
            if leading and out:
                out[-1][1].extend(_markers(leading.group(0)))
                raw = raw[leading.end() :]
            numbers, sentence = _markers(raw), _tidy(raw)
            if re.search(r"\w", sentence) and not _ORPHAN_MARKER.match(sentence):  # "2." of a list, mid-line
                out.append((sentence, numbers))
            elif out:
                out[-1][1].extend(numbers)
    return out


def _truncate(sentences: list[tuple[str, list[int]]], max_words: int) -> list[tuple[str, list[int]]]:
    kept: list[tuple[str, list[int]]] = []
    total = 0
    for sentence, numbers in sentences:
        n = word_count(sentence)
        if total + n > max_words:
            if not kept and max_words > 0:
                kept.append((cut_words(sentence, max_words), numbers))
            break
        kept.append((sentence, numbers))
        total += n
    return kept


def sentences(text: str) -> list[tuple[str, list[int]]]:
    """Steps 1-2: the cleaned sentences of raw model output, each with its 1-based citation numbers."""
    return _split(clean(text))


def truncate(sentences: list[tuple[str, list[int]]], max_words: int) -> list[tuple[str, list[int]]]:
    """Step 3: the leading sentences that fit ``max_words``."""
    return _truncate(sentences, max_words)


def to_references(
    sentences: list[tuple[str, list[int]]], docids: list[str], max_references: int = 20
) -> tuple[list[str], list[CitedSentence]]:
    """Step 4: 1-based numbers into ``docids`` become 0-based indices into the cited ``references``."""
    references: list[str] = []
    position: dict[str, int] = {}
    answer: list[CitedSentence] = []
    for sentence, numbers in sentences:
        citations: list[int] = []
        for number in numbers:
            if not 1 <= number <= len(docids):
                continue
            docid = docids[number - 1]
            if docid not in position:
                if len(references) >= max_references:
                    continue
                position[docid] = len(references)
                references.append(docid)
            if position[docid] not in citations:
                citations.append(position[docid])
        answer.append(CitedSentence(text=sentence, citations=citations))
    return references, answer


def postprocess(
    text: str, docids: list[str], max_words: int = 400, max_references: int = 20
) -> tuple[list[str], list[CitedSentence]]:
    """``(references, answer)`` from raw model output; see the module docstring for the rules."""
    return to_references(truncate(sentences(text), max_words), docids, max_references)
