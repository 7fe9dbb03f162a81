"""The band comparison for cells whose numbers come from long floating-point work.

Pure-function tests on the real stored outputs of the notebooks (a stored accuracy edited to
99.9 % must fail), and one end-to-end nbval run on a small notebook whose stored outputs are
mutated in every way that matters.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

from tests.nbval_bands import BAND_KEY, band_problems, check_band, templated
from tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists


def _banded_cells() -> list[tuple[str, int, nbformat.NotebookNode]]:
    cells = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        cells += [(path.name, i, c) for i, c in enumerate(code) if BAND_KEY in c.metadata]
    return cells


BANDED = _banded_cells()


def test_some_cells_are_banded_and_most_are_not() -> None:
    """Bands are the exception: most code cells stay strictly compared."""
    total = sum(
        sum(c.cell_type == "code" for c in nbformat.read(p, as_version=4).cells) for p in NOTEBOOKS
    )
    assert BANDED, "no cell carries a band: then nothing from training is checked portably"
    assert len(BANDED) <= total // 5, f"{len(BANDED)} of {total} code cells are banded"


@pytest.mark.parametrize("name,index,cell", BANDED, ids=[f"{n}::Cell {i}" for n, i, _ in BANDED])
def test_a_banded_cell_asserts_and_prints_banded_numbers(name: str, index: int, cell) -> None:
    band = check_band(cell.metadata[BAND_KEY])
    assert "assert" in cell.source, (
        f"{name} Cell {index}: a banded cell must check its numbers with an assert"
    )
    stored = cell.outputs
    assert band_problems(stored, stored, band) == []
    # The band must apply to at least one printed number, or it is a blanket for nothing.
    flat = templated(stored, band, lambda s: s)
    assert flat != stored, f"{name} Cell {index}: its band applies to no printed number"


@pytest.mark.parametrize("name,index,cell", BANDED, ids=[f"{n}::Cell {i}" for n, i, _ in BANDED])
def test_a_stored_number_edited_by_hand_fails(name: str, index: int, cell) -> None:
    band = check_band(cell.metadata[BAND_KEY])
    stored = cell.outputs
    edited = [nbformat.from_dict(dict(o)) for o in stored]
    changed = False
    for out in edited:
        for holder, key in ((out, "text"), (out.get("data", {}), "text/plain")):
            if isinstance(holder.get(key), str) and not changed:
                new = _bump_first_banded(holder[key], band)
                if new != holder[key]:
                    holder[key], changed = new, True
    assert changed
    assert band_problems(stored, edited, band), f"{name} Cell {index}: an edit went unnoticed"


def _bump_first_banded(text: str, band: dict[str, float]) -> str:
    """``text`` with its first banded number replaced by 99.9 (or 99.9%)."""
    for m in re.finditer(r"(?<![\w.])(-?\d+\.\d+)(%?)", text):
        kind = "pct" if m.group(2) else "abs"
        if kind in band and abs(float(m.group(1)) - 99.9) > band[kind]:
            return text[: m.start()] + "99.9" + m.group(2) + text[m.end() :]
    return text


@pytest.mark.parametrize(
    "band,message",
    [
        ({}, "non-empty"),
        ({"rel": 0.1}, "unknown keys"),
        ({"pct": 0}, "positive"),
        ([1], "map"),
        # JSON's Infinity would switch the comparison off; NaN, negatives and text mean nothing
        ({"abs": float("inf")}, r"nbval_band\['abs'\] must be a positive finite number, got inf"),
        ({"pct": float("nan")}, "positive finite number, got nan"),
        ({"abs": -0.05}, "positive finite number, got -0.05"),
        ({"abs": "0.05"}, "positive finite number, got '0.05'"),
    ],
)
def test_malformed_bands_are_named(band, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_band(band)


def _out(text: str) -> list:
    return [nbformat.v4.new_output("stream", name="stdout", text=text)]


def test_band_problems_rules() -> None:
    band = {"pct": 2.0, "abs": 0.05}
    same = "accuracy 40.4%, loss 2.257, 1,000 images\n"
    assert band_problems(_out(same), _out("accuracy 39.9%, loss 2.258, 1,000 images\n"), band) == []
    assert band_problems(_out(same), _out("accuracy 43.0%, loss 2.257, 1,000 images\n"), band)
    assert band_problems(_out(same), _out("accuracy 40.4%, loss 2.400, 1,000 images\n"), band)
    # A kind the band does not name is not banded: it stays in the exactly compared text.
    assert templated(_out("loss 2.257"), {"pct": 2.0}, str)[0]["text"] == "loss 2.257"


# --- end to end: nbval with the plugin on a small notebook ----------------------------------

CODE = (
    "acc, loss = 0.5, 1.2345\n"
    'print(f"accuracy: {acc:.1%}, loss {loss:.3f}, {7} images")\n'
    "assert acc > 0.1"
)
PRODUCED = "accuracy: 50.0%, loss 1.234, 7 images\n"
CASES = {  # stored output, band, should nbval pass?
    "exact": (PRODUCED, {"pct": 2.0, "abs": 0.05}, True),
    "within the band": ("accuracy: 51.5%, loss 1.260, 7 images\n", {"pct": 2.0, "abs": 0.05}, True),
    "accuracy edited to 99.9%": (
        "accuracy: 99.9%, loss 1.234, 7 images\n",
        {"pct": 2.0, "abs": 0.05},
        False,
    ),
    "loss outside": ("accuracy: 50.0%, loss 1.400, 7 images\n", {"pct": 2.0, "abs": 0.05}, False),
    "an integer changed": ("accuracy: 50.0%, loss 1.234, 8 images\n", {"pct": 2.0}, False),
    "the text changed": ("acc: 50.0%, loss 1.234, 7 images\n", {"pct": 2.0, "abs": 0.05}, False),
    "a line disappeared": ("accuracy: 50.0%, loss 1.234, 7 images\nmore\n", {"pct": 2.0}, False),
    "no band, one digit off": ("accuracy: 50.1%, loss 1.234, 7 images\n", None, False),
    "pct band only, loss off": ("accuracy: 50.0%, loss 1.235, 7 images\n", {"pct": 2.0}, False),
    # stored as JSON's Infinity: rejected (it would accept any number), naming the cell
    "infinite bands": (
        "accuracy: 9.9%, loss 9.999, 7 images\n",
        {"pct": math.inf, "abs": math.inf},
        False,
    ),
}


@pytest.mark.e2e
def test_nbval_with_bands_end_to_end(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    for n, (stored, band, _) in enumerate(CASES.values(), start=1):
        cell = nbformat.v4.new_code_cell(CODE, execution_count=n)
        cell.outputs = _out(stored)
        if band is not None:
            cell.metadata[BAND_KEY] = band
        nb.cells.append(cell)
    path = tmp_path / "bands.ipynb"
    nbformat.write(nb, path)
    report = tmp_path / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            "--nbval-current-env",
            "-p",
            "tests.nbval_bands",
            "-o",
            "addopts=",
            "-q",
            f"--junitxml={report}",
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    outcomes, messages = {}, {}
    for case in ET.parse(report).getroot().iter("testcase"):
        index = int(case.get("name", "").rsplit(" ", 1)[-1])
        outcomes[index] = case.find("failure") is None and case.find("error") is None
        messages[index] = "".join(e.get("message", "") for e in case if e.tag == "failure")
    expected = {i: ok for i, (_, _, ok) in enumerate(CASES.values())}
    names = list(CASES)
    wrong = [names[i] for i in expected if outcomes.get(i) != expected[i]]
    assert not wrong, f"nbval outcome differs from the rule for: {wrong} ({outcomes})"
    infinite = names.index("infinite bands")
    expected = f"bands.ipynb::Cell {infinite}: {BAND_KEY}['abs'] must be a positive finite number"
    assert expected in messages[infinite], messages[infinite]
