"""Accessibility of nbconvert's HTML for a notebook: keyboard access and names for code and
outputs, and alt text for figures (WCAG 2.1 AA; tests/test_accessibility.py checks the site).

Shared by the teaching site's lesson pages (tools/publishing/build_site.py) and, through the same
call, anything else rendered from a notebook by nbconvert's ``lab``-based templates (the
slide decks): ``make_accessible(html, nb, words)`` with ``nb`` the notebook the HTML was made
from and ``words`` the page language's interface words (templates/strings/<code>.json:
``code_label``, ``output_label``, ``figure``, ``figure_text``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import mistune
import nbformat
from bs4 import BeautifulSoup  # nbconvert's own dependency: it parses its HTML with it too

# What nbconvert writes as the alt text of every image that has none.
NBCONVERT_ALT = "No description has been provided for this image"
# Plot calls whose plain string argument says what a figure shows (titles and axis labels).
_PLOT_TEXT = re.compile(
    r"\.(?:set_title|suptitle|set_xlabel|set_ylabel|title|xlabel|ylabel)\(\s*"
    r"(?P<quote>[\"'])(?P<text>[^\"'\n{}]+)(?P=quote)"
)
_MAX_ALT = 300


class _Text(HTMLParser):
    """The text of an HTML fragment (rendered markdown), without its markup."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


# Raw HTML in a cell (the deep-dive badge, say) is parsed as markup here, so only its text
# counts; the text is never put back into a page unescaped.
_md_raw = mistune.create_markdown(escape=False)


def _plain_text(markdown: str) -> str:
    parser = _Text()
    parser.feed(str(_md_raw(markdown)))
    return " ".join("".join(parser.parts).split())


def _sentences(text: str) -> list[str]:
    # A sentence ends in . ! ? before a space, or in Chinese punctuation (no space after it).
    return [s.strip() for s in re.findall(r".+?(?:[.!?](?=\s|$)|[。！？]|$)", text) if s.strip()]


def describe_figure(nb: nbformat.NotebookNode, index: int, words: dict[str, str]) -> str:
    """Alt text for the figures that code cell ``index`` of ``nb`` outputs, in ``nb``'s language.

    Notebook figures carry no description, so it is built from what the lesson says about
    them: the sentence that introduces the figure (the last paragraph of the markdown cell
    before it: its last sentence when that ends in a colon, as in "The running loss, one
    point per print:", else its first two sentences) and the figure's titles and axis
    labels (plain strings in the cell's plot calls). CONTRIBUTING.md asks authors for both.
    ``words`` gives the connecting words ("figure_text", with {text}; "figure" alone when
    the lesson says nothing).
    """
    intro = ""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            paragraphs = [p for p in re.split(r"\n\s*\n", cell.source) if p.strip()]
            sentences = _sentences(_plain_text(paragraphs[-1])) if paragraphs else []
            if sentences and sentences[-1].endswith((":", "：")):
                intro = sentences[-1][:-1]
            else:
                # Chinese sentences follow each other without a space.
                intro = re.sub(r"(?<=[。！？])\s+", "", " ".join(sentences[:2]))
            break
    labels = list(
        dict.fromkeys(m.group("text").strip() for m in _PLOT_TEXT.finditer(nb.cells[index].source))
    )
    alt = intro or words["figure"]
    if labels:
        alt = f"{alt.rstrip('.。')}{words['figure_text'].replace('{text}', ', '.join(labels))}"
    if len(alt) > _MAX_ALT:  # a screen reader reads alt text in one go: keep it short
        alt = alt[: _MAX_ALT - 1].rstrip() + "…"
    return alt


def make_accessible(page: str, nb: nbformat.NotebookNode, words: dict[str, str]) -> str:
    """``page`` (nbconvert's HTML of ``nb``) with code and output areas reachable by keyboard
    and named, and figures described; ``words`` are the page language's (strings/<code>.json).

    nbconvert makes every cell's input wrapper and every output focusable (tabindex=0), but
    the box that scrolls a long line is the code editor inside the wrapper, so keyboard
    users could not scroll it (axe: scrollable-region-focusable). Here the tab stop moves to
    the code itself and stays on each output (site.css makes the output the box that
    scrolls); both get a name ("Code cell 5", "Output of code cell 5") so that a screen reader
    says what has focus. Markdown cells lose their tab stop: prose does not scroll, and Tab
    should go from code to code. Scrolling tables (site.css) get one. Images that nbconvert
    labelled "No description has been provided" get :func:`describe_figure`'s text.
    """
    soup = BeautifulSoup(page, features="html.parser")
    cells = {f"cell-id={cell.get('id')}": i for i, cell in enumerate(nb.cells)}
    for wrapper in soup.select("div.jp-Cell-inputWrapper[tabindex]"):
        del wrapper["tabindex"]
    counter = 0
    for cell_div in soup.select("div.jp-CodeCell"):
        counter += 1
        index = cells.get(str(cell_div.get("id")))
        cell = nb.cells[index] if index is not None else None
        number = str(cell.get("execution_count") or counter) if cell else str(counter)
        editor = cell_div.select_one("div.jp-InputArea-editor")
        if editor is not None:
            editor["tabindex"] = "0"
            editor["role"] = "group"
            editor["aria-label"] = words["code_label"].replace("{n}", number)
        for output in cell_div.select("div.jp-OutputArea-output"):
            output["tabindex"] = "0"
            output["role"] = "group"
            output["aria-label"] = words["output_label"].replace("{n}", number)
        images = [
            img
            for img in cell_div.select(".jp-OutputArea-output img")
            if img.get("alt") in (None, "", NBCONVERT_ALT)
        ]
        if images and index is not None:
            alt = describe_figure(nb, index, words)
            for img in images:
                img["alt"] = alt
    for table in soup.select(".jp-RenderedHTMLCommon table"):
        table["tabindex"] = "0"
    return str(soup)
