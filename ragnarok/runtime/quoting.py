"""Quoting user input in messages: an error never echoes more than about ``QUOTE_CHARS`` of what it was sent."""

from __future__ import annotations

import re
from typing import Any

QUOTE_CHARS = 200
#: Where a body may hold a lone surrogate: a ``\\uD800``-``\\uDFFF`` escape, or one encoded as (invalid) UTF-8,
#: which ``json.loads`` of bytes lets through. Only a body that matches is searched string by string.
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``repr(text)``, cut to ``limit`` characters of ``text`` (the cut says how long it was). ``repr`` escapes
    what cannot be shown (lone surrogates, control characters), so the result is always printable."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


def shorten(message: str, limit: int = 4 * QUOTE_CHARS) -> str:
    """``message`` cut to ``limit`` characters, saying how many were left out (for messages built elsewhere)."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}… ({len(message) - limit:,} more characters)"


def lone_surrogate(value: Any, raw: bytes | None = None) -> str | None:
    """Where a string of ``value`` (parsed JSON) holds a lone surrogate, e.g. ``choices.0.message.content
    ('\\ud800' at character 12)``; None when none does. Given the UTF-8 ``raw`` it was parsed from, ``value`` is
    only searched when ``raw`` may hold one."""
    if raw is not None and not _MAYBE_SURROGATE.search(raw):
        return None

    def found(text: str) -> re.Match[str] | None:
        return None if text.isascii() else _SURROGATE.search(text)

    def where(path: tuple[Any, ...]) -> str:
        return (
            ".".join(
                str(p) if not isinstance(p, str) or (len(p) <= 40 and p.isprintable()) else quote(p, 40) for p in path
            )
            or "the answer"
        )

    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and (m := found(key)):
                    return f"a key of {where(path)} ({ascii(m.group())} at character {m.start():,})"
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(item))
        elif isinstance(item, str) and (m := found(item)):
            return f"{where(path)} ({ascii(m.group())} at character {m.start():,})"
    return None
