"""Each lesson's core path as a reveal.js deck (``NN_x.slides.html``, beside its page): the
cells tools/authoring/slides.py marks, with their outputs; reveal.js from ``templates/vendor``.

Every slide fits the screen: :func:`paginate` continues long cells on the next slide, code
lines wrap, and the deck's script scales down a slide still too tall
(tests/test_teaching_tools.py measures each at 1280×720 and 1024×768).
"""

from __future__ import annotations

import copy
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter

from tools.publishing.accessibility import any_language, make_accessible

TEMPLATES = Path(__file__).resolve().parent / "templates"
# What one slide holds, in lines (960 × 700 slide pixels, code 19 px); measured in Chromium.
CODE_LINES = 20
OUTPUT_LINES = 10
PROSE_LINES = 20
SLIDE_LINES = 27  # a slide's prose, code and output together; the next cell starts a slide
PROSE_WIDTH = 85  # Latin characters per rendered line of prose, for counting wrapped lines
REVEAL = TEMPLATES / "vendor" / "reveal.js"
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
_DeckExporter = any_language(SlidesExporter)


def deck_name(stem: str) -> str:
    return f"{stem}.slides.html"


def mathjax_url(static: str) -> str:
    """MathJax 2 as the site copies it into ``static``; lesson pages and decks load the same."""
    return f"{static}/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"


def _chunks(lines: list[str], limit: int, cost: Callable[[str], int]) -> list[list[str]]:
    """``lines`` cut into pieces of at most ``limit`` (by ``cost`` per line), each cut at the
    last blank line that fits (outside a fenced block), else before a list item, else where
    the limit falls."""
    pieces: list[list[str]] = [[]]
    used, fenced, blank, item = 0, False, 0, 0  # where the current piece may be cut
    for line in lines:
        if used + cost(line) > limit and pieces[-1]:
            cut = blank or item or len(pieces[-1])
            pieces.append(pieces[-1][cut:])
            pieces[-2] = pieces[-2][:cut]
            used, blank, item = sum(cost(x) for x in pieces[-1]), 0, 0
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and pieces[-1] and not line.strip():
            blank = len(pieces[-1])
        elif not fenced and pieces[-1] and _LIST_ITEM.match(line):
            item = len(pieces[-1])
        pieces[-1].append(line)
        used += cost(line)
    return [piece for piece in pieces if any(x.strip() for x in piece)]


def _text_lines(output: dict) -> int:
    if output.get("output_type") == "stream":
        return len("".join(output.get("text", "")).splitlines())
    return len("".join(output.get("data", {}).get("text/plain", "")).splitlines())


def _prose_lines(line: str) -> int:
    """Rendered lines of one line of markdown: a Chinese character is as wide as two Latin."""
    width = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)
    return max(1, -(-width // PROSE_WIDTH))


def _lines(cell: nbformat.NotebookNode) -> int:
    """About how many lines ``cell`` takes on a slide (its outputs included)."""
    if cell.cell_type == "markdown":
        return sum(_prose_lines(x) for x in cell.source.splitlines()) + 1
    hidden = cell.metadata.get("transient", {}).get("remove_source")
    shown = 0 if hidden else len(cell.source.splitlines())
    return shown + sum(_text_lines(o) for o in cell.get("outputs", [])) + 1


def paginate(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose slides each fit one screen: a code cell over ``CODE_LINES``
    continues on new slides (cut at blank lines), text output over ``OUTPUT_LINES`` gets a
    slide of its own, prose over ``PROSE_LINES`` (wrapped lines) continues on a new slide,
    and a cell that would take a slide past ``SLIDE_LINES`` starts the next one."""
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        kind = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if kind in ("skip", "notes") or cell.cell_type not in ("markdown", "code"):
            cells.append(cell)
            continue
        if cell.cell_type == "markdown":
            pieces = _chunks(cell.source.splitlines(), PROSE_LINES, _prose_lines)
        else:
            pieces = _chunks(cell.source.splitlines(), CODE_LINES, lambda x: 1)
        pieces = pieces or [cell.source.splitlines()]
        outputs = cell.get("outputs", [])
        long_output = sum(_text_lines(o) for o in outputs) > OUTPUT_LINES
        for i, piece in enumerate(pieces):
            part = copy.deepcopy(cell)
            part.source = "\n".join(piece).strip("\n")
            part.id = cell.id if i == 0 else f"{cell.id}-{i}"[:64]  # ids stay unique
            part.metadata["slideshow"] = {"slide_type": kind if i == 0 else "slide"}
            if cell.cell_type == "code":
                part.outputs = outputs if i == len(pieces) - 1 and not long_output else []
            cells.append(part)
        if long_output:  # the output alone, on the next slide
            shown = copy.deepcopy(cell)
            shown.metadata["slideshow"] = {"slide_type": "slide"}
            shown.metadata["transient"] = {"remove_source": True}
            shown.id = f"{cell.id}-output"[:64]
            cells.append(shown)
    used = 0
    for cell in cells:
        slideshow = cell.metadata.get("slideshow", {})
        if slideshow.get("slide_type") in ("skip", "notes"):
            continue
        if slideshow.get("slide_type") in ("-", "fragment") and used + _lines(cell) > SLIDE_LINES:
            slideshow["slide_type"] = "slide"
        used = (used if slideshow.get("slide_type") in ("-", "fragment") else 0) + _lines(cell)
    nb.cells = cells
    return nb


def render_deck(
    nb: nbformat.NotebookNode, title: str, lesson_page: str, static: str, words: dict
) -> str:
    """The HTML of the deck of ``nb`` (lesson ``title``) in the language of ``words``
    (strings/<code>.json); ``static`` is the site's static folder relative to it."""
    nb = paginate(nb)
    nb.metadata["title"] = f"{title} · {words['slides']}"
    exporter = _DeckExporter(
        template_name="deck",
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(TEMPLATES)],
        language_code=words["lesson"]["html_lang"],
        reveal_url_prefix=f"{static}/reveal.js",
        reveal_theme="white",
        reveal_scroll=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    resources = {
        "site": {
            "static": static,
            "reveal": f"{static}/reveal.js",
            "mathjax_url": mathjax_url(static),
            "lesson_page": lesson_page,
            "back_label": words["back_to_lesson"],
            "keys_label": words["deck_keys"],
        }
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = make_accessible(body, nb, words)
    # nbconvert's template appends " slides" to the title, which already says what it is.
    return re.sub(r"<title>(.*?) slides</title>", r"<title>\1</title>", body, count=1)
