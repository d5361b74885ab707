"""Telling a line of code from a line of prose: used on segments (the extractive generator leaves code out) and
on model output (post-processing drops code lines and fenced blocks, keeping their citation markers)."""

from __future__ import annotations

import re

CODE_LINE = re.compile(
    r"^(?:>>>|\.\.\.(?:\s|$)|\$ |[=\-~^*#+|]{3,}|\||\+-"  # doctest and shell prompts, tables, rules
    r"|(?:def|class|import|from\s+\S+\s+import|return|raise|yield|elif|else:|try:|except\b|finally:|with\s.*:$)"
    r"|[\w.\[\]'\"]+\s*(?:[-+*/|&]?=)\s*\S"  # an assignment: x = 1, a.b += c
    r"|[\w.]+\(.*\)\s*[;:]?$"  # a bare call or signature: foo(a, b)
    r"|[@{}<]|[\])}]+[,;]?$)")


def is_code(line: str, min_letters: float = 0.55) -> bool:
    """Whether a line is code, a prompt, a table rule or (under ``min_letters`` of letters) mostly symbols."""
    s = line.strip()
    if not s:
        return False
    letters = sum(map(str.isalpha, s))
    return bool(CODE_LINE.match(s)) or letters < min_letters * len(s.replace(" ", ""))
