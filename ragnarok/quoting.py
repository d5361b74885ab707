"""Quoting user input in messages: an error never echoes more than about ``QUOTE_CHARS`` of what it was sent."""

from __future__ import annotations

QUOTE_CHARS = 200


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
