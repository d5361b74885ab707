"""Sentences that cite a segment but state nothing it could support: citation support's own rules.

A sentence that hedges ("X may or may not ...", "it depends on your needs"), asks or reports a question
("Whether X does Y is a question ...", "people often ask whether ..."), points elsewhere ("this is discussed in
[1]", "see [2]"), talks about the task instead of answering ("X is a common task", "there are many ways to
...") or denies ("It is a myth that ...", "it is false that ...") asserts no fact: citing a segment that holds
the same words earns it no support. The frames are :mod:`ragnarok.judge.frames`' (the nugget rules read the
same ones). :func:`states_nothing` is checked before any word or cosine rule of
:func:`ragnarok.judge.entail.support_level` (and before the NLI model, :mod:`ragnarok.judge.nli`).

A sentence that does state something is read as a claim, not as advice: the words of advice around it
(:data:`ADVICE`: "use the secrets module, which ...", "pass ...") do not count towards its recall, and the
example arguments of a call (:func:`placeholders`: ``copyfileobj(f_in, f_out)``) need not be in the segment.
(judge-dev: these two took citation support's kappa from 0.472 to 0.515, empty talk to 0.531; the function itself must still be
there: ``shutil.copy2(f_in, f_out)`` is not supported by ``shutil.copyfileobj``'s segment.) A name written as
code that the segment never names (:func:`code_names`) makes a clause another claim; a hyphenated name is
found under its joined spelling (:func:`joined`, :func:`spelled_apart`: ``SHA-256``, ``sha256``).
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
ADVICE = (
    "use",
    "pass",
    "call",
    "create",
    "make",
    "also",
    "then",
    "simply",
    "just",
    "need",
    "want",
    "module",
    "package",
    "library",
    "instead",
)
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
