"""The Chinese teaching site (build/site/zh): the English pages' browser checks, plus Chinese.

Every Chinese page gets what tests/test_site.py gives the English ones (console errors,
failed or off-site requests, broken images and links, math typeset, phone width), opened
as ``file://`` and served. On top: the language switch leads to the same page in the other
language and back, the search finds a Chinese word inside a sentence (Chinese has no
spaces), and CJK text is drawn with a real CJK system font (Chromium reports which font
drew the glyphs). Screenshots land in ``build/site/_screenshots/zh/``.

The site is built once per test session: when tests/test_site.py built build/site in this
session already, its build is reused (a second build would delete its screenshots).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests import browser as browser_helpers
from tests.browser import launch_chromium
from tests.conftest import ROOT, lesson_notebooks
from tests.test_site import (
    DESKTOP,
    GOOD_HEADER,
    PHONE,
    SHOTS,
    SITE,
    BuiltSite,
    Findings,
    _check_links,
    _visit,
    served_site,  # noqa: F401  (a fixture: the site behind http.server)
)
from tests.test_site import test_pages_reference_no_other_host as _no_other_host
from tools import i18n
from tools.build_site import build_site, parse_header

ZH = "zh"
ZH_SHOTS = SHOTS / ZH
CSS = ROOT / "tools" / "site_templates" / "static" / "site.css"
CJK = re.compile(r"[\u3400-\u9fff]")
_SESSION_START = time.time()  # modules are imported before any fixture builds the site

ZH_HEADER = """# 07 · 示例课程

只在这个测试里存在的一课。

**目标**
- 检查解析器

**先修：** 无。

**硬件**：任何 CPU 都可以。GPU 可有可无。

**运行时间：** 在 2 核 CPU 上约 1 秒（用 nbval 测得）；另有说明。
"""


@pytest.fixture(scope="module")
def site() -> BuiltSite:
    """build/site with its zh/ folder, built by `make html`'s command line (once a session)."""
    lessons = [p.stem for p in lesson_notebooks()]
    built_now = (SITE / ZH / "index.html").is_file() and (
        (SITE / ZH / "index.html").stat().st_mtime >= _SESSION_START
    )
    start = time.perf_counter()
    if not built_now:
        out = subprocess.run(
            [sys.executable, str(ROOT / "tools" / "build_site.py"), "--out", str(SITE)],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert out.returncode == 0, f"site build failed:\n{out.stdout}\n{out.stderr}"
    return BuiltSite(SITE, lessons, time.perf_counter() - start)


@pytest.fixture(scope="module")
def browser():
    with launch_chromium() as chromium:
        yield chromium


def _zh_pages(site: BuiltSite) -> list[str]:
    return [f"{ZH}/index.html"] + [f"{ZH}/{stem}.html" for stem in site.lessons]


def _cjk_families() -> list[str]:
    """The CJK font families site.css names for Chinese pages (its one definition)."""
    rule = re.search(r":root:lang\(zh\)\s*\{\s*--blitz-font:([^;]+);", CSS.read_text())
    assert rule, f"{CSS} has no `:root:lang(zh) {{ --blitz-font: ... }}` rule"
    names = [name.strip().strip('"') for name in rule.group(1).split(",")]
    latin = {"system-ui", "-apple-system", "Segoe UI", "Roboto", "DejaVu Sans", "sans-serif"}
    return [name for name in names if name not in latin]


# --- without a browser ---------------------------------------------------------------------


def test_parse_header_reads_a_chinese_first_cell(tmp_path: Path) -> None:
    lesson = parse_header(
        tmp_path / "07_sample.ipynb", new_notebook(cells=[new_markdown_cell(ZH_HEADER)])
    )
    assert lesson.title == "07 · 示例课程"
    assert lesson.summary == "只在这个测试里存在的一课。"
    assert lesson.fields["Prerequisites"] == "无。"
    assert lesson.hardware == "任何 CPU 都可以。"
    assert lesson.run_time == "在 2 核 CPU 上约 1 秒"


def test_build_writes_both_languages_with_switches(tmp_path: Path) -> None:
    src = tmp_path / "notebooks"
    src.mkdir()
    nb = new_notebook(
        cells=[
            new_markdown_cell(GOOD_HEADER, id="head"),
            new_code_cell("x = 1", id="code"),
            new_markdown_cell("## Part\n\nText that nobody translated.", id="part"),
        ]
    )
    nbformat.write(nb, src / "07_sample.ipynb")
    catalogs = tmp_path / "translations"
    i18n.record(src / "07_sample.ipynb", {"head": ZH_HEADER}, ZH, catalogs, allow_identical=False)
    out = tmp_path / "site"
    build_site(src, out, log=lambda _msg: None, translations=catalogs)

    index, page = ((out / ZH / name).read_text() for name in ("index.html", "07_sample.html"))
    assert '<html lang="zh-CN">' in index and '<html lang="zh-CN">' in page
    assert "07 · 示例课程" in index and "运行时间" in index
    assert 'class="blitz-lang" href="../index.html" hreflang="en"' in index
    assert re.search(r'class="blitz-lang" href="\.\./07_sample\.html" hreflang="en"', page)
    english = (out / "07_sample.html").read_text()
    assert re.search(r'class="blitz-lang" href="zh/07_sample\.html" hreflang="zh-CN"', english)
    assert "Text that nobody translated." in page, "an untranslated cell shows the English"
    assert "示例课程" in (out / "_static" / "search-index-zh.js").read_text()
    assert (out / ZH / "07_sample.ipynb").read_text() == i18n.notebook_text(
        i18n.translate(nb, i18n.Catalog.load(src / "07_sample.ipynb", ZH, catalogs))
    )


# --- the real site -------------------------------------------------------------------------


@pytest.mark.slow
def test_chinese_index_lists_every_lesson(site: BuiltSite) -> None:
    index = (site.path / ZH / "index.html").read_text()
    assert '<html lang="zh-CN">' in index
    for path in lesson_notebooks():
        catalog = i18n.Catalog.load(path)
        chinese = i18n.translate(nbformat.read(path, as_version=4), catalog)
        lesson = parse_header(path, chinese)
        assert f'href="{path.stem}.html"' in index and lesson.short_title in index
        download = (site.path / ZH / path.name).read_text(encoding="utf-8")
        assert download == i18n.notebook_text(chinese), f"zh/{path.name}: wrong download"
        page = (site.path / ZH / f"{path.stem}.html").read_text()
        assert '<html lang="zh-CN">' in page, f"zh/{path.stem}.html: not marked as Chinese"
    assert index.count('class="blitz-card"') == len(site.lessons)


@pytest.mark.slow
def test_chinese_pages_reference_no_other_host(site: BuiltSite) -> None:
    _no_other_host(BuiltSite(site.path / ZH, site.lessons, site.build_s))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "http"])
def test_chinese_site_in_chromium(site: BuiltSite, browser, mode: str, request) -> None:
    """The English pages' checks on every Chinese page; screenshots of the index and 01."""
    base = site.path.as_uri() + "/" if mode == "file" else request.getfixturevalue("served_site")
    ZH_SHOTS.mkdir(parents=True, exist_ok=True)
    seen = Findings()
    context = browser.new_context(viewport=DESKTOP, locale="zh-CN")
    try:
        for name in _zh_pages(site):
            page = context.new_page()
            stem = Path(name).stem
            # _visit expects math on lesson pages, read from notebooks/<name>.ipynb.
            _visit(page, base + name, base, "index.html" if stem == "index" else name, seen)
            if mode == "http" and stem in {"index", site.lessons[0]}:
                page.screenshot(path=str(ZH_SHOTS / f"{stem}.png"))
                page.screenshot(path=str(ZH_SHOTS / f"{stem}-full.jpg"), full_page=True,
                                type="jpeg", quality=80)  # fmt: skip
            page.set_viewport_size(PHONE)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if overflow > 1:
                seen.problems.append(f"{base + name}: {overflow}px wider than a phone screen")
            if mode == "http" and stem == "index":
                page.screenshot(path=str(ZH_SHOTS / "index-phone.png"))
            page.close()
    finally:
        context.close()
    assert _check_links(seen, base) > len(_zh_pages(site)), "suspiciously few links checked"
    assert seen.requests > len(_zh_pages(site)), "the browser saw suspiciously few requests"
    assert not seen.problems, "\n".join(seen.problems)
    if mode == "http":
        for shot in ("index.png", f"{site.lessons[0]}.png"):
            assert (ZH_SHOTS / shot).stat().st_size > 20_000, f"{shot}: an (almost) empty page"


@pytest.mark.slow
def test_language_switch_goes_both_ways(site: BuiltSite, browser, request) -> None:
    """From every English page to the same Chinese page and back, by clicking the switch."""
    base = request.getfixturevalue("served_site")
    page = browser.new_page()
    problems = []
    try:
        for name in ["index.html"] + [f"{stem}.html" for stem in site.lessons]:
            page.goto(base + name)
            page.click("a.blitz-lang[hreflang='zh-CN']")
            page.wait_for_load_state("load")
            if page.url != base + f"{ZH}/{name}":
                problems.append(f"{name}: the switch led to {page.url}")
                continue
            if page.evaluate("document.documentElement.lang") != "zh-CN":
                problems.append(f"{ZH}/{name}: <html lang> is not zh-CN")
            page.click("a.blitz-lang[hreflang='en']")
            page.wait_for_load_state("load")
            if page.url != base + name:
                problems.append(f"{ZH}/{name}: the switch back led to {page.url}")
    finally:
        page.close()
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_chinese_search_finds_a_word_inside_a_sentence(site: BuiltSite, browser, request) -> None:
    base = request.getfixturevalue("served_site")
    path = lesson_notebooks()[0]
    zh = i18n.translate(nbformat.read(path, as_version=4), i18n.Catalog.load(path))
    summary = parse_header(path, zh).summary
    run = re.search(r"[\u3400-\u9fff]{4,}", summary)
    assert run, f"{path.stem}'s Chinese summary has no Chinese text yet: {summary!r}"
    word = run.group(0)[1:4]  # from the middle of a run: no word boundary to lean on
    page = browser.new_page()
    try:
        page.goto(base + f"{ZH}/index.html")
        page.fill("#blitz-search-input", word)
        hits = page.eval_on_selector_all(
            "#blitz-search-results a", "links => links.map(a => a.getAttribute('href'))"
        )
        status = page.inner_text("#blitz-search-status")
    finally:
        page.close()
    assert f"{path.stem}.html" in hits, f"searching {word!r} gave {hits}"
    assert "条结果" in status, f"the result count is not in Chinese: {status!r}"


@pytest.mark.slow
def test_cjk_text_is_drawn_with_a_cjk_system_font(site: BuiltSite, browser, request) -> None:
    """Chromium's own record of which font drew the glyphs: a CJK face named in site.css.

    A page without a CJK font would draw boxes ("tofu") from some Latin font; a web font
    would show as a custom font. Neither may happen.
    """
    families = _cjk_families()
    base = request.getfixturevalue("served_site")
    context = browser.new_context()
    try:
        for name, selector in (
            ("index.html", "#lessons"),
            # the first bold label of the translated first cell (目标)
            (f"{site.lessons[0]}.html", ".jp-MarkdownOutput strong"),
        ):
            page = context.new_page()
            page.goto(base + f"{ZH}/{name}")
            text = page.inner_text(selector).strip()
            assert re.fullmatch(f"{CJK.pattern}+", text), f"{ZH}/{name} {selector}: {text!r}"
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
            assert used <= set(families), (
                f"{ZH}/{name}: {text!r} drawn with {fonts}, not {families}"
            )
            assert not any(f["isCustomFont"] for f in fonts), f"a web font was used: {fonts}"
            assert sum(f["glyphCount"] for f in fonts) == len(text), fonts
            page.close()
    finally:
        context.close()
