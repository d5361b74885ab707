"""Post-processing raw LLM output into a sentence-level cited answer (the TREC RAG format).

``postprocess(text, docids)`` where ``docids[i]`` is the segment numbered ``i + 1`` in the prompt:

1. ``<think>…</think>`` blocks are removed, and so is a "References"/"Sources" section the model wrote itself
   (a heading such as ``References:``, ``## Sources``, ``**Bibliography**`` and everything after it).
2. Markdown that is not content goes: heading lines (``## Answer``), ``**``, bullets, numbered-list prefixes.
3. Sentences come from blingfire. Markers ``[1]``, ``[1, 2]``, ``[1-3]``, ``[1][2]``, ``[Doc 1]``, ``【1】`` are
   parsed, made 0-based, out-of-range ones dropped, duplicates removed, and cut out of the text.
   A marker group that opens a sentence (``… first. [1] Second …``) belongs to the previous sentence.
4. ``references`` = the cited segment ids, in order of first citation, at most ``max_references``;
   citations are renumbered into it.
5. Answers over ``max_words`` words are cut at a sentence boundary (the first sentence at a word boundary).
"""

from __future__ import annotations

import re

import blingfire

from ragnarok.types import CitedSentence, word_count

NO_ANSWER_TEXT = "The provided context does not contain the information needed to answer this question."

_THINK = re.compile(r"<think>.*?</think>|^\s*<think>.*?(?:</think>|$)", re.S | re.I)
_REFS_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:references|sources|bibliography|citations|works cited)\s*"
    r"(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*$", re.I | re.M)
_HEADING_LINE = re.compile(r"^\s*#{1,6}\s+.*$", re.M)
_MARKDOWN_LINE = re.compile(r"^\s*(?:[-*•]\s+|\d{1,2}[.)]\s+(?=\D))", re.M)
_NUMS = r"(?:doc(?:ument)?\s*|context\s*)?\d+(?:\s*[-–]\s*\d+)?"
_GROUP = re.compile(rf"[\[【]\s*{_NUMS}(?:\s*[,;]\s*{_NUMS})*\s*[\]】]", re.I)
_LEADING = re.compile(rf"^\s*(?:{_GROUP.pattern}\s*)+")
_RANGE = re.compile(r"(\d+)(?:\s*[-–]\s*(\d+))?")


def clean(text: str) -> str:
    """Remove thinking, a self-written references section and markdown noise."""
    text = _THINK.sub("", text)
    heading = _REFS_HEADING.search(text)
    if heading:
        text = text[: heading.start()]
    text = _MARKDOWN_LINE.sub("", _HEADING_LINE.sub("", text))
    return text.replace("**", "").replace("__", "").strip()


def _numbers(group: str) -> list[int]:
    out = []
    for start, end in _RANGE.findall(group):
        a, b = int(start), int(end or start)
        if b - a <= 100:  # a range like [1-3]; absurd ones are ignored
            out.extend(range(a, b + 1))
    return out


def _split(text: str) -> list[tuple[str, list[int]]]:
    """Sentences with their 1-based citation numbers, markers removed."""
    out: list[tuple[str, list[int]]] = []
    for paragraph in text.split("\n"):
        if not paragraph.strip():
            continue
        for raw in blingfire.text_to_sentences(paragraph.strip()).split("\n"):
            leading = _LEADING.match(raw)
            if leading and out:
                out[-1][1].extend(n for g in _GROUP.findall(leading.group(0)) for n in _numbers(g))
                raw = raw[leading.end():]
            numbers = [n for g in _GROUP.findall(raw) for n in _numbers(g)]
            sentence = re.sub(r"\s+([.,;:!?])", r"\1", _GROUP.sub("", raw))
            sentence = re.sub(r"\s{2,}", " ", sentence).strip()
            if re.search(r"\w", sentence):
                out.append((sentence, numbers))
            elif out:
                out[-1][1].extend(numbers)
    return out


def _truncate(sentences: list[tuple[str, list[int]]], max_words: int) -> list[tuple[str, list[int]]]:
    kept, total = [], 0
    for sentence, numbers in sentences:
        n = word_count(sentence)
        if total + n > max_words:
            if not kept:
                kept.append((" ".join(sentence.split()[:max_words]), numbers))
            break
        kept.append((sentence, numbers))
        total += n
    return kept


def postprocess(text: str, docids: list[str], max_words: int = 400,
                max_references: int = 20) -> tuple[list[str], list[CitedSentence]]:
    """``(references, answer)`` from raw model output; see the module docstring for the rules."""
    references: list[str] = []
    answer: list[CitedSentence] = []
    for sentence, numbers in _truncate(_split(clean(text)), max_words):
        citations: list[int] = []
        for number in numbers:
            if not 1 <= number <= len(docids):
                continue
            docid = docids[number - 1]
            if docid not in references:
                if len(references) >= max_references:
                    continue
                references.append(docid)
            index = references.index(docid)
            if index not in citations:
                citations.append(index)
        answer.append(CitedSentence(text=sentence, citations=citations))
    return references, answer
