"""Moved below the stages to :mod:`ragnarok.sentences` (the sentence store splits segments with it too); the
old import path still works."""

from ragnarok.sentences import CODE_LINE, is_code  # noqa: F401 - re-exported
