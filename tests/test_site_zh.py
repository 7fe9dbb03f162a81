"""What only the Chinese teaching site (``zh/`` in the site) has, checked in headless Chromium.

The checks every page gets in both languages (console errors, failed or off-site requests,
script the site did not write, broken images and links, math typeset, phone width, the index
and downloads) are in tests/test_site.py, parametrized by language. Here: the language switch
leads to the same page in the other language and back, the search finds a Chinese word inside
a sentence (Chinese has no spaces), and CJK text is drawn with a real CJK system font
(Chromium reports which font drew the glyphs). The site, server and browser are conftest's,
once a session.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from tests import browser as browser_helpers
from tools.authoring import i18n
from tools.lessons import lesson_notebooks
from tools.publishing.pages import parse_header

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
CSS = ROOT / "tools" / "publishing" / "templates" / "static" / "site.css"
CJK = re.compile(r"[\u3400-\u9fff]")
SWITCH = '<a class="blitz-lang" href="{href}" hreflang="{lang}"'


def _cjk_families() -> list[str]:
    """The CJK font families site.css names for Chinese pages (its one definition)."""
    rule = re.search(r":root:lang\(zh\)\s*\{\s*--blitz-font:([^;]+);", CSS.read_text())
    assert rule, f"{CSS} has no `:root:lang(zh) {{ --blitz-font: ... }}` rule"
    names = [name.strip().strip('"') for name in rule.group(1).split(",")]
    latin = {"system-ui", "-apple-system", "Segoe UI", "Roboto", "DejaVu Sans", "sans-serif"}
    return [name for name in names if name not in latin]


@pytest.mark.e2e
def test_language_switch_goes_both_ways(browser, site: Path, served_site: str) -> None:
    """Every page links the same page in the other language; clicking it goes there and back."""
    names = ["index.html"] + [f"{p.stem}.html" for p in NOTEBOOKS] + ["teaching.html"]
    for name in names:
        assert SWITCH.format(href=f"zh/{name}", lang="zh-CN") in (site / name).read_text(), name
        assert SWITCH.format(href=f"../{name}", lang="en") in (site / "zh" / name).read_text()
    name = names[1]
    page = browser.new_page()
    try:
        page.goto(served_site + name)
        page.click("a.blitz-lang[hreflang='zh-CN']")
        page.wait_for_load_state("load")
        assert page.url == f"{served_site}zh/{name}"
        assert page.evaluate("document.documentElement.lang") == "zh-CN"
        page.click("a.blitz-lang[hreflang='en']")
        page.wait_for_load_state("load")
        assert page.url == served_site + name
    finally:
        page.close()


@pytest.mark.e2e
def test_chinese_search_finds_a_word_inside_a_sentence(browser, served_site: str) -> None:
    path = NOTEBOOKS[0]
    zh = i18n.translate(nbformat.read(path, as_version=4), i18n.Catalog.load(path))
    summary = parse_header(path, zh).summary
    run = re.search(r"[\u3400-\u9fff]{4,}", summary)
    assert run, f"{path.stem}'s Chinese summary has no Chinese text yet: {summary!r}"
    word = run.group(0)[1:4]  # from the middle of a run: no word boundary to lean on
    page = browser.new_page()
    try:
        page.goto(served_site + "zh/index.html")
        page.fill("#blitz-search-input", word)
        hits = page.eval_on_selector_all(
            "#blitz-search-results a", "links => links.map(a => a.getAttribute('href'))"
        )
        status = page.inner_text("#blitz-search-status")
    finally:
        page.close()
    assert f"{path.stem}.html" in hits, f"searching {word!r} gave {hits}"
    assert "条结果" in status, f"the result count is not in Chinese: {status!r}"


@pytest.mark.e2e
def test_cjk_text_is_drawn_with_a_cjk_system_font(browser, served_site: str) -> None:
    """Chromium's own record of which font drew the glyphs: a CJK face named in site.css.

    A page without a CJK font would draw boxes ("tofu") from some Latin font; a web font
    would show as a custom font. Neither may happen.
    """
    families = _cjk_families()
    context = browser.new_context()
    try:
        for name, selector in (
            ("index.html", "#lessons"),
            # the first bold label of the translated first cell (目标)
            (f"{NOTEBOOKS[0].stem}.html", ".jp-MarkdownOutput strong"),
        ):
            page = context.new_page()
            page.goto(f"{served_site}zh/{name}")
            text = page.inner_text(selector).strip()
            assert re.fullmatch(f"{CJK.pattern}+", text), f"zh/{name} {selector}: {text!r}"
            cdp = context.new_cdp_session(page)
            root = cdp.send("DOM.getDocument")["root"]["nodeId"]
            node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
            cdp.send("CSS.enable")
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            used = {f["familyName"] for f in fonts}
            if not used & set(families):
                installed = (
                    shutil.which("fc-list")
                    and subprocess.run(
                        ["fc-list", ":lang=zh", "family"], capture_output=True, text=True
                    ).stdout.strip()
                )
                if not installed:
                    browser_helpers.unavailable(
                        "no CJK font installed (apt-get install fonts-wqy-microhei)"
                    )
            assert used <= set(families), f"zh/{name}: {text!r} drawn with {fonts}, not {families}"
            assert not any(f["isCustomFont"] for f in fonts), f"a web font was used: {fonts}"
            assert sum(f["glyphCount"] for f in fonts) == len(text), fonts
            page.close()
    finally:
        context.close()
