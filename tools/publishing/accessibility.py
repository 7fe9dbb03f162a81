"""Accessibility of nbconvert's HTML of a notebook (WCAG 2.1 AA, tests/test_accessibility.py):
keyboard access and names for code and outputs, alt text for figures, any ``<html lang>``.
The lesson pages and the decks both go through it, in the page's language's words."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import mistune
import nbformat
from bs4 import BeautifulSoup  # nbconvert's own dependency: it parses its HTML with it too
from traitlets import validate

# What nbconvert writes as the alt text of every image that has none.
NBCONVERT_ALT = "No description has been provided for this image"
# Plot calls whose plain string argument says what a figure shows (titles and axis labels).
_PLOT_TEXT = re.compile(
    r"\.(?:set_title|suptitle|set_xlabel|set_ylabel|title|xlabel|ylabel)\(\s*"
    r"(?P<quote>[\"'])(?P<text>[^\"'\n{}]+)(?P=quote)"
)
_MAX_ALT = 300


def any_language(exporter: type) -> type:
    """``exporter`` (nbconvert's) taking any BCP 47 ``<html lang>``: nbconvert turns all but bare
    ISO 639-1 codes into "en", and the region of ``zh-CN`` picks Simplified glyph shapes."""

    class Exporter(exporter):  # type: ignore[misc, valid-type]
        @validate("language_code")
        def _valid_language_code(self, proposal: dict) -> str:  # overrides nbconvert's
            return proposal["value"]

    return Exporter


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
    """Alt text for the figures of code cell ``index``, from what the lesson says of them
    (CONTRIBUTING.md): the last paragraph of the markdown cell before it (its last sentence
    when that ends in a colon, else its first two) and the plain-string titles and axis labels
    of the cell's plot calls, joined by ``words["figure_text"]`` ("figure" if none)."""
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
    found = _PLOT_TEXT.finditer(nb.cells[index].source)
    labels = list(dict.fromkeys(m.group("text").strip() for m in found))
    alt = intro or words["figure"]
    if labels:
        alt = f"{alt.rstrip('.。')}{words['figure_text'].replace('{text}', ', '.join(labels))}"
    if len(alt) > _MAX_ALT:  # a screen reader reads alt text in one go: keep it short
        alt = alt[: _MAX_ALT - 1].rstrip() + "…"
    return alt


def make_accessible(page: str, nb: nbformat.NotebookNode, words: dict[str, str]) -> str:
    """``page`` (nbconvert's HTML of ``nb``) with code, outputs and tables reachable by keyboard
    and named, and figures described by :func:`describe_figure`.

    nbconvert's tab stop is on each input wrapper, but what scrolls a long line is the editor
    inside it (axe: scrollable-region-focusable), so the stop moves there; markdown loses
    its stop (prose does not scroll; Tab goes from code to code). A name ("Code cell 5")
    tells a screen reader what has focus."""
    soup = BeautifulSoup(page, features="html.parser")
    cells = {f"cell-id={cell.get('id')}": i for i, cell in enumerate(nb.cells)}
    for wrapper in soup.select("div.jp-Cell-inputWrapper[tabindex]"):
        del wrapper["tabindex"]
    for counter, cell_div in enumerate(soup.select("div.jp-CodeCell"), 1):
        index = cells.get(str(cell_div.get("id")))
        number = str(index is not None and nb.cells[index].get("execution_count") or counter)
        named = [(cell_div.select_one("div.jp-InputArea-editor"), "code_label")]
        named += [(out, "output_label") for out in cell_div.select("div.jp-OutputArea-output")]
        for element, label in named:
            if element is not None:
                name = words[label].replace("{n}", number)
                element.attrs.update({"tabindex": "0", "role": "group", "aria-label": name})
        images = cell_div.select(".jp-OutputArea-output img")
        images = [img for img in images if img.get("alt") in (None, "", NBCONVERT_ALT)]
        if images and index is not None:
            alt = describe_figure(nb, index, words)
            for img in images:
                img["alt"] = alt
    for table in soup.select(".jp-RenderedHTMLCommon table"):
        table["tabindex"] = "0"
    return str(soup)
