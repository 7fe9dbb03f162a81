"""Guards on the notebooks themselves: stored executed, top to bottom, and collected by nbval
(the English ones only: notebooks/zh is checked against them in tests/test_translations.py)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
IDS = [p.name for p in NOTEBOOKS]


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_stored_executed_in_order(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    counts = [c.get("execution_count") for c in code]
    missing = [i for i, n in enumerate(counts) if n is None]
    assert not missing, (
        f"{path.name}: code cells {missing} (zero-based) were never executed; "
        "run `make refresh` to store the notebook executed top to bottom"
    )
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name}: execution counts {counts} are not 1..{len(code)}: the stored outputs "
        "did not come from one top-to-bottom run; run `make refresh`"
    )
    errors = [
        i
        for i, c in enumerate(code)
        for out in c.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: code cells {errors} stored an error"
    stamped = [i for i, c in enumerate(code) if "execution" in c.metadata]
    assert not stamped, (
        f"{path.name}: code cells {stamped} store execution timestamps, which change on every "
        "run and hide the real diff; store it with `make refresh`, which leaves them out"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_has_kernel_metadata(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{path.name}: kernelspec must be python3 so Lab and nbval pick the project's env"
    )


@pytest.mark.e2e  # pytest --collect-only started as typed, a fresh Python
def test_nbval_collects_every_english_notebook_and_no_chinese_one() -> None:
    """A notebook that exists but is not in nbval's collection would silently go untested;
    notebooks/zh has the English code and outputs, so nbval would run them twice."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert "notebooks" in testpaths, f"pytest's testpaths {testpaths} leave out notebooks/"
    assert list((ROOT / "notebooks" / "zh").glob("*.ipynb")), "no notebooks/zh to leave out"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--nbval", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    collected = {line.split("::", 1)[0] for line in out.stdout.splitlines() if "::" in line}
    for path in NOTEBOOKS:
        rel = path.relative_to(ROOT).as_posix()
        assert rel in collected, f"{rel} is not collected by nbval:\n{out.stdout[-2000:]}"
    assert not [c for c in collected if c.startswith("notebooks/zh/")], (
        "nbval collects notebooks/zh: keep it in pyproject's norecursedirs"
    )
