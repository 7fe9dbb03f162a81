"""A table of contents for a folder of notebooks a test made (tools/lessons.py reads it)."""

from __future__ import annotations

from pathlib import Path

from tools.lessons import TOC


def list_lessons(notebooks: Path, *stems: str) -> Path:
    """Write ``notebooks/../_toc.yml`` listing ``stems`` in order (default: the notebooks there
    named like a lesson, sorted), as a maintainer would; its path."""
    stems = stems or tuple(sorted(p.stem for p in notebooks.glob("[0-9][0-9]_*.ipynb")))
    toc = notebooks.parent / TOC
    lines = ["format: jb-book", "root: README", "chapters:"]
    lines += [f"- file: {notebooks.name}/{stem}" for stem in stems]
    toc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return toc
