"""Debian's chromium driven by playwright for the page tests: headless, no sandbox, a fresh profile under the
test's tmp dir. Without playwright or chromium a test skips locally and fails in CI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing(what: str) -> None:
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"{what}: CI must have playwright and Debian's chromium")
    pytest.skip(what)


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A persistent playwright context (one page per ``new_page()``) in a fresh profile directory."""
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415
    except ImportError as exc:
        _missing(f"playwright is not installed: {exc}")
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        _missing(f"{CHROMIUM} not found")
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": width, "height": height},
        )
        try:
            yield context
        finally:
            context.close()
