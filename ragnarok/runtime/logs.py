"""Log lines that say which request they belong to: the request id (``X-Request-ID``), route and pipeline stage.

They are context variables that worker threads copy, so a line logged in a search, a rerank or a backend call
carries them too. ``RAGNAROK_LOG_FORMAT=json`` writes one JSON object per line (and turns what libraries
print into log records); ``text``, the default, one readable line.

Design notes: docs/internals/runtime.md.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import IO, Any

from asgi_correlation_id.context import correlation_id

#: The route (path) of the request in progress; the stage ("retrieve bm25") when a gateway stage call runs.
route_var: ContextVar[str | None] = ContextVar("ragnarok_log_route", default=None)
stage_var: ContextVar[str | None] = ContextVar("ragnarok_log_stage", default=None)
#: The request header that tells a stage's service which pipeline stage the call is (for its log lines).
STAGE_HEADER = "Ragnarok-Stage"
REQUEST_ID_HEADER = "X-Request-ID"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+/=-]{0,127}")
FIELDS = ("request_id", "route", "stage", "latency_ms", "status")


def valid_request_id(value: str) -> bool:
    """A request id taken from a request: 1-128 characters of letters, digits and ``._:@+/=-`` (anything else
    is replaced by a fresh id: it goes into every log line of the request)."""
    return _SAFE.fullmatch(value) is not None


def request_id() -> str | None:
    """The id of the request in progress (None outside a request)."""
    return correlation_id.get()


def outgoing_headers(stage: str | None = None) -> dict[str, str]:
    """The headers a call made for the request in progress carries: its id and, for a stage call, the stage."""
    headers = {}
    if (rid := correlation_id.get()) is not None:
        headers[REQUEST_ID_HEADER] = rid
    if stage:
        headers[STAGE_HEADER] = stage.encode("ascii", "backslashreplace").decode()[:200]
    return headers


class RequestContext(logging.Filter):
    """Puts ``request_id``, ``route`` and ``stage`` on every record (None outside a request) unless the call
    gave them (``extra=``), and ``latency_ms`` and ``status`` when it did not."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = record.__dict__
        if values.get("request_id") is None:
            record.request_id = correlation_id.get()
        if values.get("route") is None:
            record.route = route_var.get()
        if values.get("stage") is None:
            record.stage = stage_var.get()
        values.setdefault("latency_ms", None)
        values.setdefault("status", None)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            out[name] = getattr(record, name, None)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``2026-11-25 18:46:02,123 INFO ragnarok.access [3f2a... retrieve bm25] POST /v1/retrieve 200 5.1 ms``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(context)s%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        parts = [p for p in (getattr(record, "request_id", None), getattr(record, "stage", None)) if p]
        record.context = f"[{' '.join(parts)}] " if parts else ""
        return super().format(record)


def configure(log_format: str = "text", level: str | int = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """One handler on the root logger (replacing the ones this function added before) writing ``log_format``
    lines at ``level`` to ``stream`` (stderr); httpx's and httpcore's per-request lines stay at WARNING.
    Returns the handler (a test removes it with :func:`unconfigure`)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_ragnarok", False)]:
        unconfigure(old)
    handler = logging.StreamHandler(stream or getattr(sys.stderr, "raw_stream", sys.stderr))
    handler._ragnarok = True  # type: ignore[attr-defined]
    handler.addFilter(RequestContext())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    noisy = [logging.getLogger(name) for name in ("httpx", "httpx2", "httpcore")]
    handler._restore = [(root, root.level), *((lg, lg.level) for lg in noisy)]  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    for logger in noisy:
        logger.setLevel(logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn(...) as records of logger py.warnings, in this format
    return handler


def unconfigure(handler: logging.Handler) -> None:
    """Remove a handler :func:`configure` added and restore the levels it changed."""
    logging.getLogger().removeHandler(handler)
    for logger, level in getattr(handler, "_restore", []):
        logger.setLevel(level)
    logging.captureWarnings(False)
    handler.close()


class LinesToLog(io.TextIOBase):
    """A text stream whose every line (ended by a newline or a carriage return: a progress bar's refresh) is
    logged as one record of logger ``name`` at ``level``; what a handler writes while one is logged goes to
    ``raw_stream`` as it is (no loop)."""

    def __init__(self, raw_stream: IO[str], name: str, level: int):
        super().__init__()
        self.raw_stream, self.logger, self.level = raw_stream, logging.getLogger(name), level
        self._pending = ""
        self._lock = threading.RLock()
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False  # no terminal: progress is written as lines, not bars (ragnarok.runtime.progress)

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw_stream, "encoding", "utf-8")

    def write(self, text: str) -> int:
        if getattr(self._local, "busy", False):  # a handler writing to this stream (logging's last resort)
            return self.raw_stream.write(text)
        with self._lock:
            lines = re.split(r"[\r\n]", self._pending + text)
            self._pending = lines.pop()
        for line in lines:
            self._log(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            line, self._pending = self._pending, ""
        self._log(line)
        self.raw_stream.flush()

    def _log(self, line: str) -> None:
        if not line.strip():
            return
        self._local.busy = True
        try:
            self.logger.log(self.level, line.rstrip())
        finally:
            self._local.busy = False


def capture_std_streams() -> None:
    """``sys.stdout`` and ``sys.stderr`` as :class:`LinesToLog` (logger ``stdout`` at INFO, ``stderr`` at
    WARNING), for a process whose output must be log records only (``RAGNAROK_LOG_FORMAT=json``); the
    handler :func:`configure` adds writes to the real stderr. Writes to the file descriptors themselves (native
    code) are not seen: the libraries' own switches keep them quiet (:mod:`ragnarok.runtime.quiet`)."""
    if not isinstance(sys.stdout, LinesToLog):
        sys.stdout = LinesToLog(sys.stdout, "stdout", logging.INFO)
    if not isinstance(sys.stderr, LinesToLog):
        sys.stderr = LinesToLog(sys.stderr, "stderr", logging.WARNING)
