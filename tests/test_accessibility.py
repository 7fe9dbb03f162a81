"""WCAG 2.1 AA on the teaching site, checked with axe-core in headless Chromium.

Every lesson page and the index of both languages, at a desktop and a phone width, must have
no critical and no serious violation of axe's WCAG 2.0/2.1 A and AA rules
(tests/browser.py's :func:`axe_violations`, which the slide decks' tests call too). Beside it:
the shared code colours (``code-colours.css``) meet 4.5:1 by arithmetic and on a page of
their own, code is reachable and scrollable by keyboard, figures say what they show, and the
check itself reports what it should (a planted low-contrast line, a scroll box without a
tab stop, an image without alt text).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests.browser import axe_violations
from tools import conventions
from tools.authoring import i18n
from tools.lessons import lesson_notebooks
from tools.publishing.accessibility import NBCONVERT_ALT, describe_figure, make_accessible

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
STATIC = ROOT / "tools" / "publishing" / "templates" / "static"
COLOURS = STATIC / "code-colours.css"
WORDS = {code: conventions.strings(code) for code in ("en", "zh")}
LANGS = {"en": "", "zh": "zh/"}
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
AA = 4.5  # WCAG 1.4.3: normal-size text
DEEP_DIVE_WORDS = {code: conventions.lesson_words(code)["deep_dive"] for code in ("en", "zh")}


def _luminance(colour: str) -> float:
    value = colour.lstrip("#")
    if len(value) == 3:
        value = "".join(c * 2 for c in value)
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two #rrggbb colours."""
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _rules(css: str) -> list[tuple[list[str], dict[str, str]]]:
    """(selectors, declarations) of each rule of a flat stylesheet (no @media)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        declarations = {}
        for declaration in body.split(";"):
            name, _, value = declaration.partition(":")
            if name.strip():
                declarations[name.strip()] = value.replace("!important", "").strip()
        rules.append(([s.strip() for s in selectors.split(",")], declarations))
    return rules


# --- the shared code colours, without a browser --------------------------------------------


def test_code_colours_cover_every_token_and_meet_aa() -> None:
    """Each Pygments token class gets a colour with 4.5:1 on the code background and on
    white; so do both prompts. Computed from the stylesheet itself."""
    from pygments.token import STANDARD_TYPES

    rules = _rules(COLOURS.read_text(encoding="utf-8"))
    colour_of: dict[str, str] = {}
    for selectors, declarations in rules:
        for selector in selectors:
            if "color" in declarations:
                colour_of[selector] = declarations["color"]
    background = next(d["background"] for s, d in rules if s == [".highlight"])
    problems = []
    for token in sorted(c for c in STANDARD_TYPES.values() if c):
        colour = colour_of.get(f".highlight .{token}")
        if colour is None:
            problems.append(f".{token}: no colour in {COLOURS.name}")
            continue
        for ground in (background, "#ffffff"):
            if contrast(colour, ground) < AA:
                problems.append(f".{token} {colour} on {ground}: {contrast(colour, ground):.2f}")
    for prompt in (".jp-InputPrompt", ".jp-OutputPrompt"):
        for ground in (background, "#ffffff"):
            ratio = contrast(colour_of[prompt], ground)
            if ratio < AA:
                problems.append(f"{prompt} {colour_of[prompt]} on {ground}: {ratio:.2f}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        (("#000000", "#ffffff"), 21.0),
        (("#b0b0b0", "#ffffff"), 2.17),
        (("#008800", "#f5f5f5"), 4.25),
    ],
)
def test_contrast_is_wcags_formula(pair: tuple[str, str], expected: float) -> None:
    """The numbers axe reported for the old colours (#b0b0b0 prompts, #080 numbers)."""
    assert contrast(*pair) == pytest.approx(expected, abs=0.01)


# --- what the builder adds to nbconvert's HTML ----------------------------------------------


def _figure_notebook(intro: str, plot: str) -> nbformat.NotebookNode:
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 600x350 with 1 Axes>"}
    return new_notebook(
        cells=[
            new_markdown_cell(f"## Part\n\nFirst paragraph.\n\n{intro}", id="md"),
            new_code_cell(plot, id="fig", outputs=[new_output("display_data", data=png)]),
        ]
    )


@pytest.mark.parametrize(
    ("intro", "plot", "lang", "expected"),
    [
        (
            "The running loss, one point per print:",
            'ax.set_title("loss curve")\nax.set_xlabel(f"x {n} steps")\nax.set_ylabel("loss")',
            "en",
            "The running loss, one point per print. Labels in the figure: loss curve, loss",
        ),
        (
            "We train `model`. **Twice.** Then we compare.",
            "plt.imshow(grid)",
            "en",
            "We train model. Twice.",
        ),
        (
            "近期平均损失的曲线，每次打印对应一个点：",
            'ax.set_ylabel("loss")',
            "zh",
            "近期平均损失的曲线，每次打印对应一个点。图中的标注：loss",
        ),
        ("", "plt.imshow(grid)", "en", WORDS["en"]["figure"]),
    ],
    ids=["colon-and-labels", "two-sentences", "zh", "no-prose"],
)
def test_a_figure_is_described_by_its_introduction_and_labels(
    intro: str, plot: str, lang: str, expected: str
) -> None:
    nb = _figure_notebook(intro, plot)
    if not intro:
        nb.cells[0].source = ""
    assert describe_figure(nb, 1, WORDS[lang]) == expected


def test_code_and_outputs_get_the_tab_stops_and_names() -> None:
    """nbconvert's tab stops move from the cell wrappers to the boxes that scroll, each named;
    the placeholder alt text is replaced."""
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    nb = _figure_notebook("A loss curve:", 'ax.set_ylabel("loss")')
    nb.cells[1].execution_count = 7
    nb.cells.append(new_markdown_cell("| a | b |\n|---|---|\n| 1 | 2 |", id="table"))
    page, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    assert NBCONVERT_ALT in page, "nbconvert no longer writes its placeholder: update the check"
    soup = BeautifulSoup(make_accessible(page, nb, WORDS["en"]), "html.parser")
    assert not soup.select(".jp-Cell-inputWrapper[tabindex]")
    editor = soup.select_one(".jp-InputArea-editor")
    assert (editor["tabindex"], editor["role"], editor["aria-label"]) == (
        "0",
        "group",
        "Code cell 7",
    )
    output = soup.select_one(".jp-OutputArea-output")
    assert (output["tabindex"], output["aria-label"]) == ("0", "Output of code cell 7")
    assert soup.select_one("table")["tabindex"] == "0"
    assert soup.select_one("img")["alt"] == "A loss curve. Labels in the figure: loss"


# --- the check itself ------------------------------------------------------------------------


PLANTED = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>x</title></head>
<body><main><h1>Planted problems</h1>
<p id="grey" style="color:#b0b0b0;background:#fff">In [1]: grey on white, 2.2:1</p>
<div id="scroller" style="width:8rem;overflow-x:auto"><pre>{long}</pre></div>
<img id="bare" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="20" height="20">
</main></body></html>"""


@pytest.mark.e2e
def test_the_check_reports_planted_violations(browser, tmp_path: Path) -> None:
    """A low-contrast line, a scroll box without a tab stop and an image without alt text:
    each is named with its rule, impact and element; "moderate" ones are filtered out."""
    page_file = tmp_path / "planted.html"
    page_file.write_text(PLANTED.replace("{long}", "x = 1  # " + "long line " * 20))
    page = browser.new_page()
    try:
        page.goto(page_file.as_uri())
        found = axe_violations(page)
        only_minor = axe_violations(page, impacts=("minor",))
        limited = axe_violations(page, context="#grey")
    finally:
        page.close()
    text = "\n".join(found)
    assert re.search(r"^color-contrast \(serious\): 1 nodes, first #grey: ", text, re.M), text
    assert re.search(r"^scrollable-region-focusable \(serious\): .*#scroller", text, re.M), text
    assert re.search(r"^image-alt \(critical\): 1 nodes, first #bare: ", text, re.M), text
    assert only_minor == [], only_minor
    assert [line.split(" ")[0] for line in limited] == ["color-contrast"], limited


@pytest.mark.e2e
def test_code_colours_work_on_a_page_of_their_own(browser, tmp_path: Path) -> None:
    """code-colours.css alone, linked *before* Pygments' default style and JupyterLab's grey
    prompts (the order a deck may have), still gives every token and prompt 4.5:1."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    code = (
        "import torch  # a comment\n@torch.no_grad()\ndef f(x: int = 0x1F) -> float:\n"
        '    """Doc."""\n    return [x ** 2.5 for x in range(3) if x is not None and True]\n'
        "class A(Exception):\n    name = f'{x!r}\\n' + r'\\d' + b'1'\n"
    )
    formatter = HtmlFormatter(style="default", cssclass="highlight")
    page_file = tmp_path / "alone.html"
    page_file.write_text(
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>code</title>'
        f'<link rel="stylesheet" href="{COLOURS.as_uri()}">'
        f"<style>{formatter.get_style_defs('.highlight')}\n"
        ".jp-Cell .jp-InputPrompt, .jp-Cell .jp-OutputPrompt { color: #616161; opacity: .5 }"
        "</style></head><body><main><div class='jp-Cell'>"
        "<div class='jp-InputPrompt'>In [12]:</div><div class='jp-OutputPrompt'>Out[12]:</div>"
        f"{highlight(code, PythonLexer(), formatter)}</div></main></body></html>"
    )
    page = browser.new_page()
    try:
        page.goto(page_file.as_uri())
        found = axe_violations(page)
        tokens = page.eval_on_selector_all(".highlight span[class]", "s => s.length")
    finally:
        page.close()
    assert tokens > 30, "the sample code was not highlighted"
    assert found == [], "\n".join(found)


# --- the real site ---------------------------------------------------------------------------


def _open_everything(page) -> None:
    """Show what starts folded (solutions), so that axe checks it too."""
    folded = page.locator(".blitz-solution-toggle[aria-expanded='false']")
    for _ in range(folded.count()):
        folded.first.click()  # the next folded one is first now


@pytest.mark.e2e
@pytest.mark.parametrize("viewport", VIEWPORTS)
@pytest.mark.parametrize("lang", LANGS)
def test_every_page_meets_wcag_21_aa(browser, site: Path, lang: str, viewport: str) -> None:
    """No critical or serious axe violation on the index (with search results showing) and on
    every lesson page (solutions unfolded), at a desktop's and a phone's width."""
    stems = ["index"] + [p.stem for p in NOTEBOOKS] + ["teaching"]  # teaching: the guide
    found = []
    context = browser.new_context(viewport=VIEWPORTS[viewport])
    try:
        for stem in stems:
            page = context.new_page()
            page.goto(f"{site.as_uri()}/{LANGS[lang]}{stem}.html")
            page.wait_for_function("document.documentElement.dataset.mathjax", timeout=60_000)
            if stem == "index":
                # Deep-dive headings start with these words (CONTRIBUTING.md): the results
                # show with their "deep dive" label.
                page.fill("#blitz-search-input", DEEP_DIVE_WORDS[lang])
                page.wait_for_selector("#blitz-search-results li .blitz-search-part")
            elif stem != "teaching":
                _open_everything(page)
            found += [f"{LANGS[lang]}{stem}.html: {line}" for line in axe_violations(page)]
            page.close()
    finally:
        context.close()
    assert not found, "\n".join(found)


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_figures_say_what_they_show(site: Path, lang: str) -> None:
    """Every image on a lesson page has alt text of its own: not nbconvert's placeholder, and
    for a notebook figure the sentence that introduces it in that language."""
    checked = 0
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        if lang != "en":
            nb = i18n.translate(nb, i18n.Catalog.load(path))
        page = (site / LANGS[lang] / f"{path.stem}.html").read_text(encoding="utf-8")
        alts = [html.unescape(a) for a in re.findall(r'<img [^>]*alt="([^"]*)"', page)]
        assert len(alts) == page.count("<img "), f"{path.stem}: an image without alt text"
        assert NBCONVERT_ALT not in alts and "" not in alts, f"{lang}/{path.stem}: {alts}"
        for index, cell in enumerate(nb.cells):
            if any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
                assert describe_figure(nb, index, WORDS[lang]) in alts, (path.stem, index)
                checked += 1
    assert checked, "no figure on the site: nothing was checked"


@pytest.mark.e2e
def test_code_is_reached_and_scrolled_by_keyboard(browser, site: Path) -> None:
    """Tab from the top of a lesson reaches its first code cell, which is announced by name;
    on a phone, a code line wider than the screen scrolls with the arrow keys."""
    context = browser.new_context(viewport=VIEWPORTS["phone"])
    page = context.new_page()
    try:
        page.goto(f"{site.as_uri()}/{NOTEBOOKS[0].stem}.html")
        for _ in range(200):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.matches('.jp-InputArea-editor')"):
                break
        focused = page.evaluate(
            "[document.activeElement.className, document.activeElement.getAttribute('role'),"
            " document.activeElement.getAttribute('aria-label')]"
        )
        assert "jp-InputArea-editor" in focused[0], f"Tab never reached code: {focused}"
        assert focused[1] == "group" and re.fullmatch(r"Code cell \d+", focused[2]), focused
        wide = page.evaluate(
            """() => { const e = [...document.querySelectorAll('.jp-InputArea-editor')]
                 .find(e => e.scrollWidth > e.clientWidth + 20);
               if (e) { e.id = 'wide-code'; } return Boolean(e); }"""
        )
        assert wide, "no code line wider than a phone: nothing to scroll"
        page.focus("#wide-code")
        page.keyboard.press("ArrowRight")
        # Chromium scrolls smoothly: wait for the box to move (a timeout fails the test).
        page.wait_for_function("document.getElementById('wide-code').scrollLeft > 0", timeout=5000)
    finally:
        context.close()
