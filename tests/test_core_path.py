"""The core path of each lesson stands alone, and all five fit the blitz's budget.

Each notebook is executed with its deep dives, exercises and solutions left out (cells
tagged ``optional``, ``exercise``, ``solution``), top to bottom, in the test contract's
environment: a core cell that needs something a deep dive defines fails here. No output
is compared (nbval does that for the whole notebook); the cells' own asserts run.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools import lesson_size

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
# What a lesson cell never shows: the project's variables, formatter markers, test wording.
# One variable is the learner's own: BLITZ_CIFAR10_SUBSET, how a class without internet hands
# notebook 04 the offline subset (DATA.md), checked in plain sight by its data cell.
PROJECT_WORDING = re.compile(
    r"BLITZ_(?!CIFAR10_SUBSET\b)|fmt:\s*(skip|off|on)|nbval|NBVAL|\bpytest\b|\bCI\b"
    r"|make test|test contract",
)


def core_cells(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    core = nbformat.from_dict(nb)
    core.cells = [c for c in nb.cells if lesson_size.part_of(c) == "core"]
    return core


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_core_path_runs_alone(path: Path) -> None:
    from nbclient import NotebookClient

    nb = core_cells(nbformat.read(path, as_version=4))
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError naming the cell that failed


def test_the_core_paths_fit_the_budget() -> None:
    words = lines = 0
    for path in NOTEBOOKS:
        core = lesson_size.measure(path).parts["core"]
        words, lines = words + core.words, lines + core.lines
    max_words, max_lines = lesson_size.CORE_BUDGET
    report = f"core path: {words:,} words, {lines} code lines (python -m tools.lesson_size)"
    assert words <= max_words and lines <= max_lines, report


def test_headers_and_deep_dives_are_current() -> None:
    found = [p for path in NOTEBOOKS for p in lesson_size.problems(path)]
    assert not found, "\n".join(found + ["Fix: python -m tools.lesson_size write"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_shows_the_project_machinery(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    hits = [
        f"cell {i}: {m.group(0)!r}"
        for i, cell in enumerate(nb.cells)
        for m in PROJECT_WORDING.finditer(cell.source)
    ]
    assert not hits, f"{path.name}: " + "; ".join(hits)


def test_the_formula_matches_the_official_blitz() -> None:
    # About 4,500 words and 350 code lines take a learner about an hour.
    assert 55 <= lesson_size.minutes(4_500, 350) <= 60
    assert lesson_size.minutes(0, 0) == 0
    assert lesson_size.minutes(100, 3) == 1
    assert lesson_size.minutes(3_000, 100) == 25
