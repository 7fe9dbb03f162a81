"""`make clean` removes what the notebooks leave behind and keeps the downloaded dataset;
`make lab` gives the Chinese notebooks the English notebooks' data folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_clean_removes_run_artefacts_but_keeps_data(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    left_behind = [
        "notebooks/.runs/checkpoints/a.pt",
        "notebooks/checkpoints/b.pt",
        "notebooks/runs/05/metrics.json",
        "notebooks/zh/.runs/05/metrics.json",  # the translated notebooks run in their folder
        "build/site/index.html",
        ".venv/bin/x",
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
        ["make", "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert [r for r in left_behind if (tmp_path / r).exists()] == []
    assert all((tmp_path / r).exists() for r in kept)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
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


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_a_chinese_data_folder_of_ones_own_is_left_alone(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    own = tmp_path / "notebooks" / "zh" / "data" / "cifar-10-batches-py"
    own.mkdir(parents=True)
    proc = subprocess.run(
        ["make", "data-link"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert not own.parent.is_symlink() and own.is_dir()
