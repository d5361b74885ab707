"""Rules on the surface of a sentence for the proxy judge (:mod:`ragnarok.judge.proxy`): words and their stems,
"specifics" (identifiers, numbers, names), negation cues, antonyms, clause splitting and whether a sentence is
a statement at all.

No model and no data download: the only resource is the MiniLM tokenizer's word list (which words are
ordinary English), read once from the packaged model. The fixed word lists are in :mod:`ragnarok.judge.wordlists`.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ragnarok.judge.wordlists import (
    ANTONYM_PAIRS,
    AUXILIARIES,
    DETERMINERS,
    FUNCTION,
    GENERIC_NAMES,
    INFLECTED,
    IRREGULAR,
    LINKS,
    NAME_HEADS,
    NEG_PREFIXES,
    NEGATIONS,
    PREFIXES,
    SUFFIXES,
    TYPES,
    VERB_SET,
)

_TOKEN = re.compile(r"%[A-Za-z]|[A-Za-z0-9_][\w.]*(?:'[a-z]{1,2}\b)?(?:\(\))?")
_SENT = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)(?<=[.!?])\s+(?=\S)|\n+")
_CLAUSE = re.compile(
    r"\s*(?:;|:\s|,\s*(?:and|but|while|whereas|although|though|so|yet|or|because|since)\s|"
    r"\s(?:but|whereas|while|because)\s)\s*",
    re.I,
)
_NT = re.compile(r"n't\b|\bcan ?not\b", re.I)
_KWARG = re.compile(r"\b(\w+)\s*=\s*('[^']*'|\"[^\"]*\"|[\w.+-]+)")


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    from nltk.stem import PorterStemmer  # noqa: PLC0415 - importing nltk takes ~1.5 s: on first use only

    return PorterStemmer()


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    return _stemmer().stem(word.lower().rstrip("()"))


@lru_cache(maxsize=1)
def stem_antonyms() -> dict[str, set[str]]:
    """:data:`ANTONYM_PAIRS` by stem, every partner of a word (both ways as the table lists them)."""
    out: dict[str, set[str]] = {}
    for a, b in ANTONYM_PAIRS:
        out.setdefault(stem(a), set()).add(stem(b))
    return out


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """The MiniLM tokenizer's whole words (its vocab.txt, ordinary English and common names); empty when
    the model is not installed (then every unknown-looking word is a specific only by its shape)."""
    try:
        from pathlib import Path

        from ragnarok.stages.embed.encoder import resolve_model

        path = Path(resolve_model("minilm")) / "vocab.txt"
        return frozenset(w for w in path.read_text(encoding="utf-8").split() if w.isalpha())
    except Exception:  # noqa: BLE001 - no model: shape rules only
        return frozenset()


@lru_cache(maxsize=100_000)
def tokens(text: str) -> tuple[str, ...]:
    """Words and code tokens in order (a sentence's final period dropped; ``parse_args()`` kept whole)."""
    out = []
    for t in _TOKEN.findall(text):
        t = t.rstrip(".")
        if t.endswith(("'s", "'t", "'re", "'ll", "'ve", "'d", "'m")) and not t.endswith("n't"):
            t = t.rsplit("'", 1)[0]
        if t:
            out.append(t)
    return tuple(out)


@lru_cache(maxsize=200_000)
def is_word(word: str) -> bool:
    """An ordinary word: in the vocabulary, or an inflection, derivation or prefixed form of one there
    (``parses``, ``recursively``, ``dictionaries``, ``subclass``, ``iterable``)."""
    vocab, w = vocabulary(), word.lower()
    if w in vocab:
        return True
    for suffix in SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            root = w[: -len(suffix)]
            if (
                root in vocab
                or root + "e" in vocab
                or (root.endswith("i") and root[:-1] + "y" in vocab)
                or (len(root) > 3 and root[-1] == root[-2] and root[:-1] in vocab)
            ):
                return True
    return any(w.startswith(p) and len(w) - len(p) >= 4 and is_word(w[len(p) :]) for p in PREFIXES)


@lru_cache(maxsize=200_000)
def is_specific(token: str) -> bool:
    """An identifier, a number, or a word no dictionary knows (see the module's docstring)."""
    if token.startswith("%") or any(c.isdigit() for c in token) or "_" in token or "." in token or "(" in token:
        return len(token) > 1
    if len(token) < 3:
        return False
    if any(c.isupper() for c in token[1:]):  # camelCase, acronyms
        return True
    if token.lower() in TYPES:  # "hex", "utf8": a type, compared by wrong_value
        return False
    if token.lower().endswith(INFLECTED):  # "parses", "recursively", "iterable": a term, not a name
        return False
    return token.isalpha() and bool(vocabulary()) and not is_word(token)


@lru_cache(maxsize=200_000)
def parts(token: str) -> tuple[str, ...]:
    """A dotted name's parts (``gzip.open`` -> ``gzip``, ``open``), lower-cased, ``()`` dropped."""
    return tuple(p for p in token.lower().rstrip("()").replace("()", "").split(".") if p)


def specifics(text: str) -> set[str]:
    """The specific parts of a text: every part of a code token as written (``gzip.open`` gives ``gzip`` and
    ``open``, so it is not ``bz2.open``; ``%Y`` gives ``%y``), and a plain name or term as ``~`` + its stem
    (``argparse``, ``parse``: found as ``parsing`` too). Looked for in :func:`raw_parts`."""
    out: set[str] = set()
    for t in tokens(text):
        if is_specific(t):
            out.update(("~" + stem(t),) if t.isalpha() else parts(t))
    return out


def content_stems(text: str) -> set[str]:
    """Stems of the content words and the parts of code tokens (function words out)."""
    out: set[str] = set()
    for t in tokens(text):
        for p in parts(t):
            if p not in FUNCTION and len(p) > 1 or p.startswith("%"):
                out.add(p if is_specific(p) else stem(p))
    return out


def all_parts(text: str) -> set[str]:
    """Every word and code part, lower-cased and stemmed (for finding specifics and antonyms)."""
    found = {p for t in tokens(text) for p in parts(t)}
    return found | {p if is_specific(p) else stem(p) for p in found}


@lru_cache(maxsize=100_000)
def negations(text: str) -> int:
    words = re.findall(r"[A-Za-z']+", text)
    # Python's None (capitalised inside a sentence) is a value, not a negation
    return sum(w.lower() in NEGATIONS and (w != "None" or not i) for i, w in enumerate(words)) + len(_NT.findall(text))


_NOT_WORD = re.compile(r"\bnot\s+([A-Za-z]{3,})\b", re.I)


@lru_cache(maxsize=100_000)
def fold_negated(text: str, other: str) -> str:
    """``text`` with each "not W" written as the negative-prefixed word ``other`` uses for it ("not valid" ->
    "invalid" where ``other`` says "invalid"): a negated adjective is that adjective's opposite, no denial."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", other)}

    def fold(m: re.Match[str]) -> str:
        word = m.group(1).lower()
        return next((p + word for p in NEG_PREFIXES if p + word in words), m.group(0))

    return _NOT_WORD.sub(fold, text) if "not" in text.lower() else text


@lru_cache(maxsize=100_000)
def antonym_clash(claim: str, unit: str) -> bool:
    """The unit says the opposite of a word of the claim: it holds an antonym (or a negative-prefixed form)
    of a claim word and not the word itself."""
    have = {stem(w) for w in re.findall(r"[A-Za-z-]+", unit.lower())}
    mine = {stem(w) for w in re.findall(r"[A-Za-z-]+", claim.lower())}
    for s in mine:
        if s in have:
            continue
        if (stem_antonyms().get(s, set()) - mine) & have:  # a claim with both words of a pair: no clash
            return True
        if len(s) > 3 and any(prefix + s in have for prefix in NEG_PREFIXES):
            return True
    return False


def raw_parts(text: str) -> set[str]:
    """Every word and code part as written (lower-cased), and ``~`` + the stem of each alphabetic one: where
    :func:`specifics` are looked for (a code part must be written as it is; a name may be inflected)."""
    found = {p for t in tokens(text) for p in parts(t)}
    return found | {"~" + stem(p) for p in found if p.isalpha()}


@lru_cache(maxsize=100_000)
def name_slots(text: str) -> frozenset[tuple[str, str]]:
    """``(kind, name)`` for each "NAME module/class/function/argument ..." in the text (kind: the head's
    group, so package = module): what the text says a thing is called."""
    found = tokens(text)
    words = [t.lower().rstrip("()") for t in found]
    # a name: a specific ("argparse package"), or a word right after an article ("the logging module"), not a
    # description ("command-line parsing library")
    return frozenset(
        (NAME_HEADS[w], words[i - 1])
        for i, w in enumerate(words)
        if i
        and w in NAME_HEADS
        and words[i - 1] not in FUNCTION
        and words[i - 1] not in GENERIC_NAMES
        and (is_specific(found[i - 1]) or (i > 1 and words[i - 2] in DETERMINERS))
    )


@lru_cache(maxsize=100_000)
def wrong_name(claim: str, unit: str) -> bool:
    """The claim calls a thing by one name, the unit gives the same kind of thing another and never the
    claim's (``the logging module`` / ``the syslog module``; ``hashlib.sha256`` / ``the crypt module's
    sha256()``: a dotted name's first part is a module; ``subprocess.run`` / ``subprocess.get_lines``)."""
    mine, theirs = name_slots(claim) | _dotted_modules(claim), name_slots(unit) | _dotted_modules(unit)
    return any((kind, name) not in theirs and any(k == kind for k, _ in theirs) for kind, name in mine)


def _dotted_modules(text: str) -> set[tuple[str, str]]:
    """``("module", m)`` and ``("in m", attribute)`` for each ``m.attribute``: ``subprocess.get_lines`` is
    another function than ``subprocess.run``."""
    out: set[tuple[str, str]] = set()
    for t in tokens(text):
        name = parts(t)
        if "." in t.rstrip("()") and t[0].islower() and len(name) > 1 and name[0].isidentifier():
            out |= {("module", name[0]), ("in " + name[0], name[-1])}
    return out


@lru_cache(maxsize=100_000)
def wrong_value(claim: str, unit: str) -> bool:
    """The same keyword set to another value (``newline=''`` / ``newline='\\r\\n'``), or another type or
    encoding named where the claim names one (returns a list / returns a string; hex / base64)."""
    mine = {k.lower(): v for k, v in _KWARG.findall(claim) if v.strip(".")}  # "filename=..." is no value
    theirs = {k.lower(): v for k, v in _KWARG.findall(unit) if v.strip(".")}
    if any(k in theirs and theirs[k] != v and v not in theirs.values() for k, v in mine.items()):
        return True
    claimed = {TYPES[w] for w in (t.lower() for t in tokens(claim)) if w in TYPES}
    said = {TYPES[w] for w in (t.lower() for t in tokens(unit)) if w in TYPES}
    return any(item not in said and any(g == group for g, _ in said) for item in claimed for group in [item[0]])


def split_sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENT.split(text)) if s]


def clauses(sentence: str) -> list[str]:
    return [c for c in (p.strip(" ,.") for p in _CLAUSE.split(sentence)) if c] or [sentence]


def finite_verb_at(words: list[str] | tuple[str, ...], i: int) -> bool:
    """``words[i]`` looks like a finite verb: an auxiliary, a common verb's finite form, or a content word right
    before an article, a pronoun or a preposition (the place of a verb: "handles this", "walks the", "rely
    on")."""
    lw = words[i].lower()
    if lw in AUXILIARIES or lw in IRREGULAR or lw.endswith("n't"):
        return True
    base = {
        lw,
        lw[:-1] if lw.endswith("s") else lw,
        lw[:-2] if lw.endswith("es") else lw,
        lw[:-3] + "y" if lw.endswith("ies") else lw,
        lw[:-1] if lw.endswith("d") else lw,
        lw[:-2] if lw.endswith("ed") else lw,
    }
    if base & VERB_SET:
        return True
    return lw not in FUNCTION and lw.isalpha() and i + 1 < len(words) and words[i + 1].lower() in LINKS


def _finite_verb(words: list[str]) -> bool:
    return any(finite_verb_at(words, i) for i in range(len(words)))


MIN_FUNCTION = 0.12


@lru_cache(maxsize=100_000)
def is_statement(sentence: str) -> bool:
    """Well formed enough to state a fact: >= 3 words, a finite-verb cue, function words >= 12 % of the
    words that are not specifics."""
    words = tokens(sentence)
    if len(words) < 3:
        return False
    pieces = [p for p in sentence.split(",") if p.strip()]
    if len(pieces) >= 3 and len(words) / len(pieces) <= 2.5:  # "a, b c, d": a list of terms
        return False
    function = sum(w.lower() in FUNCTION for w in words)
    plain = sum(not is_specific(w) for w in words)  # code and names do not dilute the grammar
    return function >= 1 and function / max(plain, 1) >= MIN_FUNCTION and _finite_verb(words)
