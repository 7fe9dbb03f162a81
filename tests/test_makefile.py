"""`make clean` removes what the build and the tools wrote, and says what it kept; `make
clean-runs` removes what the notebooks leave behind and keeps the downloaded dataset; `make
lab` gives the Chinese notebooks the English notebooks' data folder; `make html` takes
EXECUTE as a yes or a no."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _with_makefile(tmp_path: Path) -> Path:
    tmp_path.mkdir(exist_ok=True)
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "tools").mkdir(exist_ok=True)
    for name in ("__init__.py", "clean.py", "owned.py"):  # all `make clean` runs
        shutil.copy(ROOT / "tools" / name, tmp_path / "tools" / name)
    return tmp_path


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@needs_make
def test_make_clean_removes_only_what_the_build_wrote_and_says_what_it_kept(
    tmp_path: Path,
) -> None:
    # Rule: a tool deletes only files it wrote itself (its manifest), and says what it kept.
    root = _with_makefile(tmp_path)
    built = {"build/site/index.html": "<p>", "build/site/_static/site.css": "p {}"}
    wrote = {
        **built,
        "build/site/edited.html": "edited by hand after the build",
        "build/screenshots/deck-en-01-title.png": "png",
        "build/.site.lock": "4242\n",  # make html's lock (tools/publishing/build_site.py)
        ".venv/bin/python": "x",
        ".venv/.installed": "",
        ".pytest_cache/v/cache": "x",
        "tools/__pycache__/clean.cpython-312.pyc": "x",
        "tools/teaching/proxy/node_modules/.package-lock.json": "{}",  # make hub's npm ci
        "tools/teaching/proxy/node_modules/configurable-http-proxy/index.js": "x",
    }
    kept = {
        "build/site/mine.txt": "a file of the user's in the site folder",
        "build/notes.md": "the user's",
        "notebooks/.runs/checkpoints/a.pt": "a checkpoint",
        "notebooks/zh/.runs/05/metrics.json": "{}",
        "notebooks/data/cifar-10-batches-py/data_batch_1": "data",
    }
    _write(root, {**wrote, **kept})
    digests = {**built, "build/site/edited.html": "as the build wrote it"}
    record = "".join(
        f"{hashlib.sha256(text.encode()).hexdigest()}  {rel.removeprefix('build/site/')}\n"
        for rel, text in digests.items()
    )
    _write(root, {"build/site/_static/built-files.sha256": record})
    proc = subprocess.run(["make", "clean"], cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r for r in built if (root / r).exists()) == []
    assert not (root / ".venv").exists() and not (root / ".pytest_cache").exists()
    assert not (root / "build/screenshots").exists() and not (root / "tools/__pycache__").exists()
    assert not (root / "build/.site.lock").exists()
    assert not (root / "tools/teaching/proxy/node_modules").exists()
    assert all((root / r).exists() for r in [*kept, "build/site/edited.html"])
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("make clean: kept")]
    for rel in ("build/site/mine.txt", "build/site/edited.html", "notebooks/.runs (1 file"):
        assert rel in line, line
    assert "`make clean-runs`" in line, line


@needs_make
def test_make_clean_runs_removes_run_artefacts_but_keeps_data(tmp_path: Path) -> None:
    root = _with_makefile(tmp_path)
    left_behind = [
        "notebooks/.runs/checkpoints/a.pt",
        "notebooks/checkpoints/b.pt",
        "notebooks/runs/05/metrics.json",
        "notebooks/zh/.runs/05/metrics.json",  # the translated notebooks run in their folder
    ]
    kept = [
        "notebooks/data/cifar-10-batches-py/data_batch_1",
        "notebooks/zh/data/cifar-10-batches-py/data_batch_1",
        "notebooks/01_tensors.ipynb",
    ]
    for rel in left_behind + kept:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    proc = subprocess.run(
        ["make", "clean-runs"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert [r for r in left_behind if (tmp_path / r).exists()] == []
    assert all((tmp_path / r).exists() for r in kept)
    assert "notebooks/.runs (1 file)" in proc.stdout, proc.stdout


def _outside(tmp_path: Path, files: dict[str, str]) -> Path:
    """A folder beside the project (tmp_path/project) with ``files``: what a link leads to."""
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere, files)
    return elsewhere


def _make(root: Path, target: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["make", target], cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc


def _recorded(root: Path, names: dict[str, str]) -> None:
    """The site's record (build_site.py's manifest) listing ``names`` with their digests."""
    lines = "".join(f"{hashlib.sha256(t.encode()).hexdigest()}  {n}\n" for n, t in names.items())
    _write(root, {"build/site/index.html": "<p>", "build/site/_static/built-files.sha256": lines})


@needs_make
def test_make_clean_never_deletes_an_absolute_path_its_record_names(tmp_path: Path) -> None:
    # Item 6: a record names "/elsewhere/notes.txt" with its right digest: it is not the site's.
    root = _with_makefile(tmp_path / "project")
    elsewhere = _outside(tmp_path, {"notes.txt": "mine", "up.txt": "mine too"})
    _recorded(root, {str(elsewhere / "notes.txt"): "mine", "../../../elsewhere/up.txt": "mine too"})
    _make(root, "clean")
    assert (elsewhere / "notes.txt").read_text() == "mine"
    assert (elsewhere / "up.txt").read_text() == "mine too"


@needs_make
def test_make_clean_never_deletes_a_recorded_file_through_a_link_in_the_site(
    tmp_path: Path,
) -> None:
    # Item 7: build/site/docs -> /elsewhere; the record names docs/notes.txt with its digest.
    root = _with_makefile(tmp_path / "project")
    elsewhere = _outside(tmp_path, {"notes.txt": "mine"})
    _recorded(root, {"docs/notes.txt": "mine"})
    (root / "build/site/docs").symlink_to(elsewhere)
    proc = _make(root, "clean")
    assert (elsewhere / "notes.txt").read_text() == "mine"
    assert "build/site/docs" in proc.stdout, "the link is named among what was kept"


@needs_make
@pytest.mark.parametrize("folder", ["build/screenshots", "build/gpu-run", "build"])
def test_make_clean_never_empties_a_folder_its_output_folder_links_to(
    tmp_path: Path, folder: str
) -> None:
    # Item 8: build/screenshots or build/gpu-run (or build itself) is a link to a folder of the
    # user's holding names that `make clean` removes in its own folders.
    root = _with_makefile(tmp_path / "project")
    mine = {"deck-en-01.png": "a", "lab-slideshow.png": "b", "01_tensors.ipynb": "c"}
    mine |= {"screenshots/deck-1.png": "d", "gpu-run/02_x.ipynb": "e"}
    elsewhere = _outside(tmp_path, mine)
    (root / folder).parent.mkdir(parents=True, exist_ok=True)
    (root / folder).symlink_to(elsewhere)
    _make(root, "clean")
    assert {n: (elsewhere / n).read_text() for n in mine} == mine


@needs_make
def test_make_clean_runs_never_deletes_runs_of_a_project_linked_into_notebooks(
    tmp_path: Path,
) -> None:
    # Item 9: notebooks/other -> another project whose notebooks wrote .runs.
    root = _with_makefile(tmp_path / "project")
    elsewhere = _outside(tmp_path, {".runs/model.pt": "weeks of training"})
    _write(root, {"notebooks/.runs/a.pt": "ours"})
    (root / "notebooks/other").symlink_to(elsewhere)
    (root / "notebooks/checkpoints").symlink_to(elsewhere / ".runs")
    proc = _make(root, "clean-runs")
    assert (elsewhere / ".runs/model.pt").read_text() == "weeks of training"
    assert not (root / "notebooks/.runs").exists(), "this project's runs still go"
    assert "kept notebooks/other/.runs, notebooks/checkpoints: a link" in proc.stdout, proc.stdout


@needs_make
def test_the_chinese_notebooks_share_the_data_folder(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    for _ in range(2):  # the second run changes nothing
        proc = subprocess.run(
            ["make", "data-link"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
    link = tmp_path / "notebooks" / "zh" / "data"
    assert link.is_symlink() and link.resolve() == (tmp_path / "notebooks" / "data").resolve()
    (link / "cifar-10-batches-py").mkdir()  # what torchvision writes lands in notebooks/data
    assert (tmp_path / "notebooks" / "data" / "cifar-10-batches-py").is_dir()


@needs_make
def test_a_chinese_data_folder_of_ones_own_is_left_alone(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    own = tmp_path / "notebooks" / "zh" / "data" / "cifar-10-batches-py"
    own.mkdir(parents=True)
    proc = subprocess.run(
        ["make", "data-link"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert not own.parent.is_symlink() and own.is_dir()


@needs_make
@pytest.mark.parametrize("given", ["environment", "command line"])
def test_make_html_takes_execute_as_yes_or_no_and_refuses_anything_else(
    tmp_path: Path, given: str
) -> None:
    # Rule: a setting is understood as written (1/true/yes/on) or refused in one line.
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")

    def html(value: str) -> subprocess.CompletedProcess:
        argv = ["make", "-n", "-o", ".venv/.installed", "html"]  # -n: print, run nothing
        env = {**os.environ, "EXECUTE": value} if given == "environment" else None
        argv += [] if env else [f"EXECUTE={value}"]
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)

    build = "-m tools.publishing.build_site"
    for value in ("1", "true", "yes", "on", "TRUE", "Yes"):
        proc = html(value)
        assert proc.returncode == 0 and "--execute" in proc.stdout, (value, proc)
    for value in ("", "0", "false", "no", "off"):
        proc = html(value)
        assert proc.returncode == 0 and build in proc.stdout, (value, proc)
        assert "--execute" not in proc.stdout, (value, proc.stdout)
    for value in ("maybe", "1 2", "ture"):
        proc = html(value)
        assert proc.returncode != 0 and build not in proc.stdout, (value, proc)
        assert len(proc.stderr.strip().splitlines()) == 1 and "EXECUTE" in proc.stderr, proc
