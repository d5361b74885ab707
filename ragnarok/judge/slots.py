"""Names and values in a sentence, and whose they are: the proxy judge's rules for nuggets whose
names or values are swapped (:mod:`ragnarok.judge.entail`). No model.

A text's slots are the names it gives (identifiers, keywords) and its values by class (outcomes, quoted
strings, units, verbs). Three vetoes read them: :func:`foreign_name`, :func:`value_clash` and
:func:`swapped`, so an answer that puts one nugget's name on another's content earns nothing.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ragnarok.judge import textrules as tr

_EXCEPTION = re.compile(r"^[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)$|^StopIteration$")
_QUOTED = re.compile(r"""(?<![\w'"])('[^'\n]{0,40}'|"[^"\n]{0,40}")""")
_KEYWORD = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)")
UNITS = {
    w: group
    for group, words in {
        "time": "nanosecond microsecond millisecond second minute hour day week ns ms",
        "size": "byte kilobyte megabyte gigabyte kb mb gb kib mib gib",
    }.items()
    for w in words.split()
}
OUTCOME_VERBS = {
    w: verb
    for verb, words in {
        "return": "return returns returned returning",
        "raise": "raise raises raised raising throw throws thrown",
    }.items()
    for w in words.split()
}
PREDICATE_SHARE = 0.5  # a clause holding this share of a nugget's predicate is where its content is
SWAP = (0.6, 0.6)  # a clause naming a nugget's thing with < this share of its predicate, >= this of another's


@dataclass(frozen=True)
class Slots:
    names: frozenset[str]
    modules: frozenset[str]
    values: frozenset[tuple[str, str]]  # (class, value)
    first: str | None = None  # the first name: what the text is about

    @property
    def named(self) -> frozenset[str]:
        """The names and the modules of dotted names."""
        return self.names | self.modules


def _unit(word: str) -> str | None:
    w = word.lower()
    for cand in (w, w[:-1] if w.endswith("s") else w):
        if cand in UNITS:
            return cand
    return None


@lru_cache(maxsize=100_000)
def slots(text: str) -> Slots:
    keywords = {k.lower() for k in _KEYWORD.findall(text)}
    names: set[str] = {k + "=" for k in keywords}
    modules: set[str] = set()
    values: set[tuple[str, str]] = {("quoted", q) for q in _QUOTED.findall(text)}
    first: str | None = None
    for i, token in enumerate(tr.tokens(text)):
        bare = token.rstrip("()")
        if bare in ("None", "True", "False") or _EXCEPTION.match(bare):
            values.add(("outcome", bare))
        elif (unit := _unit(bare)) is not None:
            values.add(("unit:" + UNITS[unit], unit))
        elif (verb := OUTCOME_VERBS.get(bare.lower())) is not None and i:
            values.add(("verb", verb))
        if bare.lower() in keywords:
            first = first or bare.lower() + "="
        elif tr.is_specific(token, i == 0) and not any(c.isdigit() for c in bare.split(".")[-1][:1]):
            split = tr.parts(token)
            if split:
                name = split[-1]
                first = first or name
                names.add(name)
                modules.update(split[:-1])
    return Slots(frozenset(names), frozenset(modules), frozenset(values), first)


@lru_cache(maxsize=100_000)
def predicate(text: str) -> frozenset[str]:
    """The text's content words less its names, by place ("statistics.mean computes the mean" says
    "computes the mean" of ``statistics.mean``): what it says of what it names."""
    words = [t for i, t in enumerate(tr.tokens(_KEYWORD.sub(" ", text))) if not tr.is_specific(t, i == 0)]
    return frozenset(tr.content_stems(" ".join(words)))


@lru_cache(maxsize=100_000)
def foreign_name(k: int, claims: tuple[str, ...], sentence: str, given: frozenset[str] = frozenset()) -> bool:
    """A clause of ``sentence`` holds most of what nugget ``k`` says, does not name ``k``'s thing (its first
    name, or all its names) and names another nugget's before it (not the question's, not a module any nugget
    names): ``k``'s content put under another nugget's name. Nothing when another clause holds the content
    under ``k``'s own name."""
    mine = slots(claims[k])
    if not mine.names:
        return False
    topic_modules = frozenset().union(*(slots(c).modules for c in claims))
    others = frozenset().union(*(slots(c).names for j, c in enumerate(claims) if j != k))
    others = others - mine.named - given - topic_modules
    want = predicate(claims[k]) - given or predicate(claims[k])
    if not others or not want:
        return False
    veto = False
    for clause in tr.clauses(sentence):
        have = slots(clause)
        if len(want & frozenset(tr.all_parts(clause))) < PREDICATE_SHARE * len(want):
            continue
        if mine.first in have.named or mine.names <= have.named:
            return False  # the content under the nugget's own name
        veto = veto or _subject_of(clause, have.names & others, want)
    return veto


def _subject_of(clause: str, names: frozenset[str], want: frozenset[str]) -> bool:
    """One of ``names`` comes before the first of the ``want`` words in ``clause``: it is what the clause
    says them of ("statistics.stdev computes the mean"), not an instrument ("declare the arguments on it
    with add_argument()")."""
    if not names:
        return False
    keywords = {k.lower() for k in _KEYWORD.findall(clause)}
    for i, token in enumerate(tr.tokens(clause)):
        mentions = slots(token).named | ({token.lower() + "="} if token.lower() in keywords else set())
        if mentions & names:
            return True
        if frozenset(tr.content_stems(token)) & want:
            return False
    return False


@lru_cache(maxsize=100_000)
def value_clash(claim: str, anchor: str, sentence: str) -> bool:
    """The claim gives values (``None``, ``KeyError``, ``'w'``, seconds, "returns"): a clause of ``sentence``
    where its content is (``anchor``, and each clause holding two words or half of what it says) gives another
    value of the same class in place of one of them, and no such clause gives them all ("raises KeyError if
    the variable does not exist" for "returns None if the variable doesn't exist")."""
    mine = slots(claim).values
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
        theirs = slots(clause).values
        if mine <= theirs:
            return False
        clash = clash or any((cls, v) not in theirs and any(c == cls and x != v for c, x in theirs) for cls, v in mine)
    return clash


@lru_cache(maxsize=100_000)
def swapped(k: int, claims: tuple[str, ...], sentence: str) -> bool:
    """A clause of ``sentence`` names nugget ``k``'s thing but says little of what ``k`` says of it, and most
    of what another nugget says of *its* thing, which the clause does not name: names swapped between the
    topic's nuggets ("json.dumps writes JSON to a file" is ``json.dump``'s nugget under another name). Either
    two or more words of the other's (or its one word), or the clause says little else (two or more of its
    words) and holds the words only the other nugget has, not ``k``'s ("statistics.median returns the most
    common value"). Names and what is said of them are told apart by place (:func:`predicate`)."""
    mine, names = predicate(claims[k]), slots(claims[k]).names
    if not names or not mine:
        return False
    named = mine | {p for n in names for w in re.split(r"[_~=]", n) if w for p in (w, tr.stem(w))}
    preds = [predicate(c) for c in claims]
    only = _distinct(k, preds)
    cut = tr.clauses(sentence)
    if names & slots(sentence).named and any(
        len(mine & said) >= SWAP[0] * len(mine) and len(only & said) >= SWAP[0] * len(only)
        for said in map(predicate, cut)
    ):
        return False  # a clause of the sentence says it (what only it says included) of the nugget's thing
    for clause in cut:
        have = slots(clause)
        if not names & have.names:  # a module of another name ("csv" of csv.reader) is not what it is about
            continue
        said = predicate(clause)
        own = len(mine & said) / len(mine)
        for j, other in enumerate(claims):
            theirs, their_names = preds[j], slots(other).names
            if j == k or not their_names or not theirs or their_names <= have.named:
                continue
            share = len(theirs & said) / len(theirs)
            if (
                own < SWAP[0]
                and share >= SWAP[1]
                and share > own
                and len((theirs - named) & said) >= min(2, len(theirs))
            ):
                return True
            if len(theirs & said) >= max(2, SWAP[1] * len(said)) and _distinct_swap(k, j, preds, said):
                return True
    return False


def _distinct(k: int, preds: list[frozenset[str]]) -> frozenset[str]:
    """What only nugget ``k`` says (no other nugget of the topic has the words)."""
    return preds[k] - frozenset().union(*(p for m, p in enumerate(preds) if m != k))


def _distinct_swap(k: int, j: int, preds: list[frozenset[str]], said: frozenset[str]) -> bool:
    """``said`` holds most of the words only nugget ``j`` says and few of those only ``k`` says."""
    mine, theirs = _distinct(k, preds), _distinct(j, preds)
    if not theirs:
        return False
    own = len(mine & said) / len(mine) if mine else 0.0
    share = len(theirs & said) / len(theirs)
    return own < SWAP[0] and share >= SWAP[1] and share > own
