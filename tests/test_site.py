"""The teaching site: `make html`'s builder on the real notebooks, checked in headless Chromium.

The site is built once per module into ``build/site`` (what ``make html`` makes) and every
page is opened twice, as ``file://`` and from ``python -m http.server``'s handler, in one
browser session. Screenshots land in ``build/site/_screenshots/`` with ``report.json``
(build time, pages and requests checked).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests import browser as browser_helpers
from tests.browser import launch_chromium
from tests.conftest import NOTEBOOKS_DIR, ROOT, free_port, lesson_notebooks
from tools.build_site import SiteError, build_site, parse_header, render_widgets_statically

SITE = ROOT / "build" / "site"
SHOTS = SITE / "_screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# TeX in markdown: $...$ or $$...$$ (a lone dollar sign in prose does not count).
MATH_RE = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*?\$", re.S)
GOOD_HEADER = """# 07 · Sample lesson

A lesson that exists only inside this test.

**Objectives**
- check the parser

**Prerequisites:** none.

**Hardware**: any CPU. A GPU is optional.

**Run time**: about 1 s on the 2-core CPU (measured with nbval).
"""


def _notebooks() -> list[Path]:
    return lesson_notebooks()


@dataclass
class BuiltSite:
    path: Path
    lessons: list[str]
    build_s: float
    report: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def site() -> Iterator[BuiltSite]:
    """Build the real site once, through the same command line `make html` uses."""
    notebooks = _notebooks()
    if not notebooks:
        pytest.fail(f"no notebooks in {NOTEBOOKS_DIR}: the site has nothing to render")
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), "--out", str(SITE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    build_s = time.perf_counter() - start
    assert out.returncode == 0, f"site build failed:\n{out.stdout}\n{out.stderr}"
    built = BuiltSite(SITE, [p.stem for p in notebooks], build_s)
    built.report["build_seconds"] = round(build_s, 1)
    built.report["lesson_pages"] = len(notebooks)
    yield built
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / "report.json").write_text(json.dumps(built.report, indent=2) + "\n")


@pytest.fixture(scope="module")
def browser():
    with launch_chromium() as chromium:
        yield chromium


# --- the builder, without a browser -------------------------------------------------------


def test_parse_header_reads_the_first_cell(tmp_path: Path) -> None:
    nb = new_notebook(cells=[new_markdown_cell(GOOD_HEADER)])
    lesson = parse_header(tmp_path / "07_sample.ipynb", nb)
    assert lesson.title == "07 · Sample lesson"
    assert lesson.summary == "A lesson that exists only inside this test."
    assert lesson.fields["Prerequisites"] == "none."
    assert lesson.hardware == "any CPU."
    assert lesson.run_time == "about 1 s on the 2-core CPU"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("# Sample lesson\n\nNo number.", "must start with '# NN · Title'"),
        (GOOD_HEADER.replace("**Hardware**: any CPU. A GPU is optional.", ""), "**Hardware**"),
        (GOOD_HEADER.replace("**Run time**", "Run time"), "**Run time**"),
        (GOOD_HEADER.replace("# 07", "# 08"), "does not match the file name"),
    ],
    ids=["no-number", "no-hardware", "no-run-time", "wrong-number"],
)
def test_parse_header_explains_a_bad_first_cell(tmp_path: Path, source: str, message: str) -> None:
    nb = new_notebook(cells=[new_markdown_cell(source)])
    with pytest.raises(SiteError, match=re.escape(message)) as err:
        parse_header(tmp_path / "07_sample.ipynb", nb)
    assert "07_sample.ipynb" in str(err.value)


def test_saved_widget_state_renders_without_scripts() -> None:
    state = {
        "box": {
            "model_name": "HBoxModel",
            "state": {"children": ["IPY_MODEL_l", "IPY_MODEL_b"]},
        },
        "l": {"model_name": "HTMLModel", "state": {"value": "100%"}},
        "b": {"model_name": "FloatProgressModel", "state": {"value": 3.0, "max": 3.0}},
    }
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "box"}, "text/plain": "x"}
    orphan = {"application/vnd.jupyter.widget-view+json": {"model_id": "gone"}, "text/plain": "y"}
    cell = new_code_cell(
        "", outputs=[nbformat.v4.new_output("display_data", data=d) for d in (view, orphan)]
    )
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    assert render_widgets_statically(nb) == 1
    rendered, fallback = (out["data"] for out in nb.cells[0].outputs)
    assert '<progress class="blitz-progress " value="3.0" max="3.0">' in rendered["text/html"]
    assert "100%" in rendered["text/html"]
    assert fallback == {"text/plain": "y"}, "a view without saved state keeps its text"
    assert "widgets" not in nb.metadata


def test_a_new_notebook_is_picked_up(tmp_path: Path) -> None:
    """Lessons are globbed: a notebook added later gets a page, a card and neighbours."""
    src = tmp_path / "notebooks"
    src.mkdir()
    for number, name in (("07", "07_sample"), ("08", "08_more")):
        header = GOOD_HEADER.replace("07", number).replace("Sample lesson", f"Lesson {number}")
        nb = new_notebook(cells=[new_markdown_cell(header), new_markdown_cell("## Part\n\nText")])
        nbformat.write(nb, src / f"{name}.ipynb")
    lessons = build_site(src, tmp_path / "site", log=lambda _msg: None)
    assert [lesson.stem for lesson in lessons] == ["07_sample", "08_more"]
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="08_more.html"' in index and "Lesson 08" in index
    first = (tmp_path / "site" / "07_sample.html").read_text()
    assert re.search(r'<a [^>]*href="08_more.html"[^>]*rel="next"', first), "no next link"
    assert 'href="#Part"' in first, "the table of contents links the ## heading"


def test_no_notebooks_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SiteError, match="no notebooks"):
        build_site(tmp_path, tmp_path / "site", log=lambda _msg: None)


def test_build_never_wipes_a_foreign_folder(tmp_path: Path) -> None:
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(SiteError, match="not a site built by this tool"):
        build_site(src, precious, log=lambda _msg: None)
    assert (precious / "thesis.tex").exists()


@pytest.mark.parametrize(("required", "outcome"), [("1", "fail"), ("", "skip")])
def test_a_missing_browser_skips_or_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, required: str, outcome: str
) -> None:
    """Learners without chromium get a skip; CI (BLITZ_REQUIRE_BROWSER=1) gets a failure."""
    monkeypatch.setenv(browser_helpers.CHROMIUM_ENV, str(tmp_path / "no-such-chromium"))
    monkeypatch.setenv(browser_helpers.REQUIRE_ENV, required)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="no Chromium found"):
        browser_helpers.chromium_path()


# --- the real site -------------------------------------------------------------------------


@pytest.mark.slow
def test_index_lists_every_lesson(site: BuiltSite) -> None:
    index = (site.path / "index.html").read_text()
    for path in _notebooks():
        lesson = parse_header(path, nbformat.read(path, as_version=4))
        assert f'href="{path.stem}.html"' in index, f"index does not link {path.stem}.html"
        assert lesson.short_title in index
        assert (site.path / path.name).read_bytes() == path.read_bytes(), "download differs"
        page = (site.path / f"{path.stem}.html").read_text()
        assert re.search(f'<a [^>]*download[^>]*href="{path.name}"', page), (
            f"{path.stem}: no download"
        )
        assert 'class="blitz-toc-list"' in page, f"{path.stem}.html: no table of contents"
    assert index.count('class="blitz-card"') == len(site.lessons)


@pytest.mark.slow
def test_pages_reference_no_other_host(site: BuiltSite) -> None:
    """Static check that complements the browser's: no src/href loads from a URL."""
    loads = re.compile(
        r"<(?:script|img|link|iframe|source|video|audio)\b[^>]*?(?:src|href)=[\"']?(?:https?:|//)"
        r"|url\(\s*[\"']?(?:https?:|//)|@import\s+[\"'](?:https?:|//)"
    )
    for page in sorted(site.path.glob("*.html")):
        found = loads.search(page.read_text())
        assert not found, f"{page.name} loads from another host: {found and found.group(0)}"


@dataclass
class Findings:
    """Everything the browser saw across pages, reported together at the end."""

    problems: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    ids: dict[str, set[str]] = field(default_factory=dict)
    requests: int = 0


@pytest.fixture
def served_site(site: BuiltSite) -> Iterator[str]:
    """The site behind `python -m http.server`'s handler on a free port, in a thread."""
    handler = functools.partial(QuietHandler, directory=str(site.path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _page_names(site: BuiltSite) -> list[str]:
    return ["index.html"] + [f"{stem}.html" for stem in site.lessons]


def _expected_math(stem: str) -> int:
    nb = nbformat.read(NOTEBOOKS_DIR / f"{stem}.ipynb", as_version=4)
    return sum(len(MATH_RE.findall(c.source)) for c in nb.cells if c.cell_type == "markdown")


def _visit(page, url: str, base: str, name: str, seen: Findings) -> None:
    problems = seen.problems
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"{url}: console {msg.type}: {msg.text}")
            if msg.type == "error"
            else None
        ),
    )
    page.on("pageerror", lambda exc: problems.append(f"{url}: script error: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"{url}: failed {req.url}: {req.failure}"))
    page.on(
        "response",
        lambda res: (
            problems.append(f"{url}: HTTP {res.status} for {res.url}")
            if res.status >= 400
            else None
        ),
    )
    page.goto(url, wait_until="load")
    # site.js marks <html data-mathjax="done"> once MathJax has typeset ("none" without it).
    page.wait_for_function("document.documentElement.dataset.mathjax", timeout=60_000)
    page.wait_for_load_state("networkidle")

    seen.requests += len(requests)
    for req in requests:
        if not (req.startswith(base) or req.startswith("data:")):
            problems.append(f"{url}: request leaves the origin: {req[:120]}")

    images = page.evaluate(
        "Array.from(document.images).map(i => [i.currentSrc.slice(0, 80), i.naturalWidth])"
    )
    problems.extend(f"{url}: image not loaded: {src}" for src, width in images if width <= 0)

    if name != "index.html":
        expected = _expected_math(name.removesuffix(".html"))
        math = page.evaluate(
            """() => ({
              sources: document.querySelectorAll('script[type^="math/tex"]').length,
              rendered: document.querySelectorAll('span.MathJax[id$="-Frame"]').length,
              errors: document.querySelectorAll('.merror, merror, .MathJax_Error').length,
              state: document.documentElement.dataset.mathjax})"""
        )
        if math["state"] != "done":
            problems.append(f"{url}: MathJax did not finish ({math['state']})")
        if math["errors"]:
            problems.append(f"{url}: {math['errors']} formulas failed to typeset")
        if math["rendered"] != math["sources"] or math["sources"] < min(expected, 1):
            problems.append(f"{url}: math not rendered ({math}, {expected} formulas in markdown)")

    seen.ids[url] = set(page.evaluate("Array.from(document.querySelectorAll('[id]'), e => e.id)"))
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    seen.links.extend((url, href) for href in hrefs)


def _check_links(seen: Findings, base: str) -> int:
    """Every link inside the site points at a file that exists and an id that exists."""
    checked = 0
    for source, href in seen.links:
        target, fragment = urldefrag(href)
        if urlparse(href).scheme in {"http", "https"} and not href.startswith(base):
            continue  # a link out of the site (docs, papers): fine to follow, never loaded
        checked += 1
        if not target.startswith(base):
            seen.problems.append(f"{source}: link outside the site folder: {href}")
            continue
        rel = unquote(target[len(base) :].split("?", 1)[0]) or "index.html"
        if not (SITE / rel).is_file():
            seen.problems.append(f"{source}: broken link {href}")
        elif fragment and target in seen.ids:
            if fragment not in seen.ids[target] and unquote(fragment) not in seen.ids[target]:
                seen.problems.append(f"{source}: no #{fragment} in {rel}")
    return checked


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["file", "http"])
def test_site_in_chromium(site: BuiltSite, browser, mode: str, request) -> None:
    """No console error, failed or off-origin request, broken image/link; math rendered."""
    base = site.path.as_uri() + "/" if mode == "file" else request.getfixturevalue("served_site")
    SHOTS.mkdir(parents=True, exist_ok=True)
    seen = Findings()
    context = browser.new_context(viewport=DESKTOP)
    try:
        for name in _page_names(site):
            page = context.new_page()
            _visit(page, base + name, base, name, seen)
            # The whole page once (served mode, JPEG: a long lesson is a huge PNG); the
            # first screen otherwise.
            if mode == "http":
                shot = SHOTS / f"{mode}-{name.removesuffix('.html')}.jpg"
                page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=80)
            else:
                page.screenshot(path=str(SHOTS / f"{mode}-{name.removesuffix('.html')}.png"))
            # Phone width: the page itself must not scroll sideways (code scrolls in its box).
            page.set_viewport_size(PHONE)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if overflow > 1:
                seen.problems.append(f"{base + name}: {overflow}px wider than a phone screen")
            page.screenshot(path=str(SHOTS / f"{mode}-{name.removesuffix('.html')}-phone.png"))
            page.close()
    finally:
        context.close()
    links = _check_links(seen, base)
    site.report[mode] = {
        "pages": len(_page_names(site)),
        "requests": seen.requests,
        "internal_links": links,
        "screenshots": str(SHOTS.relative_to(ROOT)),
    }
    assert seen.requests > len(_page_names(site)), "the browser saw suspiciously few requests"
    assert not seen.problems, "\n".join(seen.problems)


@pytest.mark.slow
def test_search_finds_a_section(site: BuiltSite, browser, served_site: str) -> None:
    """The offline search on the index finds a section heading of the first lesson."""
    first = (site.path / f"{site.lessons[0]}.html").read_text()
    heading = re.search(r'<h2 id="([^"]+)">([^<]+)<a class="anchor-link"', first)
    assert heading, f"{site.lessons[0]}.html has no ## heading to search for"
    anchor, text = heading.groups()
    page = browser.new_page()
    try:
        page.goto(served_site + "index.html")
        page.fill("#blitz-search-input", text)
        hits = page.eval_on_selector_all(
            "#blitz-search-results a", "links => links.map(a => a.getAttribute('href'))"
        )
    finally:
        page.close()
    assert f"{site.lessons[0]}.html#{anchor}" in hits, f"searching {text!r} gave {hits}"


@pytest.mark.slow
def test_solutions_start_folded_and_unfold(site: BuiltSite, browser, served_site: str) -> None:
    """Every lesson's solutions are hidden behind a button that shows them."""
    for lesson in site.lessons:
        page = browser.new_page()
        try:
            page.goto(served_site + f"{lesson}.html")
            buttons = page.locator(".blitz-solution-toggle")
            assert buttons.count() >= 1, f"{lesson}: no folded solution"
            first_code = page.locator(".jp-Cell:has(.celltag_solution) + .jp-CodeCell").first
            assert first_code.is_hidden(), f"{lesson}: a solution is visible from the start"
            buttons.first.click()
            assert first_code.is_visible(), f"{lesson}: the button does not show the solution"
        finally:
            page.close()


def test_out_pointing_at_a_file_is_a_clear_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("keep me")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), "--out", str(readme)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"--out {readme} is a file, not a folder" in proc.stderr
    assert "Traceback" not in proc.stderr and readme.read_text() == "keep me"
