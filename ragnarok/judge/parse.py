"""Reading labels out of whatever a judge model writes. A label that cannot be read is None (the caller
retries, then counts it as failed); nothing is guessed."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence

_LIST = re.compile(r"\[[^\[\]]*\]", re.DOTALL)
_QUOTED = re.compile(r"""["']([^"'\n]{1,400})["']""")


def parse_list(text: str) -> list[str] | None:
    """The first Python/JSON list of strings in ``text`` (code fences and chatter around it ignored)."""
    for match in _LIST.finditer(text):
        chunk = match.group(0)
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(chunk)
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return [v.strip() for v in value if v.strip()]
        quoted = _QUOTED.findall(chunk)  # a list with a stray quote: take its quoted items
        if quoted:
            return [q.strip() for q in quoted if q.strip()]
    return None


def _norm(label: str) -> str:
    return re.sub(r"[\s\-]+", "_", label.strip().strip("'\"").lower())


def parse_labels(text: str, allowed: Sequence[str], n: int) -> list[str] | None:
    """Exactly ``n`` labels, each one of ``allowed`` (case, spaces and dashes forgiven), or None."""
    items = parse_list(text)
    if items is not None and len(items) == n:
        labels = [_norm(item) for item in items]
        return labels if all(label in allowed for label in labels) else None
    # no list of n: the labels written out in order (``1. support 2. not_support``), exactly n of them
    pattern = "|".join(re.escape(a).replace("_", r"[_ -]") for a in sorted(allowed, key=len, reverse=True))
    found = [_norm(m) for m in re.findall(rf"(?<![\w-])(?:{pattern})(?![\w-])", text, re.I)]
    return found if items is None and len(found) == n else None


def parse_grade(text: str, low: int, high: int) -> int | None:
    """One integer grade in [low, high]: ``##final score: 2``, ``"O": 2``, or a lone digit; None when absent
    or ambiguous."""
    for pattern in (r"final\s*score\W*(\d+)", r"\"?O\"?\s*[:=]\s*(\d+)", r"score\W*(\d+)"):
        if found := re.search(pattern, text, re.IGNORECASE):
            value = int(found.group(1))
            return value if low <= value <= high else None
    digits = set(re.findall(rf"\b[{low}-{high}]\b", text))
    return int(digits.pop()) if len(digits) == 1 else None


def parse_verdict(text: str) -> str | None:
    """``[[A]]``, ``[[B]]`` or ``[[tie]]`` (or a bare ``A``/``B``/``tie`` answer) -> A, B or tie; None when
    absent or when the answer names more than one."""
    found = {
        m.upper() if m.upper() in ("A", "B") else "tie" for m in re.findall(r"\[\[\s*(A|B|[Tt][Ii][Ee])\s*\]\]", text)
    }
    if not found:
        bare = text.strip().strip(".").strip()
        found = {bare.upper()} if bare.upper() in ("A", "B") else ({"tie"} if bare.lower() == "tie" else set())
    return found.pop() if len(found) == 1 else None


def parse_choice(text: str, choices: Sequence[str]) -> str | None:
    """One of ``choices`` named alone (``[[A]]``, ``A``, ``tie``), or None when none or several appear."""
    found = {c for c in choices if re.search(rf"(?<![A-Za-z]){re.escape(c)}(?![A-Za-z])", text, re.IGNORECASE)}
    return found.pop() if len(found) == 1 else None


# castorini/umbrela's reading of a relevance grade (utils/common_utils.py, parse_fewshot_response): the
# lower-cased answer is tried against these patterns in order; the first pattern that matches anywhere gives
# the grade of its LAST match; an answer none matches is graded 0 (and counted as invalid). Note the quirks
# kept for parity: ``[:-=]`` is the character range ':' to '=', and the last pattern takes any digit 0-3.
_UMBRELA_PATTERNS = [
    re.compile(p, re.IGNORECASE | re.MULTILINE | re.DOTALL)
    for p in (
        r'"o"\s*[:-=]?\s*(0|1|2|3)',
        r"\'o\'\s*[:-=]?\s*(0|1|2|3)",
        r"o\s*[:-=]?\s*(0|1|2|3)",
        r'"overall_score"\s*[:-=]?\s*(0|1|2|3)',
        r'"overall"\s*[:-=]?\s*(0|1|2|3)',
        r'"overall score"\s*[:-=]?\s*(0|1|2|3)',
        r'"final score"\s*[:-=]?\s*(0|1|2|3)',
        r"final score\s*[:-=]?\s*(0|1|2|3)",
        r"final score is (0|1|2|3)",
        r'"final_score"\s*[:-=]?\s*(0|1|2|3)',
        r'"score"\s*[:-=]?\s*(0|1|2|3)',
        r'"o_score"\s*[:-=]?\s*(0|1|2|3)',
        r"output score is (0|1|2|3)",
        r"score is (0|1|2|3)",
        r"score of\s+(0|1|2|3)",
        r"assign(?:ing)?\s+(?:it\s+)?(?:a\s+)?score of\s+(0|1|2|3)",
        r"conclude(?:s|d)?\s+with\s+(?:a\s+)?score of\s+(0|1|2|3)",
        r"give(?:n)?\s+(?:it\s+)?(?:a\s+)?score of\s+(0|1|2|3)",
        r"i (?:would )?(?:give|assign)\s+(?:it\s+)?(?:a\s+)?score of\s+(0|1|2|3)",
        r"score:\s*(0|1|2|3)",
        r"[a-zA-Z]+\s+is\s+(0|1|2|3)\s",
        r"relevance category\s*[:-=]?\s*(0|1|2|3)",
        r"relevance category is (0|1|2|3)",
        r"it falls into the category (0|1|2|3)",
        r"category\s*(0|1|2|3)",
        r"relevance category (0|1|2|3)",
        r"relevance category for this passage would be (0|1|2|3)",
        r"the relevance category would be (0|1|2|3)",
        r"\n*(0|1|2|3)",
    )
]


def parse_umbrela(text: str) -> tuple[int, bool]:
    """``(grade, readable)`` as castorini/umbrela reads a judge's answer: never None, 0 when unreadable."""
    response = text.strip().lower()
    for pattern in _UMBRELA_PATTERNS:
        last = None
        for last in pattern.finditer(response):
            pass
        if last is not None:
            return int(last.group(1)), True
    return 0, False
