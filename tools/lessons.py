"""Which notebooks are lessons: ``NN_name.ipynb``, one pattern for every tool.

A notebook of another name beside the lessons (``Untitled.ipynb`` from JupyterLab's "New
notebook", a learner's own copy) is no lesson: the tools that read the lessons (save_cells,
build_site, i18n, slides, lesson_size) leave it alone and say so in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

LESSON_GLOB = "[0-9][0-9]_*.ipynb"
_reported: set[Path] = set()  # a tool lists the lessons several times: say it once


def _stderr(message: str) -> None:
    # stderr: stdout may be a tool's data (`i18n.py todo --json > t.json`)
    print(message, file=sys.stderr)


def lesson_notebooks(folder: Path, log: Callable[[str], object] = _stderr) -> list[Path]:
    """The lesson notebooks in ``folder``, sorted; one line to ``log`` for each other
    ``.ipynb`` there (ignored)."""
    lessons = sorted(p for p in folder.glob(LESSON_GLOB) if p.is_file())
    for other in sorted(set(folder.glob("*.ipynb")) - set(lessons)):
        if other.resolve() not in _reported:
            _reported.add(other.resolve())
            log(f"ignored {other}: not a lesson (lessons are named NN_name.ipynb)")
    return lessons
