"""Small hardening cases of issue 11: a clear message instead of a traceback or a loss.

(``--out`` naming a file itself: tests/test_site.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["inside-a-file", "symlink"])
def test_build_site_refuses_an_out_that_cannot_be_its_folder(tmp_path: Path, case: str) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    if case == "inside-a-file":
        out = notes / "site"
    else:  # a link to a folder of one's own (shutil.rmtree would raise on it)
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("mine")
        out = tmp_path / "site"
        out.symlink_to(tmp_path / "mine", target_is_directory=True)
    before = sorted(tmp_path.rglob("*"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"build_site.py: error: --out {out} ")
    assert sorted(tmp_path.rglob("*")) == before and notes.read_text() == "mine"  # untouched
