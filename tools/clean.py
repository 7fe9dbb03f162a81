"""``make clean`` and ``make clean-runs``: remove what this project's tools wrote, and only that.

``make clean`` removes the site's files that tools/publishing/build_site.py recorded in its manifest
(unchanged since), the screenshots and executed copies the tests and ``make test-gpu`` write
under ``build/``, the tools' caches, ``make hub``'s proxy (``npm ci``'s node_modules), and
``.venv`` when ``make`` installed it (its stamp).
Anything else (a file of yours in ``build/site``, a site file you edited, the notebooks'
runs and checkpoints) stays, named in one line. ``make clean-runs`` removes the runs and
checkpoints that the notebooks write, and says how many files went.

Standard library only: it runs with the system's Python, while it removes ``.venv``. Every
path goes through tools/owned.py: nothing outside the project, nothing through a link.

    python3 -m tools.clean          # make clean
    python3 -m tools.clean --runs   # make clean-runs
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from tools.owned import entries, is_regular, prune, remove, within

ROOT = Path(__file__).resolve().parents[1]
# tools/publishing/build_site.py's record of the site it wrote: "<sha256>  <path in the site>"
# lines.
SITE = "build/site"
SITE_MANIFEST = "_static/built-files.sha256"
# What the tests (screenshots), `make test-gpu` (executed copies) and `make html` (its lock,
# beside the site) write, by name.
OWNED = {
    "build": (".site.lock",),
    "build/screenshots": ("deck-*.png", "lab-slideshow.png"),
    "build/gpu-run": ("[0-9][0-9]_*.ipynb",),
}
# Written only by tools (pytest, ruff, setuptools): nothing of a user's is ever in them.
CACHES = (".pytest_cache", ".ruff_cache")
VENV, STAMP = ".venv", ".venv/.installed"  # STAMP: `make venv` installed this environment
# `make hub`'s proxy, which `npm ci` installed (it writes NPM_STAMP into the folder)
NPM_MODULES, NPM_STAMP = "tools/teaching/proxy/node_modules", ".package-lock.json"
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


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _site(root: Path) -> tuple[int, list[str]]:
    """(files removed, paths kept) in the site: only what its manifest lists, unchanged, in
    the site itself (a recorded name that is absolute, climbs out or crosses a link: kept)."""
    site = within(root, SITE)
    if site is None:
        return 0, [f"{SITE} (a link)"]
    if not site.is_dir():
        return 0, []
    removed, manifest = 0, within(site, SITE_MANIFEST)
    if manifest is not None and is_regular(manifest):
        for line in manifest.read_text(encoding="utf-8", errors="replace").splitlines():
            digest, _, name = line.partition("  ")
            path = within(site, name)
            if path is not None and is_regular(path) and _sha256(path) == digest:
                removed += remove(path)
        removed += remove(manifest)
    prune(site, root / "build")
    return removed, [_rel(p, root) for p in entries(site)] if site.is_dir() else []


def clean(root: Path = ROOT) -> tuple[int, list[str]]:
    """Remove what the tools wrote under ``root``; (files removed, paths kept, for the line)."""
    removed, kept = _site(root)
    for name, patterns in OWNED.items():
        folder = within(root, name)
        if folder is None or not folder.is_dir():
            continue  # a linked folder is listed with build's files below
        for path in sorted(p for pattern in patterns for p in folder.glob(pattern)):
            own = within(folder, path.name)
            removed += remove(own) if own is not None and is_regular(own) else 0
        prune(folder, root / "build")
    build = within(root, "build")
    if build is None:
        kept.append("build (a link)")
    elif build.is_dir():
        kept += [_rel(p, root) for p in entries(build) if not p.is_relative_to(root / SITE)]
    for name in (*CACHES, *(p.name for p in root.glob("*.egg-info") if p.is_dir())):
        removed += remove(within(root, name))
    modules = within(root, NPM_MODULES)
    if modules is not None and (stamp := within(modules, NPM_STAMP)) and is_regular(stamp):
        removed += remove(modules)
    for folder, dirs, _ in os.walk(root):  # os.walk enters no linked folder
        if Path(folder) == root:
            dirs[:] = [d for d in dirs if d not in (".git", VENV)]
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            removed += remove(within(root, _rel(Path(folder, "__pycache__"), root)))
    first = []  # said before the build's files: what a user most likely wants back
    for rel, path in _runs(root):
        if path is None:
            first.append(f"{rel} (a link or reached through one: not this project's)")
            continue
        files = sum(1 for _ in entries(path)) if path.is_dir() else 1
        first.append(f"{rel} ({_files(files)} of your runs: `make clean-runs` removes them)")
    stamp = within(root, STAMP)
    if stamp is not None and is_regular(stamp):
        removed += remove(within(root, VENV))
    elif (root / VENV).exists() or (root / VENV).is_symlink():
        first.append(f"{VENV} (not installed by make)")
    return removed, first + kept


def _runs(root: Path) -> list[tuple[str, Path | None]]:
    """The notebooks' runs: (path, the path or None when it is reached through a link)."""
    found = [p for pattern in RUNS for p in sorted(root.glob(pattern))]
    return [(_rel(p, root), within(root, _rel(p, root))) for p in found]


def clean_runs(root: Path = ROOT) -> tuple[list[str], list[str]]:
    """Remove the notebooks' runs and checkpoints: ("path (N files)" per folder removed,
    the paths kept because they are reached through a link)."""
    done, kept = [], []
    for rel, path in _runs(root):
        if path is None:
            kept.append(rel)
        else:
            done.append(f"{rel} ({_files(remove(path))})")
    return done, kept


def main(argv: list[str]) -> int:
    if argv == ["--runs"]:
        done, kept = clean_runs()
        print(f"make clean-runs: removed {', '.join(done)}" if done else "make clean-runs: no runs")
        if kept:
            why = "a link or reached through one (not this project's)"
            print(f"make clean-runs: kept {', '.join(kept)}: {why}")
        return 0
    if argv:
        print("usage: python3 -m tools.clean [--runs]", file=sys.stderr)
        return 2
    removed, kept = clean()
    print(f"make clean: removed {_files(removed)} that the build and the tools wrote")
    if kept:
        more = f" and {len(kept) - SHOWN} more" if len(kept) > SHOWN else ""
        print(f"make clean: kept {', '.join(kept[:SHOWN])}{more}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
