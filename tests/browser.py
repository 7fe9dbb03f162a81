"""Helpers for the tests that drive Debian's Chromium through Playwright (not a test module).

The browser is the system one (``apt-get install chromium``): Playwright's own browser
download cannot work on the project's machines. Without it the browser tests skip, unless
``BLITZ_REQUIRE_BROWSER=1`` (set by ``.ci/run``) turns a missing browser into a failure.
tests/conftest.py's ``browser`` fixture opens one with :func:`launch_chromium` per session.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM_ENV = "BLITZ_CHROMIUM"
REQUIRE_ENV = "BLITZ_REQUIRE_BROWSER"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_required() -> bool:
    """True when ``BLITZ_REQUIRE_BROWSER`` asks for a missing browser to fail the tests."""
    return os.environ.get(REQUIRE_ENV, "").strip() in {"1", "true", "yes"}


def unavailable(reason: str) -> None:
    """Skip on a learner's machine; fail where a browser is required (CI)."""
    if browser_required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1, so this is a failure, not a skip)")
    pytest.skip(f"{reason}; install it (apt-get install chromium) to run the browser tests")


def chromium_path() -> Path:
    """The system Chromium: ``$BLITZ_CHROMIUM``, else ``chromium`` on the PATH."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        if not Path(configured).is_file():
            unavailable(f"no Chromium found: {CHROMIUM_ENV}={configured} does not exist")
        return Path(configured)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        unavailable(f"no Chromium found (no `chromium` on the PATH, {CHROMIUM_ENV} unset)")
    return Path(found)


@contextmanager
def launch_chromium() -> Iterator[Browser]:
    """A headless system Chromium driven by Playwright; skips (or fails) when there is none."""
    executable = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the `playwright` Python package is not installed (see requirements.txt)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(executable), args=LAUNCH_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()
