"""What the tests share: the repository's paths, the lesson notebooks and a free port.

Import them as ``from tests.conftest import ROOT, NOTEBOOKS, free_port``.
"""

from __future__ import annotations

from pathlib import Path

from utils.launch import free_port  # the one definition, shared with notebook 05

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"


def lesson_notebooks() -> list[Path]:
    """The lessons nbval checks: ``notebooks/*.ipynb``, sorted (not subfolders)."""
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


NOTEBOOKS = lesson_notebooks()
__all__ = ["NOTEBOOKS", "NOTEBOOKS_DIR", "ROOT", "free_port", "lesson_notebooks"]
