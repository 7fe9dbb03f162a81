"""The lessons' conventions, defined once: the cell tags, and each language's words.

A language is one file, ``tools/publishing/templates/strings/<code>.json``: the site's interface
words, and under ``"lesson"`` what marks a lesson in that language (the deep-dive heading's
first word, the header's field labels, the learner-time and run-time lines that
``tools/authoring/lesson_size.py write`` stamps, how a duration is written, the page's ``<html
lang>``). English is the source; every other language also has its catalogs in
``translations/<code>/`` (tools/authoring/i18n.py). The site (tools/publishing/build_site.py),
the lesson sizes
(tools/authoring/lesson_size.py) and the tests read these; adding a language is its catalogs plus
its strings file (tests/test_conventions.py builds a fake third one).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

# Cell tags (Lab: the property inspector's "Cell Tags"). A cell with none of the first three
# is on the core path; `save` copies a cell into utils (tools/authoring/save_cells.py).
OPTIONAL, EXERCISE, SOLUTION, SAVE = "optional", "exercise", "solution", "save"
SOURCE = "en"  # the language the notebooks are written in
STRINGS_DIR = Path(__file__).resolve().parent / "publishing" / "templates" / "strings"


@functools.cache
def _text(path: Path) -> str:
    # read once per process: lesson_size formats a duration, build_site a page, many times
    return path.read_text(encoding="utf-8")


def strings(code: str) -> dict:
    """Language ``code``'s words (its whole strings file), a fresh dict the caller may change."""
    path = STRINGS_DIR / f"{code}.json"
    if not path.is_file():
        raise KeyError(f"no strings file for language {code!r}: {path}")
    return json.loads(_text(path))


def lesson_words(code: str) -> dict:
    """What marks a lesson in language ``code`` (the strings file's ``"lesson"`` part)."""
    return strings(code)["lesson"]


def codes() -> list[str]:
    """Every language with a strings file, the source first."""
    others = sorted(p.stem for p in STRINGS_DIR.glob("*.json") if p.stem != SOURCE)
    return [SOURCE, *others]
