"""The whole collection as one zip (``make html`` puts it on the site): a notebook does not
run without ``utils``, and 05 launches ``scripts/``. It holds the files git tracks, as they are
in the working tree, plus GENERATED: a complete project with the clone's commands. No data,
no build output, nothing git does not track (``.env``), no notebook that ``_toc.yml`` does not
list as a lesson (in either language), no link out of the project, nothing in a linked folder
(tools/owned.py: a folder linked from elsewhere is not the project's), no name that would
unpack elsewhere; each file left out is named in one line. MANIFEST lists the
files, so an unpacked copy (no git) makes the same zip again.

    python -m tools.publishing.archive build/site/pytorch-blitz.zip
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

from tools import lessons
from tools.owned import within

ROOT = Path(__file__).resolve().parents[2]
FOLDER = "pytorch-blitz"  # what the zip unpacks into
NAME = f"{FOLDER}.zip"
# Never shipped, whether tracked or not: git's own folder, environments, data and outputs.
SKIP_PARTS = {".git", ".venv", "build", "data", "checkpoints", "__pycache__"}
SKIP_SUFFIXES = {".npz", ".pt", ".pyc", ".tar.gz", ".zip"}
HIDDEN_KEPT = {".gitignore"}  # the one hidden file shipped (.env and the like are not)
# Written by the tools (run_notebooks.py --record-times): shipped before a commit.
GENERATED = ("notebooks/run_times.json",)
# In the zip: the list of its files, one a line (what an unpacked copy ships again).
MANIFEST = ".archive-files"


class ArchiveError(RuntimeError):
    """Nothing says which files here are the project's; the message says why, in one line."""


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


def members(root: Path = ROOT) -> list[str]:
    """The archive's files, relative to ``root`` (POSIX paths, sorted); a line on stderr for
    each project file left out (an outside link, a name that unpacks elsewhere)."""

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    names = _listed(root)
    notebooks = [n for n in names if n.startswith("notebooks/") and n.endswith(".ipynb")]
    try:  # which of them are lessons: the table of contents says (none to ask without one)
        lesson_names = {p.name for p in lessons.listed(root / "notebooks")} if notebooks else set()
    except lessons.LessonError as err:
        raise ArchiveError(str(err)) from None
    listed, kept = set(names), []
    for name in names:
        parts = PurePosixPath(name).parts
        if set(parts) & SKIP_PARTS or name.endswith(tuple(SKIP_SUFFIXES)):
            continue
        if parts[-1].startswith(".") and parts[-1] not in HIDDEN_KEPT:  # .env and the like
            continue
        if parts[0] == "notebooks" and name.endswith(".ipynb") and parts[-1] not in lesson_names:
            log(f"{NAME}: left out {name}: not a lesson (not listed in {lessons.TOC})")
            continue
        if "\\" in name or ".." in parts or name.startswith("/"):
            log(f"{NAME}: left out {name!r}: that name would unpack outside its place")
            continue
        parent = within(root, PurePosixPath(name).parent.as_posix()) if len(parts) > 1 else root
        if parent is None:  # a linked folder: what it holds is not the project's
            log(f"{NAME}: left out {name}: it is reached through a link to a folder")
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
    except (OSError, ArchiveError) as exc:  # OSError: a file gone, an output folder a file
        why = f"cannot write {args[0]}: {exc}" if isinstance(exc, OSError) else exc
        print(f"error: {why}", file=sys.stderr)
        return 2
    print(f"{args[0]}: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
