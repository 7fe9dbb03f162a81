"""Which notebooks the tools read as lessons (tools/lessons.py): those _toc.yml lists, and how
they read them."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.toc import list_lessons
from tools.authoring import i18n, save_cells, slides
from tools.publishing import build_site

HEADER = """# 07 · Sample lesson

A lesson that exists only inside this test.

**Objectives**
- check the tools

**Prerequisites:** none.

**Hardware**: any CPU.

**Learner time**: core path about 1 min.

**Run time**: about 1 s on the 2-core CPU.
"""
# What JupyterLab's "New notebook" saves: one empty code cell.
UNTITLED = """{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "3f1c2a7e-1b2c-4d5e-8f90-123456789abc",
   "metadata": {},
   "outputs": [],
   "source": []
  }
 ],
 "metadata": {
  "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"""


def _run(tool: str, root: Path, monkeypatch) -> None:
    """``tool`` on ``root/notebooks`` (a lesson and Untitled.ipynb), as its make target runs it."""
    notebooks = root / "notebooks"
    if tool == "utils":  # make utils: tools/authoring/save_cells.py (check: it writes nothing)
        monkeypatch.setattr(save_cells, "ROOT", root)
        save_cells.main(["check"])
    elif tool == "html":
        build_site.build_site(notebooks, root / "site", log=print)
    elif tool == "translations":
        i18n.main(["--notebooks", str(notebooks), "--translations", str(root / "tr"), "build"])
    else:
        monkeypatch.setattr(slides, "NOTEBOOKS", notebooks)
        slides.main(["write"])


@pytest.mark.parametrize("tool", ["utils", "html", "translations", "slides"])
def test_a_notebook_that_is_not_a_lesson_is_ignored_in_one_line(
    tmp_path: Path, tool: str, monkeypatch, capsys
) -> None:
    # Rule: the tools read the lessons _toc.yml lists; any other notebook is left alone, named once.
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (tmp_path / "utils").mkdir()
    lesson = new_notebook(cells=[new_markdown_cell(HEADER), new_code_cell("x = 1")])
    nbformat.write(lesson, notebooks / "07_sample.ipynb")
    untitled = notebooks / "Untitled.ipynb"
    untitled.write_text(UNTITLED, encoding="utf-8")
    list_lessons(notebooks)

    _run(tool, tmp_path, monkeypatch)

    out, err = capsys.readouterr()
    named = [line for line in (out + err).splitlines() if "Untitled" in line]
    assert len(named) == 1 and named[0].startswith("ignored ") and "not a lesson" in named[0], (
        out + err
    )
    assert untitled.read_text(encoding="utf-8") == UNTITLED, "the learner's notebook was changed"
    made = [p for p in tmp_path.rglob("*") if "Untitled" in p.name and p != untitled]
    assert not made, f"{tool} made files from Untitled.ipynb: {made}"
