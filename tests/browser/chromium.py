"""Headless Chromium for the browser tests: the Debian `chromium` package driven by Playwright for Python
(`pip install playwright`; no `playwright install` needed, nothing is downloaded). Tests skip without them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium_path() -> str | None:
    candidate = os.environ.get("TRACELENS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return candidate if os.path.exists(candidate) else None


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Playwright page in headless Chromium; skips the test when Chromium or Playwright is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium_path()
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()
