"""tools/run_notebooks.py (``make test-gpu``): a failing cell is named, a good notebook passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_markdown_cell("# a title")]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in sources]
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_a_good_and_a_bad_notebook(tmp_path: Path) -> None:
    good = _notebook(tmp_path / "good.ipynb", "x = 1 + 1", "assert x == 2")
    bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "y = 2", "assert x == 2, 'x is not two'")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_notebooks.py"), str(good), str(bad),
         "--out-dir", str(out), "--timeout", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "OK" in proc.stdout and "FAILED" in proc.stdout
    assert "cell 3 (code cell 2)" in proc.stdout  # counted among all cells and code cells
    assert "x is not two" in proc.stdout
    assert "1 passed, 1 failed" in proc.stdout
    assert (out / "good.ipynb").is_file() and (out / "bad.ipynb").is_file()
    assert nbformat.read(good, as_version=4).cells[1].get("outputs") == []  # untouched


def test_a_missing_notebook_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_notebooks.py"), str(tmp_path / "no.ipynb")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "no such notebook" in proc.stderr
