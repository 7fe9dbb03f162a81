"""Slide decks for the teaching site: each lesson's core path as a reveal.js presentation.

``make html`` (tools/build_site.py) writes one deck per lesson and language next to the
lesson page (``01_tensors.slides.html``). A deck shows the cells that ``tools/slides.py``
marks (the core path: a slide per section, code cells as fragments, with their stored
outputs and figures) and skips deep dives, exercises and solutions. Everything it loads comes
from the site: reveal.js from ``site_templates/vendor`` (unmodified, MIT licence kept),
MathJax from the site's copy. Keys: → / space next, ← back, Esc overview, F full screen.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter
from traitlets import validate

TEMPLATES = Path(__file__).resolve().parent / "site_templates"
REVEAL_VERSION = "6.0.2"
REVEAL = TEMPLATES / "vendor" / "reveal.js"
SUFFIX = ".slides.html"


class _DeckExporter(SlidesExporter):
    """nbconvert's reveal.js exporter with a BCP 47 ``<html lang>`` such as ``zh-CN``."""

    @validate("language_code")
    def _valid_language_code(self, proposal: dict) -> str:
        return proposal["value"]


def copy_reveal(static_dir: Path) -> Path:
    """Copy the vendored reveal.js (and its licence) into the site's static folder."""
    target = static_dir / "reveal.js"
    shutil.copytree(REVEAL, target, dirs_exist_ok=True)
    return target


def deck_name(stem: str) -> str:
    return stem + SUFFIX


def has_slides(nb: nbformat.NotebookNode) -> bool:
    """Whether ``nb`` carries slide metadata (``python -m tools.slides write``)."""
    return any(c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells)


def render_deck(
    nb: nbformat.NotebookNode,
    *,
    title: str,
    html_lang: str,
    static: str,
    mathjax_url: str,
    lesson_page: str,
    back_label: str,
) -> str:
    """The HTML of ``nb``'s deck; ``static`` is the site's static folder relative to it."""
    nb = copy.deepcopy(nb)
    nb.metadata["title"] = title
    exporter = _DeckExporter(
        template_name="deck",
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(TEMPLATES)],
        language_code=html_lang,
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
            "mathjax_url": mathjax_url,
            "lesson_page": lesson_page,
            "back_label": back_label,
        }
    }
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body
