"""``make clean`` and ``make clean-runs``: remove what this project's tools wrote, and only that.

``make clean`` removes the site's files that tools/publishing/build_site.py recorded in its manifest
(unchanged since), the screenshots and executed copies the tests and ``make test-gpu`` write
under ``build/``, the tools' caches, and ``.venv`` when ``make`` installed it (its stamp).
Anything else (a file of yours in ``build/site``, a site file you edited, the notebooks'
runs and checkpoints) stays, named in one line. ``make clean-runs`` removes the runs and
checkpoints that the notebooks write, and says how many files went.

Standard library only: it runs with the system's Python, while it removes ``.venv``.

    python3 tools/clean.py          # make clean
    python3 tools/clean.py --runs   # make clean-runs
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# tools/publishing/build_site.py's record of the site it wrote: "<sha256>  <path in the site>"
# lines.
SITE = "build/site"
SITE_MANIFEST = "_static/built-files.sha256"
# What the tests (screenshots) and `make test-gpu` (executed copies) write, by name.
OWNED = {
    "build/screenshots": ("deck-*.png", "lab-slideshow.png"),
    "build/gpu-run": ("[0-9][0-9]_*.ipynb",),
}
# Written only by tools (pytest, ruff, setuptools): nothing of a user's is ever in them.
CACHES = (".pytest_cache", ".ruff_cache")
VENV, STAMP = ".venv", ".venv/.installed"  # STAMP: `make venv` installed this environment
# What the notebooks write when they run: a learner's checkpoints, gone only on request.
RUNS = ("notebooks/.runs", "notebooks/*/.runs", "notebooks/checkpoints", "notebooks/runs")
SHOWN = 6  # paths named in the "kept" line before "and N more"


def _files(count: int) -> str:
    return f"{count} file{'' if count == 1 else 's'}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _remove(path: Path) -> int:
    """Remove a file, a link (never what it points to) or a folder; files removed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return 1
    if path.is_dir():
        count = sum(1 for p in path.rglob("*") if not p.is_dir() or p.is_symlink())
        shutil.rmtree(path)
        return count
    return 0


def _prune(folder: Path, stop: Path) -> None:
    """Remove the empty folders from ``folder`` up to ``stop`` (included), never a full one."""
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
        if not sub.is_symlink() and not any(sub.iterdir()):
            sub.rmdir()
    while folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()
        if folder == stop:
            break
        folder = folder.parent


def _site(root: Path) -> tuple[int, list[str]]:
    """(files removed, paths kept) in the site: only what its manifest lists, unchanged."""
    site = root / SITE
    manifest = site / SITE_MANIFEST
    if not site.is_dir() or site.is_symlink():
        return 0, [SITE] if site.is_symlink() else []
    removed = 0
    if manifest.is_file() and not manifest.is_symlink():
        for line in manifest.read_text(encoding="utf-8", errors="replace").splitlines():
            digest, _, name = line.partition("  ")
            path = site / name
            if ".." in Path(name).parts or not path.is_file() or path.is_symlink():
                continue  # a damaged record names nothing outside the site
            if _sha256(path) == digest:
                path.unlink()
                removed += 1
        manifest.unlink()
        removed += 1
    _prune(site, root / "build")
    kept = sorted(p.relative_to(root).as_posix() for p in site.rglob("*") if not p.is_dir())
    return removed, kept


def clean(root: Path = ROOT) -> tuple[int, list[str]]:
    """Remove what the tools wrote under ``root``; (files removed, paths kept, for the line)."""
    removed, kept = _site(root)
    for folder, patterns in OWNED.items():
        for pattern in patterns:
            for path in (root / folder).glob(pattern):
                removed += _remove(path) if path.is_file() and not path.is_symlink() else 0
        if (root / folder).is_dir():
            _prune(root / folder, root / "build")
    build = root / "build"
    if build.is_dir() and not build.is_symlink():
        kept += sorted(
            p.relative_to(root).as_posix()
            for p in build.rglob("*")
            if not p.is_dir() and not p.is_relative_to(root / SITE)
        )
    for name in CACHES:
        removed += _remove(root / name)
    removed += sum(_remove(p) for p in root.glob("*.egg-info") if p.is_dir())
    for folder, dirs, _ in os.walk(root):  # os.walk enters no linked folder
        if Path(folder) == root:
            dirs[:] = [d for d in dirs if d not in (".git", VENV)]
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            removed += _remove(Path(folder) / "__pycache__")
    first = []  # said before the build's files: what a user most likely wants back
    for path in [p for pattern in RUNS for p in sorted(root.glob(pattern))]:
        files = sum(1 for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else 1
        rel = path.relative_to(root).as_posix()
        first.append(f"{rel} ({_files(files)} of your runs: `make clean-runs` removes them)")
    if (root / STAMP).is_file():
        removed += _remove(root / VENV)
    elif (root / VENV).exists():
        first.append(f"{VENV} (not installed by make)")
    return removed, first + kept


def clean_runs(root: Path = ROOT) -> list[str]:
    """Remove the notebooks' runs and checkpoints; one "path (N files)" per folder removed."""
    done = []
    for pattern in RUNS:
        for path in sorted(root.glob(pattern)):
            done.append(f"{path.relative_to(root).as_posix()} ({_files(_remove(path))})")
    return done


def main(argv: list[str]) -> int:
    if argv == ["--runs"]:
        done = clean_runs()
        print(f"make clean-runs: removed {', '.join(done)}" if done else "make clean-runs: no runs")
        return 0
    if argv:
        print("usage: python3 tools/clean.py [--runs]", file=sys.stderr)
        return 2
    removed, kept = clean()
    print(f"make clean: removed {_files(removed)} that the build and the tools wrote")
    if kept:
        more = f" and {len(kept) - SHOWN} more" if len(kept) > SHOWN else ""
        print(f"make clean: kept {', '.join(kept[:SHOWN])}{more}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
