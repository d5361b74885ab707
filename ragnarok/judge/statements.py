"""What a sentence asserts, for the proxy judge's nugget rules (:mod:`ragnarok.judge.entail`): word rules, no
model.

A sentence supports a nugget only where it asserts the nugget's content, so denials, reports and doubts,
questions, hedges, pointers, empty talk and "whether" or conditional clauses are told apart from a plain
statement, and polarity is compared clause by clause. The frames' patterns are :mod:`ragnarok.judge.frames`'.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ragnarok.judge import frames as fr
from ragnarok.judge import textrules as tr


@lru_cache(maxsize=100_000)
def asserted(sentence: str, conditionals: bool = False) -> str:
    """The part of ``sentence`` it asserts: nothing for a question or a report/doubt frame, the sentence less
    its "whether" clauses and (unless ``conditionals``) its "if"/"unless" clauses otherwise."""
    text = sentence.strip()
    if fr.asserts_nothing(text):  # a question, a report or doubt, a hedge, a pointer, talk about the task
        return ""
    text = fr.WHETHER.sub(" ", text)
    if not conditionals:
        text = fr.IF_LATER.sub(" ", fr.IF_FIRST.sub(" ", text))
    return " ".join(text.split())


def conditional(text: str) -> bool:
    """The text has a condition of its own ("if", "unless", "when")."""
    return bool(fr.CONDITIONAL.search(text))


@lru_cache(maxsize=100_000)
def polarity(text: str) -> int:
    """1 when the text denies: a leading denial ("it is not true that", "it is a myth that") of what follows
    it, else a negation ("not", "never", "neither ... nor", "n't") or a denial frame, not both."""
    lead = fr.LEAD.match(text.strip())
    if lead:
        return 1 - polarity(text.strip()[lead.end() :])
    return int(tr.negations(text) > 0) ^ int(bool(fr.DENIAL.search(text)))


@lru_cache(maxsize=100_000)
def pieces(text: str) -> tuple[str, ...]:
    """The text cut at its conjunctions and subordinators (finer than :func:`textrules.clauses`)."""
    return tuple(p for p in (x.strip(" ,.") for x in fr.PIECES.split(text)) if p) or (text,)


def _stems(text: str) -> frozenset[str]:
    return frozenset(tr.content_stems(text))


@lru_cache(maxsize=100_000)
def _piece_stems(text: str) -> tuple[tuple[str, frozenset[str], frozenset[str], int], ...]:
    """(piece, content stems, all parts, polarity) per piece; a sentence opening with a denial ("It is not
    true that ...") denies every piece after it too."""
    cut = pieces(text)
    frame = next((i for i, p in enumerate(cut[:2]) if fr.LEAD.match(p)), len(cut))
    return tuple((p, _stems(p), frozenset(tr.all_parts(p)), (polarity(p) + (i > frame)) % 2) for i, p in enumerate(cut))


def _merged(text: str) -> tuple[tuple[frozenset[str], int], ...]:
    """The text's pieces as (stems, polarity), a piece without content words joined to the one before it
    (so "... is not" keeps its negation with what it negates)."""
    out: list[tuple[frozenset[str], int]] = []
    for _, stems, _, pol in _piece_stems(text):
        if out and not stems:
            out[-1] = (out[-1][0], (out[-1][1] + pol) % 2)
        else:
            out.append((stems, pol))
    return tuple(out)


@lru_cache(maxsize=100_000)
def polarity_clash(claim: str, unit: str, least: int = 2) -> bool:
    """``unit`` does not say what the claim says with the claim's polarity. A claim without a negation: a
    clause of ``unit`` holding ``least`` or more of its content words is negated or denied. A negated claim
    ("it returns None if the variable doesn't exist"), piece by piece: a piece of ``unit`` holding ``least``
    of its words has the other polarity than the claim's piece it matches best, and holds more than what the
    claim is about ("list.sort() sorts the items in place" says nothing of "does not return the list")."""
    mine = _merged(claim)
    want = frozenset().union(*(s for s, _ in mine))
    if not any(pol for _, pol in mine):
        return any(
            polarity(c) and len(want & frozenset(tr.all_parts(c))) >= min(least, len(want)) for c in _clauses(unit)
        )
    subject = _stems(" ".join(_subject(claim)))
    for _, stems, parts, pol in _piece_stems(unit):
        if len(want & parts) < min(least, len(want)):
            continue
        best = max(mine, key=lambda m: len(m[0] & parts))
        if pol != best[1] and (best[0] - subject or best[0]) & parts:
            return True
    return False


@lru_cache(maxsize=100_000)
def _clauses(text: str) -> tuple[str, ...]:
    """:func:`textrules.clauses`, a sentence's leading denial ("It is not true that ...") carried into each."""
    cut = tr.clauses(text)
    lead = fr.LEAD.match(text.strip())
    return tuple(cut) if not lead or len(cut) == 1 else (cut[0], *(lead.group(0) + " " + c for c in cut[1:]))


@lru_cache(maxsize=100_000)
def denies(claim: str, unit: str, share: float = 0.7) -> bool:
    """``unit`` asserts the opposite of the claim: one of its asserted pieces holds ``share`` of the words
    of a claim piece, every claim specific, and the other polarity ("X. It is not true that X." supports
    neither)."""
    said = asserted(unit, conditional(claim))
    if not said:
        return False
    specifics = tr.specifics(claim)
    if specifics - set(tr.raw_parts(said)):
        return False
    for piece, _, parts, pol in _piece_stems(said):
        for want, mine in _merged(claim):
            if want and len(want & parts) >= share * len(want) and pol != mine and want & _scope(piece):
                return True
    return False


_CUE = re.compile(r"\b(?:not|never|no|cannot)\b|n't\b", re.I)


def _scope(piece: str) -> frozenset[str]:
    """What a piece's negation is about: the words after its first negation cue (all of them when a frame
    denies it: "it is a myth that ..."). "Functions created with X cannot contain Y" denies nothing of X."""
    cue = _CUE.search(piece)
    return frozenset(tr.all_parts(piece[cue.end() :] if cue else piece))


_DETERMINERS = frozenset("the a an this that these those its your their our".split())


def _subject(text: str) -> tuple[str, ...]:
    """The words before the first finite verb of the text's first clause (determiners out); a verb in a
    finite form ("builds", "cannot") is preferred to a word that may be a noun or a verb ("list")."""
    words = tr.tokens(tr.clauses(text)[0])
    candidates = [i for i in range(1, len(words)) if tr.finite_verb_at(words, i)]
    inflected = [i for i in candidates if words[i].lower() in tr.AUXILIARIES or words[i].lower().endswith(("s", "ed"))]
    for i in inflected[:1] or candidates[:1]:
        return tuple(w.lower() for w in words[:i] if w.lower() not in _DETERMINERS)
    return ()
