"""Sentences that cite a segment but state nothing it could support (issue 37): citation support's own rules.

A sentence that hedges ("X may or may not ...", "it depends on your needs"), asks or reports a question
("Whether X does Y is a question ...", "people often ask whether ..."), points elsewhere ("this is discussed in
[1]", "see [2]"), talks about the task instead of answering ("X is a common task", "there are many ways to
...") or denies ("It is a myth that ...", "it is false that ...") asserts no fact: citing a segment that holds the same words
earns it no support. :func:`states_nothing` is checked before any word or cosine rule of
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

from ragnarok.judge import textrules as tr

_MODAL = r"(?:may|might|could|can|does|do|will|would|is|are)"
PATTERNS = {
    "hedge": re.compile(rf"\b{_MODAL} or {_MODAL}\s*(?:not|n't)\b|\bwhether or not\b|\bit depends\b|"
                        r"\bdepends? (?:up)?on (?:your|the|what|how|whether|which)\b|"
                        r"\b(?:remains?|is|are) (?:still )?(?:unclear|uncertain|unknown|to be seen|debated|"
                        r"contested|disputed|open to debate)\b", re.I),
    "question": re.compile(r"^\s*whether\b|\b(?:is|are|remains?) (?:a|an|the) (?:\w+ ){0,2}(?:question|"
                           r"debate|matter of (?:debate|opinion))\b|\b(?:people|users|some|many|developers|one) "
                           r"(?:often |sometimes |frequently |may )?(?:ask|wonder|debate|discuss)\b|\?\s*$", re.I),
    "pointer": re.compile(r"\b(?:is|are|was|were|gets|get) (?:\w+ )?(?:discussed|described|covered|explained|"
                          r"mentioned|documented|addressed|treated|talked about|detailed|outlined) (?:in|by|at|"
                          r"on|under)\b|^\s*(?:see|refer to|read|consult)\b", re.I),
    # talk about the task, not about the answer: "X is a common need", "there are many ways to ..."
    "empty": re.compile(r"\b(?:is|are) (?:a |an )?(?:\w+ )?(?:common|frequent|useful|popular|easy|simple|typical) "
                        r"(?:need|task|technique|thing|problem|question|requirement|job)s?\b|\bthere are (?:several|"
                        r"many|various|a few|multiple|different) (?:\w+ )?(?:ways|approaches|options|methods)\b|"
                        r"\bsomething (?:you|one|developers|people) (?:may|might|will|often) (?:need|want)\b|\bis easy "
                        r"in (?:many|most|any) \w+\b", re.I),
    "denial": re.compile(r"\b(?:it is|it's|it was) (?:\w+ )?(?:a myth|false|untrue|not true|wrong|incorrect|"
                         r"a (?:\w+ )?misconception|a mistake|a fallacy|nonsense|a fiction) (?:to (?:say|think|"
                         r"believe|claim) )?that\b|\bcontrary to (?:\w+ )?(?:belief|claims?|what)\b|\b(?:the|a) "
                         r"(?:\w+ )?(?:myth|misconception|fallacy) (?:is )?that\b|\bno(?:body| one) "
                         r"(?:says|believes|claims)\b|\bit would be (?:wrong|incorrect|a mistake) to\b", re.I),
}


@lru_cache(maxsize=100_000)
def empty_kind(sentence: str) -> str | None:
    """Why ``sentence`` states nothing a citation could support: ``fragment`` (no statement at all),
    ``hedge``, ``question``, ``pointer``, ``empty`` or ``denial``; None for a statement."""
    text = re.sub(r"\s*\[\d+(?:\s*,\s*\d+)*\]", "", sentence)  # citation marks are no words of the claim
    if not tr.is_statement(text):
        return "fragment"
    return next((kind for kind, pattern in PATTERNS.items() if pattern.search(text)), None)


def states_nothing(sentence: str) -> bool:
    return empty_kind(sentence) is not None


# words of advice, not of the claim: "use the secrets module", "pass ignore=...", "create an ArgumentParser"
ADVICE = ("use", "pass", "call", "create", "make", "also", "then", "simply", "just", "need", "want", "module",
          "package", "library", "instead")
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
    return frozenset(m.replace("-", "").lower() for m in _HYPHENATED.findall(text)
                     if any(c.isdigit() for c in m))


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
        if ("." in bare or "_" in bare or token.endswith("()") or any(c.isupper() for c in bare[1:])) \
                and tr.parts(token) and not bare[:1].isdigit():
            name = tr.parts(token)[-1]
            if name not in inside:
                out.add(name)
    return frozenset(out)
