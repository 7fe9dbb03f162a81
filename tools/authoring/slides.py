"""Slide metadata for every notebook, from its headings: the core path as a slideshow.

RISE in JupyterLab ("Render as slideshow") and nbconvert's reveal.js decks (``make html``)
read each cell's ``metadata.slideshow.slide_type``. This tool writes it by one rule, so no
one sets it by hand:

- a core markdown cell with a heading, or prose after the slide already showed code, opens a
  **slide**; other prose stays on the slide (``-``). There are no subslides: reveal.js stacks
  them vertically, and → then jumps over them to the next stack (RISE in JupyterLab does not
  pass reveal's ``navigationMode`` on), so a teacher pressing → would never show them;
- a core code cell is a **fragment**: it appears on the next key press, after the prose it
  builds on;
- deep dives, exercises and solutions (cell tags, see ``tools/authoring/lesson_size.py``) are
skipped.

The notebook's ``metadata.rise`` picks RISE's "white" theme: its default theme loads fonts
from Google, which a classroom without internet cannot reach.

    python -m tools.authoring.slides write    # stamp every notebook (the Chinese ones copy it)
    python -m tools.authoring.slides check    # exit 1 when a notebook's slide metadata is stale
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from tools.authoring.lesson_size import NOTEBOOKS, part_of
from tools.lessons import lesson_notebooks

SLIDE, FRAGMENT, SKIP, CONTINUE = "slide", "fragment", "skip", "-"
_HEADING = re.compile(r"^(#{1,6})\s")
RISE = {"theme": "white", "scroll": True, "auto_select": "none"}  # notebook metadata read by RISE


def slide_types(nb: nbformat.NotebookNode) -> list[str]:
    """The slide type of each cell of ``nb``, by the rule in this module's docstring."""
    types = []
    code_shown = False  # whether the current slide already holds a code cell
    for cell in nb.cells:
        if part_of(cell) != "core" or cell.cell_type not in ("markdown", "code"):
            types.append(SKIP)
        elif cell.cell_type == "code":
            types.append(FRAGMENT)
            code_shown = True
        else:
            kind = SLIDE if _HEADING.match(cell.source) or code_shown else CONTINUE
            types.append(kind)
            code_shown = code_shown and kind == CONTINUE
    if types and types[0] != SKIP:
        types[0] = SLIDE  # a deck starts with a slide whatever its first cell is
    return types


def stamp(nb: nbformat.NotebookNode) -> bool:
    """Write the slide types into ``nb``'s cells; whether anything changed."""
    changed = nb.metadata.get("rise") != RISE
    nb.metadata["rise"] = dict(RISE)
    for cell, kind in zip(nb.cells, slide_types(nb), strict=True):
        if cell.metadata.get("slideshow") != {"slide_type": kind}:
            cell.metadata["slideshow"] = {"slide_type": kind}
            changed = True
    return changed


def stale(nb: nbformat.NotebookNode) -> list[int | str]:
    """Indices of the cells whose slide type is not what ``stamp`` writes (and ``"rise"``
    when the notebook's RISE settings are not)."""
    wanted = slide_types(nb)
    return (["rise"] if nb.metadata.get("rise") != RISE else []) + [
        i
        for i, (cell, kind) in enumerate(zip(nb.cells, wanted, strict=True))
        if cell.metadata.get("slideshow") != {"slide_type": kind}
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["write", "check"])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or lesson_notebooks(NOTEBOOKS)
    if missing := [str(p) for p in paths if not p.is_file()]:
        print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    problems = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        if args.command == "write":
            if stamp(nb):
                nbformat.write(nb, path)
                print(f"{path.name}: slide metadata written")
        elif cells := stale(nb):
            problems.append(
                f"{path.name}: slide metadata of cells {cells[:8]} is stale: "
                "`python -m tools.authoring.slides write`, then `make translations`"
            )
    print("\n".join(problems) or f"{len(paths)} notebooks: slide metadata current")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
