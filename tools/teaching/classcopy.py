"""The class copy: what the hub's link hands out for a graded course (``HUB_COURSE=graded``).

A self-learner's clone keeps every lesson's solutions (folded, at the end); a class that is
graded must not hold them. ``make hub`` and ``make hub-lessons`` therefore make, from the
teacher's committed branch (``HUB_LESSONS``, ``HUB_BRANCH``), a git repository of the hub's
own (``HUB_SRV/class/<name>``) that holds:

- what a learner opens or runs (:data:`KEEP`): the lessons, their code (``utils``,
  ``scripts``), the READMEs, the table of contents; never the tests (right answers) or the
  translations' catalogs (the solutions, translated);
- every notebook without its cells tagged ``solution``, and without the sentences of the
  exercises' prose that point to them.

Each run adds a commit on top of the last (nbgitpuller merges it into each student's copy,
their edits kept). Then the teacher's own copies are closed to students
(:func:`close_course`): in the checkout, every entry but what the students' servers and
kernels run (:data:`STUDENTS_RUN`), and the lessons' clone when it is another folder.

Not covered (TEACHING.md): ``utils/exercises`` holds the checks the learner runs, and what
they compare an answer with; students' kernels import it, so they can read it.
"""

from __future__ import annotations

import io
import os
import posixpath
import stat
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

import nbformat

from tools import owned
from tools.teaching.assignments import _without_solution_sentences

# What the class copy holds: the first part of each path (anything else is left out).
KEEP = ("notebooks", "utils", "scripts", "README.md", "DATA.md", "DATA.zh.md", "LICENSE",
        "_toc.yml")  # fmt: skip
# In the teacher's checkout, what students' servers and kernels run: the venv, the code their
# kernels import (utils, scripts) and Lab's settings (tools/publishing/lab_settings).
STUDENTS_RUN = (".venv", "utils", "scripts", "tools")
MAX_ARCHIVE = 512 * 2**20  # bytes of the branch's files: a lessons' clone is a few MB


class CopyError(RuntimeError):
    """The class copy cannot be made; the message is the one line to print."""


def _git(*args: str, cwd: Path, data: bool = False) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=300)
    if done.returncode:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise CopyError(f"git {args[0]} in {cwd}: {why[-1] if why else 'failed'}")
    return done


def strip(nb: nbformat.NotebookNode, lang: str) -> tuple[nbformat.NotebookNode, int]:
    """``nb`` without its cells tagged ``solution``, and the exercises' prose without the
    sentences that name the solutions; how many cells went."""
    kept, gone = [], 0
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if "solution" in tags:
            gone += 1
            continue
        if cell.cell_type == "markdown" and "exercise" in tags:
            cell.source = _without_solution_sentences(cell.source, lang)
        kept.append(cell)
    nb.cells = kept
    return nb, gone


def _extract(lessons: Path, branch: str, into: Path) -> str:
    """The branch's files of :data:`KEEP` into ``into``; the commit's short id."""
    commit = _git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                  cwd=lessons).stdout.decode().strip()  # fmt: skip
    raw = _git("archive", "--format=tar", commit, cwd=lessons).stdout
    if len(raw) > MAX_ARCHIVE:
        raise CopyError(f"{lessons} {branch}: over {MAX_ARCHIVE >> 20} MiB of files")
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        for member in tar.getmembers():
            name = PurePosixPath(member.name)
            if not name.parts or name.parts[0] not in KEEP or member.isdir():
                continue  # folders are made for what they hold
            path = owned.within(into, name)
            if path is None or not (member.isfile() or member.issym()):
                raise CopyError(f"{lessons} {branch}: not a file of the lessons: {member.name}")
            path.parent.mkdir(parents=True, exist_ok=True)
            if member.issym():  # a link to a file of the copy (zh/rise.css -> ../rise.css)
                target = posixpath.normpath(posixpath.join(name.parent.as_posix(), member.linkname))
                if member.linkname.startswith("/") or target.split("/")[0] not in KEEP:
                    raise CopyError(f"{lessons} {branch}: {member.name} links outside the copy")
                path.symlink_to(member.linkname)
                continue
            with tar.extractfile(member) as src, open(path, "xb") as dst:
                dst.write(src.read())
            path.chmod(0o755 if member.mode & stat.S_IXUSR else 0o644)
    return commit[:12]


def _strip_all(tree: Path) -> int:
    """Every notebook under ``tree`` stripped (:func:`strip`); how many solution cells went."""
    gone = 0
    for path in sorted(tree.rglob("*.ipynb")):
        if path.is_symlink():
            continue  # its target is a file of the copy, stripped itself
        nb = nbformat.read(path, as_version=4)
        lang = "zh" if "zh" in path.relative_to(tree).parts else "en"
        nb, n = strip(nb, lang)
        nbformat.write(nb, path)
        gone += n
    for path in tree.rglob("*.ipynb"):  # the rule, checked on what is written (links too)
        nb = nbformat.read(path, as_version=4)
        if any("solution" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
            raise CopyError(f"{path.relative_to(tree)} still holds a solution cell")
    return gone


def _open_to_all(tree: Path) -> None:
    """Folders 0755 and files 0644 (0755 if executable): students read and pull them."""
    for top, _dirs, files in os.walk(tree):
        os.chmod(top, 0o755)
        for name in files:
            path = Path(top, name)
            if not path.is_symlink():
                path.chmod(0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644)


def build(lessons: Path, branch: str, class_dir: Path) -> list[str]:
    """Make or update the class copy ``class_dir/<lessons' name>`` from ``branch`` of
    ``lessons``: a commit on top of the last one when something changed. ``class_dir`` is a
    folder of the hub's (the caller made it); lines saying what was done."""
    dest = class_dir / lessons.name
    new = owned.within(class_dir, f".{lessons.name}.new")
    if new is None or owned.within(class_dir, lessons.name) is None:
        raise CopyError(f"{class_dir}: the class copy's folder is reached through a link")
    owned.remove(new)  # a run stopped half-way left it
    new.mkdir(mode=0o700)
    try:
        source = _extract(lessons, branch, new)
        gone = _strip_all(new)
        if not dest.exists():
            dest.mkdir(mode=0o755)
            _git("init", "--quiet", f"--initial-branch={branch}", ".", cwd=dest)
        elif not (dest / ".git").is_dir() or (dest / ".git").is_symlink():
            raise CopyError(f"{dest} is not the class copy's repository (no .git)")
        for entry in list(dest.iterdir()):  # the tree is replaced whole; history stays
            if entry.is_symlink():
                entry.unlink()  # the link itself, never what it points to
            elif entry.name != ".git":
                owned.remove(entry)
        for entry in list(new.iterdir()):
            entry.rename(dest / entry.name)
        _open_to_all(dest)
        _git("add", "--all", ".", cwd=dest)
        if not _git("status", "--porcelain", cwd=dest).stdout.strip():
            return [f"the class copy {dest} is up to date with {branch} ({source})"]
        who = ["-c", "user.name=make hub", "-c", "user.email=make-hub@localhost"]
        message = f"The lessons of {branch} ({source}) without their solutions"
        _git(*who, "commit", "--quiet", "--no-verify", "-m", message, cwd=dest)
        _open_to_all(dest)
    finally:
        owned.remove(new)
    return [
        f"the class copy {dest}: {branch} ({source}) without its {gone} solution cells; the "
        "link hands it out"
    ]


def close_course(checkout: Path, lessons: Path) -> list[str]:
    """Close the teacher's copies to other users (group and others lose every right): in
    ``checkout`` each entry but :data:`STUDENTS_RUN`, and ``lessons`` when it is another folder.
    A link is never followed (left as it is, named). Lines saying what changed."""
    closed, links = [], []
    targets = [e for e in sorted(checkout.iterdir()) if e.name not in STUDENTS_RUN]
    if lessons.resolve() != checkout.resolve() and not lessons.resolve().is_relative_to(
        checkout.resolve()
    ):
        targets.append(lessons)
    for path in targets:
        if path.is_symlink():
            links.append(path.name)
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            os.chmod(path, mode & 0o700)
            closed.append(str(path.relative_to(checkout)) if path.parent == checkout else str(path))
    lines = []
    if closed:
        lines.append(f"closed to students (now their owner's alone): {', '.join(closed)}")
    if links:
        lines.append(f"left as they are in {checkout} (links, not followed): {', '.join(links)}")
    return lines
