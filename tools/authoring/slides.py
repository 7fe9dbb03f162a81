"""Slide metadata for every notebook from its headings: the core path as a slideshow.

RISE in JupyterLab and the site's reveal.js decks read each cell's
``metadata.slideshow.slide_type``, written here by one rule: a core markdown cell with a
heading, or prose after the slide showed code, opens a **slide**, other prose stays on it
(``-``); a core code cell is a **fragment** (it appears on the next key press); deep dives,
exercises and solutions are skipped. No subslides: reveal.js stacks them vertically and →
jumps over them (RISE does not pass ``navigationMode`` on). RISE's "white" theme, because its
default loads fonts from Google, which a classroom without internet cannot reach.

    python -m tools.authoring.slides write | check
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from tools.authoring.lesson_size import NOTEBOOKS, part_of
from tools.lessons import LessonError, lesson_notebooks, read_notebook

RISE = {"theme": "white", "scroll": True, "auto_select": "none"}  # notebook metadata read by RISE


def slide_types(nb: nbformat.NotebookNode) -> list[str]:
    """The slide type of each cell of ``nb``, by the rule in this module's docstring."""
    types = []
    code_shown = False  # whether the current slide already holds a code cell
    for cell in nb.cells:
        if part_of(cell) != "core" or cell.cell_type not in ("markdown", "code"):
            types.append("skip")
        elif cell.cell_type == "code":
            types.append("fragment")
            code_shown = True
        else:
            opens = bool(re.match(r"#{1,6}\s", cell.source)) or code_shown
            types.append("slide" if opens else "-")
            code_shown = False
    if types and types[0] != "skip":
        types[0] = "slide"  # a deck starts with a slide whatever its first cell is
    return types


def stale(nb: nbformat.NotebookNode) -> list[int | str]:
    """The cells whose slide type is not what ``stamp`` writes (and ``"rise"`` when the
    notebook's RISE settings are not)."""
    return (["rise"] if nb.metadata.get("rise") != RISE else []) + [
        i
        for i, (cell, kind) in enumerate(zip(nb.cells, slide_types(nb), strict=True))
        if cell.metadata.get("slideshow") != {"slide_type": kind}
    ]


def stamp(nb: nbformat.NotebookNode) -> bool:
    """Write the slide types into ``nb``'s cells; whether anything changed."""
    changed = bool(stale(nb))
    nb.metadata["rise"] = dict(RISE)
    for cell, kind in zip(nb.cells, slide_types(nb), strict=True):
        cell.metadata["slideshow"] = {"slide_type": kind}
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: the listed lessons")
    args = parser.parse_args(argv)
    try:  # every notebook is read before the first is written
        paths = args.notebooks or lesson_notebooks(NOTEBOOKS)
        if missing := [str(p) for p in paths if not p.is_file()]:
            raise LessonError(f"no such notebook: {', '.join(missing)}")
        notebooks = [read_notebook(path) for path in paths]
    except LessonError as err:  # the table of contents, a notebook that is not JSON
        print(f"error: {err}", file=sys.stderr)
        return 2
    problems = []
    for path, nb in zip(paths, notebooks, strict=True):
        if args.command == "write" and stamp(nb):
            nbformat.write(nb, path)
            print(f"{path.name}: slide metadata written")
        elif args.command == "check" and (cells := stale(nb)):
            problems.append(
                f"{path.name}: slide metadata of cells {cells[:8]} is stale: "
                "`python -m tools.authoring.slides write`, then `make translations`"
            )
    print("\n".join(problems) or f"{len(paths)} notebooks: slide metadata current")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
