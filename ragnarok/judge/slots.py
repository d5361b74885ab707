"""Names and values in a sentence: the proxy judge's rules for a nugget's values (:mod:`ragnarok.judge.entail`).
No model.

A text's slots are the names it gives (identifiers, keywords) and its values by class (outcomes, quoted
strings, units, verbs). Two vetoes read them: :func:`value_clash` (another value of the class where the
nugget's content is) and :func:`value_missing` (the nugget's outcome or quoted value never given).

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ragnarok.judge import textrules as tr

_EXCEPTION = re.compile(r"^[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)$|^StopIteration$")
_QUOTED = re.compile(r"""(?<![\w'"])('[^'\n]{0,40}'|"[^"\n]{0,40}")""")
_KEYWORD = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)")
UNITS = dict.fromkeys("nanosecond microsecond millisecond second minute hour day week ns ms".split(), "time") | (
    dict.fromkeys("byte kilobyte megabyte gigabyte kb mb gb kib mib gib".split(), "size")
)
OUTCOME_VERBS = dict.fromkeys("return returns returned returning".split(), "return") | (
    dict.fromkeys("raise raises raised raising throw throws thrown".split(), "raise")
)
PREDICATE_SHARE = 0.5  # a clause holding this share of a nugget's predicate is where its content is


def _unit(word: str) -> str | None:
    w = word.lower()
    for cand in (w, w[:-1] if w.endswith("s") else w):
        if cand in UNITS:
            return cand
    return None


@lru_cache(maxsize=100_000)
def values(text: str) -> frozenset[tuple[str, str]]:
    """The text's values as (class, value): outcomes (``None``, exceptions), quoted strings, units, and the
    verbs returns / raises."""
    found: set[tuple[str, str]] = {("quoted", q) for q in _QUOTED.findall(text)}
    for i, token in enumerate(tr.tokens(text)):
        bare = token.rstrip("()")
        if bare in ("None", "True", "False") or _EXCEPTION.match(bare):
            found.add(("outcome", bare))
        elif (unit := _unit(bare)) is not None:
            found.add(("unit:" + UNITS[unit], unit))
        elif (verb := OUTCOME_VERBS.get(bare.lower())) is not None and i:
            found.add(("verb", verb))
    return frozenset(found)


@lru_cache(maxsize=100_000)
def predicate(text: str) -> frozenset[str]:
    """The text's content words less its names, by place ("statistics.mean computes the mean" says
    "computes the mean" of ``statistics.mean``): what it says of what it names."""
    words = [t for t in tr.tokens(_KEYWORD.sub(" ", text)) if not tr.is_specific(t)]
    return frozenset(tr.content_stems(" ".join(words)))


@lru_cache(maxsize=100_000)
def value_clash(claim: str, anchor: str, sentence: str) -> bool:
    """The claim gives values (``None``, ``KeyError``, ``'w'``, seconds, "returns"): a clause of ``sentence``
    where its content is (``anchor``, and each clause holding two words or half of what it says) gives another
    value of the same class in place of one of them, and no such clause gives them all ("raises KeyError if
    the variable does not exist" for "returns None if the variable doesn't exist")."""
    mine = values(claim)
    if not mine:
        return False
    want = predicate(claim)
    where = [
        c
        for c in tr.clauses(sentence)
        if c == anchor or len(want & frozenset(tr.all_parts(c))) >= min(2, PREDICATE_SHARE * len(want))
    ]
    clash = False
    for clause in where or [anchor]:
        theirs = values(clause)
        if mine <= theirs:
            return False
        clash = clash or any((cls, v) not in theirs and any(c == cls and x != v for c, x in theirs) for cls, v in mine)
    return clash


@lru_cache(maxsize=100_000)
def value_missing(claim: str, sentence: str) -> bool:
    """The claim gives an outcome or a quoted value (``None``, ``KeyError``, ``'w'``) the sentence never gives:
    naming the claim's things without its value is not stating it."""
    theirs = values(sentence)
    return any(cls in ("outcome", "quoted") and (cls, v) not in theirs for cls, v in values(claim))
