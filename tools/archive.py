"""The whole collection as one zip, for the teaching site's download link.

A single notebook cannot run on its own: it imports ``utils``, and 05 launches
``scripts/train_ddp.py``. The archive holds what a learner needs to run every lesson in
either language, with the same commands as a clone: the notebooks (English and Chinese),
``utils``, ``scripts``, ``tools``, the tests, ``requirements.txt``, ``pyproject.toml``, the
Makefile, README, DATA.md (how to get CIFAR-10, offline too), LICENSE, CONTRIBUTING and
CI's script: a complete project, in which every file the README names is. No data (CIFAR-10
downloads on first use, or see DATA.md) and no build output: the files git tracks.

    python -m tools.archive build/site/pytorch-blitz.zip
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = "pytorch-blitz"  # what the zip unpacks into
NAME = f"{FOLDER}.zip"
# Never shipped, whether tracked or not: git's own folder, environments, data and outputs.
SKIP_PARTS = {".git", ".venv", "build", "data", "checkpoints", "__pycache__"}
SKIP_SUFFIXES = {".npz", ".pt", ".pyc", ".tar.gz", ".zip"}


def _tracked(root: Path) -> list[str] | None:
    """The files git tracks under ``root``, or None outside a git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        found = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60
        ).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in found.split("\0") if name]


def members(root: Path = ROOT) -> list[str]:
    """The archive's files, relative to ``root`` (POSIX paths, sorted)."""
    names = _tracked(root)
    if names is None:  # an unpacked archive: everything that is not skipped
        names = [
            Path(folder, name).relative_to(root).as_posix()
            for folder, _, files in os.walk(root)
            for name in files
        ]
    kept = []
    for name in names:
        parts = Path(name).parts
        if set(parts) & SKIP_PARTS or name.endswith(tuple(SKIP_SUFFIXES)):
            continue
        if parts[-1].startswith(".") and parts[-1] != ".gitignore":  # .env and the like
            continue
        if (root / name).is_file():
            kept.append(name)
    return sorted(kept)


def write_archive(target: Path, root: Path = ROOT) -> int:
    """Write the zip to ``target`` (atomically); its size in bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in members(root):
            archive.write(root / name, f"{FOLDER}/{name}")
    partial.replace(target)
    return target.stat().st_size


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.archive OUT.zip", file=sys.stderr)
        return 2
    size = write_archive(Path(args[0]))
    print(f"{args[0]}: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
