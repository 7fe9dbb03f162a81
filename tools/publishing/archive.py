"""The whole collection as one zip, for the teaching site's download link.

A single notebook cannot run on its own: it imports ``utils``, and 05 launches
``scripts/train_ddp.py``. The archive holds what a learner needs to run every lesson in
either language, with the same commands as a clone: the notebooks (English and Chinese),
``utils``, ``scripts``, ``tools``, the tests, ``requirements.txt``, ``pyproject.toml``, the
Makefile, README, DATA.md (how to get CIFAR-10, offline too), LICENSE, CONTRIBUTING and
CI's script: a complete project, in which every file the README names is. No data (CIFAR-10
downloads on first use, or see DATA.md) and no build output: the files git tracks (as they
are in the working tree, like the site built beside the zip), plus GENERATED. Never a file
git does not track (a developer's notes, ``.env``, ``.runs/``), never what a symbolic link
points at outside those files, never a name that would unpack elsewhere: each file left out
is named in one line. The zip lists its files in MANIFEST, so an unpacked copy (no git)
makes the same zip again, whatever else was put in it since.

    python -m tools.publishing.archive build/site/pytorch-blitz.zip
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
FOLDER = "pytorch-blitz"  # what the zip unpacks into
NAME = f"{FOLDER}.zip"
# Never shipped, whether tracked or not: git's own folder, environments, data and outputs.
SKIP_PARTS = {".git", ".venv", "build", "data", "checkpoints", "__pycache__"}
SKIP_SUFFIXES = {".npz", ".pt", ".pyc", ".tar.gz", ".zip"}
# Hidden files that are shipped: tools/authoring/i18n.py's record of the notebooks it wrote in
# notebooks/zh (without it, `make translations` in the unpacked zip keeps them as foreign).
HIDDEN_KEPT = {".gitignore", ".i18n-built.json"}
# Written by the tools (tools/authoring/i18n.py, tools/authoring/run_notebooks.py
# --record-times), shipped even
# before anyone commits them.
GENERATED = ("notebooks/zh/.i18n-built.json", "notebooks/run_times.json")
# In the zip: the list of its files, one a line (what an unpacked copy ships again).
MANIFEST = ".archive-files"


class ArchiveError(RuntimeError):
    """Nothing says which files here are the project's; the message says why, in one line."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _listed(root: Path) -> list[str]:
    """The project's files under ``root``: in a git checkout, the files git tracks and
    GENERATED; in an unpacked zip, those its MANIFEST lists."""
    if (root / ".git").exists():
        try:
            found = subprocess.run(
                ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60
            ).stdout.decode("utf-8", errors="surrogateescape")
        except (OSError, subprocess.SubprocessError) as err:
            raise ArchiveError(f"cannot list the files git tracks in {root}: {err}") from None
        names = [name for name in found.split("\0") if name]
        return names + [name for name in GENERATED if name not in names]
    manifest = root / MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        return [n for n in manifest.read_text(encoding="utf-8").splitlines() if n and n != MANIFEST]
    raise ArchiveError(
        f"{root} is neither a git checkout nor an unpacked {NAME} (no {MANIFEST}), so nothing "
        "says which files are the project's: build the zip in a clone"
    )


def members(root: Path = ROOT, log: Callable[[str], object] = _stderr) -> list[str]:
    """The archive's files, relative to ``root`` (POSIX paths, sorted); one line to ``log``
    for each project file left out (an outside link, a name that unpacks elsewhere)."""
    names = _listed(root)
    listed, kept = set(names), []
    for name in names:
        parts = PurePosixPath(name).parts
        if set(parts) & SKIP_PARTS or name.endswith(tuple(SKIP_SUFFIXES)):
            continue
        if parts[-1].startswith(".") and parts[-1] not in HIDDEN_KEPT:  # .env and the like
            continue
        if "\\" in name or ".." in parts or name.startswith("/"):
            log(f"{NAME}: left out {name!r}: that name would unpack outside its place")
            continue
        path = root / name
        if path.is_symlink():  # its content is shipped only if it is one of the listed files
            target = path.resolve()
            inside = target.is_relative_to(root.resolve())
            if not (inside and target.relative_to(root.resolve()).as_posix() in listed):
                log(f"{NAME}: left out {name}: a link to {os.readlink(path)}, not a project file")
                continue
        if path.is_file():
            kept.append(name)
        elif name not in GENERATED:
            log(f"{NAME}: left out {name}: listed as the project's, but not a file here")
    return sorted(kept)


def write_archive(target: Path, root: Path = ROOT) -> int:
    """Write the zip to ``target`` (atomically); its size in bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        names = members(root)  # before the zip exists: a refusal leaves nothing behind
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            for name in names:
                archive.write(root / name, f"{FOLDER}/{name}")
            archive.writestr(f"{FOLDER}/{MANIFEST}", "".join(f"{n}\n" for n in names))
    except BaseException:
        partial.unlink(missing_ok=True)  # half a zip is of no use
        raise
    partial.replace(target)
    return target.stat().st_size


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.publishing.archive OUT.zip", file=sys.stderr)
        return 2
    try:
        size = write_archive(Path(args[0]))
    except OSError as exc:  # a file gone while it was read, an output folder that is a file
        print(f"error: cannot write {args[0]}: {exc}", file=sys.stderr)
        return 2
    except ArchiveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args[0]}: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
