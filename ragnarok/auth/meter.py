"""Moved below the stages to :mod:`ragnarok.core.meter` (the generators count their calls into it); the old import
path still works."""

from ragnarok.core.meter import (  # noqa: F401 - re-exported
    CallLimitReached,
    CallNotRecorded,
    Meter,
    add_tokens,
    add_usage,
    calling,
    current,
    metering,
    take_call,
)
