"""Does a text state a claim? The proxy judge's core (:mod:`ragnarok.judge.proxy`), for nuggets against an
answer and for an answer sentence against the segment it cites. Deterministic: word rules
(:mod:`ragnarok.judge.textrules`) plus MiniLM cosines, with fixed thresholds.

A nugget is judged sentence by sentence: statements only, vetoes first (frames that assert nothing,
contradictions, another name or value), then word recall and cosine thresholds (each rule family kept only
where cross-validation by topic finds it pays: bench/judge_cv.py); the best sentence's label is the nugget's. Citation support applies the same
rules per clause of the answer sentence against the cited segment.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ragnarok.judge import slots, support_rules
from ragnarok.judge import statements as st
from ragnarok.judge import textrules as tr

# (recall with cos >=, that cos, cos alone): bench/judge_cv.py's protocol run on all 16 judge-dev topics (its
# held-out folds measure that protocol)
FULL = (0.4, 0.5, 0.5)
PARTIAL = (0.25, 0.3, 0.45)
ECHO_MARGIN = 0.05
ASSERTED = 0.4  # this share of the words a sentence shares with a nugget must be where it asserts something
SUPPORT_FULL = (0.7, 0.45, 0.7)  # citation support, clause against segment
SUPPORT_PARTIAL = (0.35, 0.35, 0.62)
# the rule families (bench/judge_cv.py scores each removed, on topics held out by cross-validation)
FAMILIES = tuple(
    "statement contradiction unasserted negation antonym name value specific echo s_empty s_veto s_code_names".split()
)
OFF: frozenset[str] = frozenset()  # families switched off (measurement only: see :func:`configure`)
Cosines = Callable[[Sequence[str], Sequence[str]], np.ndarray]


def configure(off: frozenset[str] = frozenset(), **thresholds: object) -> None:
    """Switch rule families off and set thresholds (module constants by name), for measurement; the
    memoised plans are dropped."""
    global OFF
    unknown = set(off) - set(FAMILIES) or {k for k in thresholds if k not in globals() or not k.isupper()}
    if unknown:
        raise ValueError(f"unknown rule families or thresholds: {sorted(unknown)}")
    OFF = frozenset(off)
    globals().update(thresholds)
    plan_nuggets.cache_clear()
    plan_support.cache_clear()


def _on(family: str) -> bool:
    return family not in OFF


@dataclass(frozen=True)
class Text:
    """One sentence (or claim) analysed once."""

    text: str
    stems: frozenset[str]
    parts: frozenset[str]
    raw: frozenset[str]
    specifics: frozenset[str]
    clauses: tuple[str, ...]
    statement: bool


@lru_cache(maxsize=100_000)
def analyse(text: str) -> Text:
    return Text(
        text,
        frozenset(tr.content_stems(text)),
        frozenset(tr.all_parts(text)),
        frozenset(tr.raw_parts(text)),
        frozenset(tr.specifics(text)),
        tuple(tr.clauses(text)),
        tr.is_statement(text),
    )


def _weight(words: frozenset[str] | set[str], specific: frozenset[str]) -> float:
    return float(sum(2 if w in specific or "~" + tr.stem(w) in specific else 1 for w in words))


def recall(claim: Text, words: frozenset[str], given: frozenset[str] = frozenset()) -> float:
    """Weighted share of the claim's content words (minus ``given`` ones, unless nothing is left) in
    ``words``."""
    want = claim.stems - given or claim.stems
    total = _weight(want, claim.specifics)
    return _weight(want & words, claim.specifics) / total if total else 0.0


def _anchor(claim: Text, unit: Text, said_first: bool = False) -> str:
    """The unit's clause holding most of the claim's words (specifics double); ``said_first``: most of what
    the claim says of its names (:func:`slots.predicate`) first, then most of its words."""
    if len(unit.clauses) == 1:
        return unit.clauses[0]
    said = slots.predicate(claim.text) if said_first else frozenset()
    return max(
        unit.clauses,
        key=lambda c: (len(said & analyse(c).parts), _weight(claim.stems & analyse(c).parts, claim.specifics)),
    )


def _modules(text: str) -> frozenset[str]:
    """The first parts of the dotted names in ``text`` (``re`` of ``re.finditer``): an answer names a module
    once and its functions after."""
    return frozenset(tr.parts(t)[0] for t in tr.tokens(text) if "." in t.rstrip(".") and tr.parts(t))


def contradicts(
    claim: Text,
    unit: Text,
    given: frozenset[str] = frozenset(),
    context: frozenset[str] = frozenset(),
    nugget: bool = False,
) -> str | None:
    """Why ``unit`` cannot support ``claim`` though it may share its words: ``negation``, ``antonym``,
    ``name``, ``value`` or ``specific`` (a claim specific missing from the unit and from ``context`` -- the rest
    of the answer, which may name it in an earlier sentence -- while the unit names another one, not in
    ``given``); None. A segment's sentence is read where it says what the claim says of its names (a
    docstring's "random.randint: Return random integer ..." at its description)."""
    anchor = _anchor(claim, unit, said_first=not nugget)

    def on(family: str) -> bool:  # the nugget rules' families (citation support's vetoes are one: s_veto)
        return not nugget or _on(family)

    said, told = tr.fold_negated(unit.text, claim.text), tr.fold_negated(claim.text, unit.text)  # "not valid"
    if nugget:  # polarity piece by piece (:func:`statements.polarity_clash`)
        if on("negation") and st.polarity_clash(told, said):
            return "negation"
    elif any(
        (tr.negations(tr.fold_negated(c, claim.text)) > 0) != (tr.negations(told) > 0)
        for c in unit.clauses
        if c == anchor or len(claim.stems & analyse(c).parts) >= 2
    ):
        return "negation"  # every clause holding two or more of the claim's words (or the anchor) agrees with it
    if on("antonym") and tr.antonym_clash(claim.text, anchor):
        return "antonym"
    if on("name") and tr.wrong_name(claim.text, unit.text):
        return "name"
    if on("value") and (
        tr.wrong_value(claim.text, anchor)
        or (nugget and (slots.value_clash(claim.text, anchor, unit.text) or slots.value_missing(claim.text, unit.text)))
    ):
        return "value"
    # a nugget's names are looked for in the sentence itself (the answer elsewhere only for the question's)
    missing = claim.specifics - unit.raw - (context & (given | _modules(claim.text)) if nugget else context)
    extra = unit.specifics - claim.specifics - given
    if missing and extra and on("specific"):
        return "specific"
    return None


def unasserted(claim: Text, unit: Text) -> bool:
    """The unit holds the claim's words mostly where it asserts nothing (a question, a denial's or a report's
    frame, a "whether" or "if" clause: :func:`statements.asserted`)."""
    said = st.asserted(unit.text, st.conditional(claim.text))
    if said == unit.text:
        return False
    full = _weight(claim.stems & unit.parts, claim.specifics)
    return _weight(claim.stems & frozenset(tr.all_parts(said)), claim.specifics) < ASSERTED * full


def _level(
    r: float,
    cos: float,
    full: tuple[float, float, float],
    partial: tuple[float, float, float],
    meaning: float | None = None,
) -> int:
    """``meaning``: the cosine for the cosine-alone rule (default ``cos``)."""
    meaning = cos if meaning is None else meaning
    if (r >= full[0] and cos >= full[1]) or meaning >= full[2]:
        return 2
    if (r >= partial[0] and cos >= partial[1]) or meaning >= partial[2]:
        return 1
    return 0


def _units(text: str) -> list[Text]:
    seen: dict[str, Text] = {}
    for sentence in tr.split_sentences(text) or [text]:
        key = " ".join(sentence.lower().split())
        if key not in seen:
            seen[key] = analyse(sentence)
    return list(seen.values())


@dataclass(frozen=True)
class NuggetPlan:
    """What the rules decide about nuggets against an answer before any cosine: ``size`` nuggets, ``pairs``
    ((nugget, sentence, recall), the pairs the vetoes leave open), and the texts to compare (``claims``, the
    open nuggets ``rows``, against ``passages``: the open sentences ``cols`` then the query, last)."""

    size: int
    pairs: tuple[tuple[int, int, float], ...]
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    claims: tuple[str, ...]
    passages: tuple[str, ...]
    query: str

    @property
    def texts(self) -> tuple[str, ...]:
        """Every text the cosines need a vector for."""
        return (*self.claims, *self.passages)


def _denied(claim: Text, units: list[Text]) -> bool:
    """A sentence of the answer asserts the nugget's negation: the answer supports it nowhere."""
    return _on("contradiction") and any(
        claim.stems & u.parts and st.denies(tr.fold_negated(claim.text, u.text), tr.fold_negated(u.text, claim.text))
        for u in units
    )


@lru_cache(maxsize=16_384)
def plan_nuggets(query: str, answer: str, nuggets: tuple[str, ...]) -> NuggetPlan:
    """The rules' part of :func:`nugget_levels` (memoised: planning again costs nothing)."""
    q = analyse(query)
    given = q.stems | q.parts | q.raw
    every = _units(answer)
    units = [u for u in every if (u.statement or not _on("statement")) and (u.stems - given)]
    claims = [analyse(n) for n in nuggets]
    everything = frozenset().union(*(u.raw for u in every)) if every else frozenset()
    pairs = {
        (k, i): recall(claim, unit.parts, given)
        for k, claim in enumerate(claims)
        if not _denied(claim, units)
        for i, unit in enumerate(units)
        if claim.stems & unit.parts
        and not (_on("unasserted") and unasserted(claim, unit))
        and contradicts(claim, unit, given, everything, nugget=True) is None
    }
    rows = tuple(sorted({k for k, _ in pairs}))
    cols = tuple(sorted({i for _, i in pairs}))
    return NuggetPlan(
        len(claims),
        tuple((k, i, r) for (k, i), r in pairs.items()),
        rows,
        cols,
        tuple(nuggets[k] for k in rows),
        tuple(units[i].text for i in cols) + ((query or "?",) if pairs else ()),
        query,
    )


def finish_nuggets(plan: NuggetPlan, cosines: Cosines) -> list[int]:
    """:func:`nugget_levels` from its plan: the cosines of the pairs still open."""
    out = [0] * plan.size
    if not plan.pairs:
        return out
    sims = cosines(plan.claims, plan.passages)
    row_of, col_of = {k: n for n, k in enumerate(plan.rows)}, {i: n for n, i in enumerate(plan.cols)}
    echo = sims[:, -1] + ECHO_MARGIN if plan.query and _on("echo") else np.full(len(plan.rows), -1.0)
    for k, i, r in plan.pairs:
        # the cosine alone counts only where the sentence says more about the nugget than the question does
        cos = float(sims[row_of[k], col_of[i]])
        out[k] = max(out[k], _level(r, cos, FULL, PARTIAL, cos if cos >= echo[row_of[k]] else 0.0))
    return out


def nugget_levels(query: str, answer: str, nuggets: Sequence[str], cosines: Cosines) -> list[int]:
    """2 support / 1 partial / 0 none per nugget, judged against the answer's sentences. The rules run
    first (:func:`plan_nuggets`); MiniLM encodes only the sentences some nugget can still get support from
    (:func:`finish_nuggets`)."""
    if not nuggets:
        return []
    return finish_nuggets(plan_nuggets(query, answer, tuple(nuggets)), cosines)


@dataclass(frozen=True)
class SupportPlan:
    """The rules' part of :func:`support_level`: ``level`` when they decide alone (no statement: 0; copied
    word for word: 2), else None and the texts to compare (``claims``: the sentence then its clauses, against
    the passage's sentence ``units``)."""

    level: int | None
    claims: tuple[str, ...] = ()
    units: tuple[str, ...] = ()

    @property
    def texts(self) -> tuple[str, ...]:
        """Every text the cosines need a vector for."""
        return (*self.claims, *self.units)


@lru_cache(maxsize=16_384)
def plan_support(sentence: str, passage: str) -> SupportPlan:
    """What :func:`support_level` needs cosines of (memoised: planning again costs nothing)."""
    claim = analyse(sentence)
    if _on("s_empty") and (not claim.statement or support_rules.states_nothing(sentence)):
        return SupportPlan(0)  # hedges, questions, pointers, denials
    if " ".join(sentence.lower().split()).strip(" .") in " ".join(passage.lower().split()):
        return SupportPlan(2)  # the segment's own words, copied: it states exactly that (an identity, not tuned)
    parts = [analyse(c) for c in claim.clauses] if len(claim.clauses) > 1 else [claim]
    return SupportPlan(None, (claim.text, *(p.text for p in parts)), tuple(u.text for u in _units(passage)))


def support_level(sentence: str, passage: str, cosines: Cosines) -> int:
    """2 full / 1 partial / 0 none: does ``passage`` state every clause of ``sentence``?"""
    plan = plan_support(sentence, passage)
    if plan.level is not None:
        return plan.level
    claim = analyse(sentence)
    units = _units(passage)
    bag = frozenset().union(*(u.parts for u in units)) if units else frozenset()
    raw = frozenset().union(*(u.raw for u in units), support_rules.joined(passage)) if units else frozenset()
    parts = [analyse(c) for c in claim.clauses] if len(claim.clauses) > 1 else [claim]
    sims = cosines(plan.claims, plan.units)
    levels = []
    for k, part in enumerate(parts):
        cos = float(max(sims[0].max(), sims[k + 1].max())) if len(parts) > 1 else float(sims[0].max())
        level = _level(recall(part, bag, support_rules.advice_stems()), cos, SUPPORT_FULL, SUPPORT_PARTIAL)
        if level and _on("s_veto"):
            anchor = max(units, key=lambda u: _weight(part.stems & u.parts, part.specifics))
            if contradicts(part, anchor, bag) in ("negation", "antonym", "name", "value"):
                return 0  # a clause the segment contradicts: the sentence is not supported, even in part
        missing = (
            part.specifics - raw - support_rules.placeholders(part.text) - support_rules.spelled_apart(part.text, raw)
        )  # SHA-256 for sha256
        if level and _on("s_code_names") and support_rules.code_names(part.text) & missing:
            return 0  # the segment's words with a function, class or attribute it never names: another claim
        levels.append(level)
    return 2 if all(lv == 2 for lv in levels) else 0 if not any(levels) else 1
