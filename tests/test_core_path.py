"""The core path of each lesson stands alone, and all five fit the blitz's budget.

Each notebook is executed with its deep dives, exercises and solutions left out (cells
tagged ``optional``, ``exercise``, ``solution``), top to bottom, as a learner who copies them
into a fresh file would run them: in a kernel of a Python that has torch, torchvision and
matplotlib but not this project. A core cell that needs ``utils``, a project file or
something a deep dive defines fails here. No output is compared (nbval does that for the
whole notebook); the cells' own asserts run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from tools.authoring import lesson_size
from tools.lessons import lesson_notebooks

NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
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


# What the clean kernel runs first, for notebook 04 only: torchvision reads the subset's
# images in its own folder format (tools/harness/full_from_subset.py), whose md5 check only the
# full,
# published files pass. The lesson's cells themselves run exactly as a learner copies them.
_READ_THE_FOLDER = """
import os

import torchvision.datasets.cifar as cifar

cifar.check_integrity = lambda fpath, md5=None: os.path.isfile(fpath)
"""


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory) -> Path:
    """A fresh virtual environment that sees this venv's third-party packages (torch,
    torchvision, matplotlib, ipykernel) through a plain path, and not the project: its
    editable install is a finder that only this venv's own site folder starts."""
    import site
    import subprocess
    import sys

    venv = tmp_path_factory.mktemp("clean") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "third_party.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    probe = "import torch, torchvision, matplotlib, ipykernel\n"
    probe += "try: import utils\nexcept ImportError: print('ok')"
    out = subprocess.run([python, "-c", probe], cwd=venv, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", f"the clean environment is not clean: {out}"
    return python


@pytest.mark.e2e
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_core_path_runs_alone_with_only_pytorch(
    path: Path, clean_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The untagged cells, in order, in a fresh folder, by a kernel of a Python without the
    project (no ``utils``, no project files, none of our variables); notebook 04 finds
    CIFAR-10 in torchvision's folder, ``data/cifar-10-batches-py``."""
    import json
    import sys

    from nbclient import NotebookClient

    from tools.harness import contract, full_from_subset
    from utils import data

    spec = tmp_path / "jupyter" / "kernels" / "clean"
    spec.mkdir(parents=True)
    argv = [str(clean_python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "clean", "language": "python"})
    )
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    forced = os.environ.get("BLITZ_FORCE_CPU", "").strip().lower() in contract._ON
    first = contract._HIDE_MPS if forced and sys.platform == "darwin" else ""  # as the contract
    if path.stem.startswith("04"):
        full_from_subset.build(
            Path(os.environ[data.SUBSET_ENV]), tmp_path / "work" / "data", data.PER_BATCH
        )
        first += _READ_THE_FOLDER
    (startup / "00-first.py").write_text(first)
    for name in [
        n for n in os.environ if n.startswith("BLITZ_") or n in ("PYTHONPATH", "IPYTHONDIR")
    ]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)

    nb = core_cells(nbformat.read(path, as_version=4))
    client = NotebookClient(
        nb, timeout=600, kernel_name="clean", resources={"metadata": {"path": str(work)}}
    )
    client.execute()  # raises CellExecutionError naming the cell that failed
    printed = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "CIFAR-10 subset" not in printed  # 04 took torchvision's path, not our loader


def test_the_core_paths_fit_the_budget() -> None:
    words = lines = 0
    for path in NOTEBOOKS:
        core = lesson_size.measure(path).parts["core"]
        words, lines = words + core.words, lines + core.lines
    max_words, max_lines = lesson_size.CORE_BUDGET
    report = (
        f"core path: {words:,} words, {lines} code lines (python -m tools.authoring.lesson_size)"
    )
    assert words <= max_words and lines <= max_lines, report


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


def test_run_times_come_from_the_recorded_measurements(tmp_path, monkeypatch) -> None:
    """The headers' run-time lines are written from notebooks/run_times.json, the one
    measured source (tools/authoring/run_notebooks.py --record-times), in both languages."""
    from tools.authoring import run_notebooks

    store = tmp_path / "run_times.json"
    monkeypatch.setattr(lesson_size, "RUN_TIMES", store)
    assert lesson_size.run_line("04_cifar10", "en") is None  # nothing measured: no line
    run_notebooks.record_times(Path("04_cifar10.ipynb"), {"whole": 83.4, "core": 21.2}, {})
    assert lesson_size.run_line("04_cifar10", "en") == (
        "**Run time**: about 85 s on a 2-core CPU, 20 s of it for the core path."
    )
    assert lesson_size.run_line("04_cifar10", "zh") == (
        "**运行时间**：在双核 CPU 上约 85 秒，其中核心路径约 20 秒。"
    )
    full = {"BLITZ_CIFAR10": "full"}
    run_notebooks.record_times(Path("04_cifar10.ipynb"), {"whole": 301.0, "core": 128.0}, full)
    line = lesson_size.run_line("04_cifar10", "en")
    assert line is not None and "about 2 min for the core path and 5 min for the whole" in line
    assert "about 20 s and 85 s with the 6,000-image subset" in line
    assert [lesson_size.about(s, "en") for s in (0.2, 7.4, 61, 100, 214)] == [
        "1 s",
        "7 s",
        "60 s",
        "1.5 min",
        "3.5 min",
    ]


def test_a_runs_time_is_its_code_cells_time_and_the_core_is_the_untagged_ones() -> None:
    from tools.authoring import run_notebooks

    def ran(seconds: int, tags: list[str]) -> nbformat.NotebookNode:
        cell = nbformat.v4.new_code_cell("pass", metadata={"tags": tags})
        cell.metadata["execution"] = {
            "iopub.execute_input": "2026-11-25T10:00:00.000000Z",
            "shell.execute_reply": f"2026-11-25T10:00:{seconds:02d}.500000Z",
        }
        return cell

    nb = nbformat.v4.new_notebook()
    nb.cells = [ran(3, []), ran(10, ["optional"]), nbformat.v4.new_markdown_cell("x")]
    assert run_notebooks.cell_seconds(nb) == {"whole": 14.0, "core": 3.5}
