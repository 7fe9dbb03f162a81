"""Helpers for the tests that drive Debian's Chromium through Playwright (not a test module).

The browser is the system one (``apt-get install chromium``): Playwright's own browser
download cannot work on the project's machines. Without it the browser tests skip, unless
``BLITZ_REQUIRE_BROWSER=1`` (set by ``.ci/run``) turns a missing browser into a failure.
tests/conftest.py's ``browser`` fixture opens one with :func:`launch_chromium` per session.

:func:`axe_violations` runs axe-core (the copy that the pinned ``axe-playwright-python`` wheel
bundles, so no network) on an open page: the WCAG 2.1 A/AA check the site's and the decks'
accessibility tests share. :func:`settled_math` counts a page's math once MathJax 2 has done
all it was asked to, and :class:`Deadline` bounds every wait of one check together: tests
wait for events (Reveal's ready state, MathJax's queue), never for a time.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

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


class Deadline:
    """One time limit shared by all the waits of a check: each wait gets what is left of it, so
    a slow machine may spend it where it likes and the check still ends."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def ms(self) -> float:
        """Milliseconds left, for Playwright's ``timeout`` (never 0, which means no limit)."""
        return max(1.0, (self.end - time.monotonic()) * 1000)


# [TeX sources, typeset formulas, errors] on a page MathJax 2 renders with HTML-CSS.
MATH_COUNTS_JS = """() => [document.querySelectorAll('script[type^="math/tex"]').length,
  document.querySelectorAll('span.MathJax[id$="-Frame"]').length,
  document.querySelectorAll('.MathJax_Error, .merror').length]"""


def settled_math(page: Page, timeout_ms: float) -> list[int]:
    """``page``'s [sources, typeset, errors] counted inside a callback that MathJax.Hub.Queue
    runs after everything queued before it: the first typesetting and every re-rendering a
    slide change queued (a Rerender removes a slide's formulas before it draws them again, so
    a count taken beside MathJax's queue can catch it half done)."""
    page.wait_for_function("window.MathJax && MathJax.isReady", timeout=timeout_ms)
    page.evaluate(
        f"() => {{ window.blitzMath = null; MathJax.Hub.Queue(() => {{ window.blitzMath = "
        f"({MATH_COUNTS_JS})(); }}); }}"
    )
    return page.wait_for_function("window.blitzMath", timeout=timeout_ms).json_value()


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


# The rules of WCAG 2.0 and 2.1, levels A and AA (axe-core's tags): what "WCAG 2.1 AA" means.
AXE_WCAG_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")


def axe_source() -> str:
    """axe.min.js as shipped in the ``axe-playwright-python`` wheel (requirements.txt pins it).

    Only the script is used, injected by :func:`axe_violations`: the wheel's own runner
    reports every impact and cannot choose the rules by tag.
    """
    try:
        from axe_playwright_python.base import AXE_FILE_PATH
    except ImportError:
        unavailable("the `axe-playwright-python` package is not installed (see requirements.txt)")
    return Path(AXE_FILE_PATH).read_text(encoding="utf-8")


def axe_violations(
    page: Page,
    *,
    impacts: Iterable[str] = ("critical", "serious"),
    tags: Iterable[str] = AXE_WCAG_TAGS,
    context: str | None = None,
) -> list[str]:
    """axe-core's violations of ``tags`` on ``page`` (as it is now), one line each, for
    the ``impacts`` asked for (axe's: critical, serious, moderate, minor).

    A line reads ``rule-id (impact): N nodes, first <css target>: <what the rule wants>``, so
    a failing test names what to fix and where. ``context`` is a CSS selector that limits
    the check to part of the page (e.g. one slide); the whole document otherwise. axe checks
    what is rendered: hidden elements (a folded solution, a slide not shown) are skipped,
    so open what must be checked first.
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # Evaluated rather than added as a <script> element: the page's DOM stays as the site
        # wrote it (tests/test_site.py reports any script the site did not write).
        page.evaluate(axe_source())
    options = {
        "runOnly": {"type": "tag", "values": list(tags)},
        "resultTypes": ["violations"],
    }
    found = page.evaluate(
        "([context, options]) => axe.run(context || document, options)"
        ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.length, first: v.nodes.length ? v.nodes[0].target.join(' ') : ''})))",
        [context, options],
    )
    wanted = set(impacts)
    return [
        f"{v['id']} ({v['impact']}): {v['nodes']} nodes, first {v['first']}: {v['help']}"
        for v in found
        if v["impact"] in wanted
    ]
