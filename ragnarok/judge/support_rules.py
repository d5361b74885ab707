"""Sentences that cite a segment but state nothing it could support: citation support's own rules.

A sentence that hedges, asks, reports a question, points elsewhere, talks about the task or denies asserts no
fact, so citing a segment with the same words earns it no support (:func:`states_nothing`, checked before any
word, cosine or NLI rule). Also the rules that read a claim as a claim and not as advice, and that match code
names as the segment writes them.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ragnarok.judge import frames as fr
from ragnarok.judge import textrules as tr


@lru_cache(maxsize=100_000)
def empty_kind(sentence: str) -> str | None:
    """Why ``sentence`` states nothing a citation could support: ``fragment`` (no statement at all),
    ``question``, ``report``, ``hedge``, ``pointer``, ``empty`` or ``denial`` (:func:`frames.kind`); None for a
    statement."""
    text = re.sub(r"\s*\[\d+(?:\s*,\s*\d+)*\]", "", sentence)  # citation marks are no words of the claim
    if not tr.is_statement(text):
        return "fragment"
    return fr.kind(text)


def states_nothing(sentence: str) -> bool:
    return empty_kind(sentence) is not None


# words of advice, not of the claim: "use the secrets module", "pass ignore=...", "create an ArgumentParser"
ADVICE = tuple("use pass call create make also then simply just need want module package library instead".split())
_CALL_ARGS = re.compile(r"[\w.]+\(([^()]*)\)")


@lru_cache(maxsize=1)
def advice_stems() -> frozenset[str]:
    return frozenset(tr.stem(w) for w in ADVICE)


@lru_cache(maxsize=100_000)
def placeholders(text: str) -> frozenset[str]:
    """The specifics written only inside a call's parentheses (``copyfileobj(f_in, f_out)``,
    ``ignore_patterns('*.pyc')``): example arguments, which a segment need not name."""
    inside = " ".join(_CALL_ARGS.findall(text))
    outside = _CALL_ARGS.sub(" ", text)
    return frozenset(tr.specifics(inside) - tr.specifics(outside)) if inside.strip() else frozenset()


_HYPHENATED = re.compile(r"\b[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b")


@lru_cache(maxsize=100_000)
def joined(text: str) -> frozenset[str]:
    """The hyphenated names of ``text`` written without their hyphens (``SHA-256`` -> ``sha256``, ``UTF-8``
    -> ``utf8``): a name a segment may spell either way."""
    return frozenset(m.replace("-", "").lower() for m in _HYPHENATED.findall(text) if any(c.isdigit() for c in m))


@lru_cache(maxsize=100_000)
def spelled_apart(text: str, found: frozenset[str]) -> frozenset[str]:
    """The specifics of ``text`` that are parts of a hyphenated name (``SHA-256``: ``~sha``, ``256``) whose
    joined spelling is among ``found`` (``sha256``)."""
    out: set[str] = set()
    for m in _HYPHENATED.findall(text):
        if m.replace("-", "").lower() in found:
            out |= tr.specifics(m.replace("-", " "))
    return frozenset(out)


@lru_cache(maxsize=100_000)
def code_names(text: str) -> frozenset[str]:
    """The last part of each name written as code in ``text`` (``json.stringify()`` -> ``stringify``,
    ``read_argv``, ``DictReader``; not a call's example arguments): a claim naming a function, class or
    attribute the segment never names states something the segment does not."""
    inside = placeholders(text)
    out = set()
    for token in tr.tokens(_CALL_ARGS.sub(lambda m: m.group(0).split("(")[0] + "()", text)):
        bare = token.rstrip("()")
        if (
            ("." in bare or "_" in bare or token.endswith("()") or any(c.isupper() for c in bare[1:]))
            and tr.parts(token)
            and not bare[:1].isdigit()
        ):
            name = tr.parts(token)[-1]
            if name not in inside:
                out.add(name)
    return frozenset(out)
