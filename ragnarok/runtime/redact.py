"""Secrets never leave the process: every configured API key value is masked in messages, answers and logs.

What counts as a secret: the current value of every environment variable a backend names as its
``api_key_env`` (registered when a generator or listwise reranker is configured) and every key value a
backend sends (registered when it is read). :func:`redact` is the one function that masks them; it runs where
backend errors are built (``GenerationError``, ``RerankError``, :func:`quote`) and, once anything is
registered, on every log record of the process (a log record factory: it sees the records of every logger
and library, whatever handlers are configured).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from ragnarok.runtime import quoting

MASK = "***"
#: Shorter values are not secrets (no real key is so short): masking them would mangle ordinary text.
MIN_SECRET_CHARS = 8
_env_names: set[str] = set()
_values: set[str] = set()
_lock = threading.Lock()
_installed = False


def register_env(name: str | None) -> None:
    """Treat the value of environment variable ``name`` (now and later) as a secret."""
    if name:
        with _lock:
            _env_names.add(name)
        install_log_redaction()


def register_value(value: str | None) -> None:
    """Treat ``value`` (a key about to be sent) as a secret."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _values.add(value)
        install_log_redaction()


def secrets() -> list[str]:
    """The values to mask, longest first (a key that contains another is masked whole)."""
    with _lock:
        found = {os.environ.get(name, "") for name in _env_names} | _values
    return sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(text: str, found: list[str] | None = None) -> str:
    """``text`` with every secret replaced by ``***``."""
    for secret in secrets() if found is None else found:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def quote(text: str, limit: int = quoting.QUOTE_CHARS) -> str:
    """``text`` redacted, then quoted and cut to ``limit`` characters (that order: a cut key would leak)."""
    return quoting.quote(redact(text), limit)


def _redact_record(record: logging.LogRecord) -> None:
    found = secrets()
    if not found:
        return
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a malformed call is logging's to report, not ours
        return
    clean = redact(message, found)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and record.exc_info[1] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact(text, found)
        if clean != text:
            record.exc_text = clean  # formatters use this instead of formatting the traceback again


def install_log_redaction() -> None:
    """Mask secrets in every log record created from now on (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
