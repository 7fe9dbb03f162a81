"""Every cell of the five notebooks -- core path, deep dives, exercises' solutions -- run where
a learner runs them: in kernels of `make lab`, started from the shell's environment (PATH
without the virtual environment, no test contract: tests/lab.py), each notebook opened as a
click in Lab opens it (a session, the kernel in the notebook's folder), its code cells run
in order. No output is compared (nbval does that under the test contract); an error fails.

The all-lessons zip the site offers gets the same: unpacked into an empty folder (no
``../shared``, no checkout around it), set up with the README's commands without make,
offline with only the subset file given (DATA.md), its own JupyterLab runs the five notebooks.

Run by ``make test-e2e`` (marked ``e2e``), not by ``make test``: it repeats the notebooks'
run time twice.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.lab import Lab, run_cell
from tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
CELL_TIMEOUT_S = 600


def run_every_cell(lab: Lab, path: Path) -> None:
    """Open ``path`` (a notebook of ``lab``'s folder) as a click does and run its code cells
    in order; the first error fails, naming the cell."""
    nb = nbformat.read(path, as_version=4)
    cells = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    with lab.kernel(path.name) as client:
        for number, (i, cell) in enumerate(cells):
            reply, errors = run_cell(client, cell.source, CELL_TIMEOUT_S)
            where = f"{path.name}, cell {i} (code cell {number}, nbval's Cell {number})"
            assert reply["status"] == "ok" and not errors, (
                f"{where} failed in `make lab`'s kernel:\n" + "\n".join(errors)[-4000:]
            )


@pytest.mark.e2e
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_runs_in_a_kernel_of_make_lab(lab: Lab, path: Path) -> None:
    run_every_cell(lab, path)


def _readme_commands_without_make() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("### Without `make`", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.e2e
def test_the_zip_runs_every_notebook_offline_with_its_readmes_commands(tmp_path: Path) -> None:
    """The README's four commands, literally, in the unpacked zip; the pinned packages are
    this environment's (a .pth file), so pip finds every requirement satisfied instead of
    downloading gigabytes. Then every notebook in the zip's own JupyterLab, given only
    BLITZ_CIFAR10_SUBSET as DATA.md says."""
    import subprocess
    import sys
    import sysconfig
    import zipfile

    from tests.lab import started
    from tools.harness import contract
    from tools.publishing import archive

    subset = contract.SHARED_SUBSET
    if not subset.is_file():
        pytest.skip(f"no subset file at {subset} to hand the zip (DATA.md)")
    commands = _readme_commands_without_make()
    assert commands == [
        "python3 -m venv .venv",
        ".venv/bin/python -m pip install -r requirements.txt",
        ".venv/bin/python -m pip install -e .",
        ".venv/bin/python -m tools.publishing.lab",
    ], commands
    target = tmp_path / "download" / archive.NAME
    archive.write_archive(target)
    empty = tmp_path / "empty"
    empty.mkdir()
    zipfile.ZipFile(target).extractall(empty)
    folder = empty / archive.FOLDER
    shell = dict(contract.SHELL_ENVIRON)  # not the test contract's: a learner's shell

    def run(line: str) -> None:
        argv = line.split()
        if argv[0] == "python3":
            argv[0] = sys._base_executable  # the interpreter this environment was made from
        done = subprocess.run(
            argv, cwd=folder, env=shell, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"`{line}` failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"

    run(commands[0])
    python = folder / ".venv" / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    shared = Path(site.stdout.strip()) / "_this_environments_packages.pth"
    shared.write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    run(commands[1])
    run(commands[2])
    assert commands[3].startswith(".venv/bin/python -m ")
    with started(
        tmp_path / "lab", python=python, cwd=folder, BLITZ_CIFAR10_SUBSET=str(subset)
    ) as lab:
        with lab.kernel() as client:  # the zip's own utils, not this checkout's
            reply = client.execute_interactive(
                "import utils", user_expressions={"file": "utils.__file__"}, timeout=60
            )["content"]
        found = reply["user_expressions"]["file"].get("data", {}).get("text/plain", "")
        assert str(folder / "utils") in found, found
        for path in lesson_notebooks(folder / "notebooks"):  # the zip's _toc.yml
            run_every_cell(lab, path)
