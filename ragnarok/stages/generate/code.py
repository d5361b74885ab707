"""Moved below the stages to :mod:`ragnarok.core.sentences` (the sentence store splits segments with it too); the
old import path still works."""

from ragnarok.core.sentences import CODE_LINE, is_code  # noqa: F401 - re-exported
