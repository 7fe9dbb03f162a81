"""Which notebooks are lessons, and how the tools read a notebook.

The lessons are the notebooks the table of contents ``_toc.yml`` lists, in its order
(Jupyter Book's format, beside ``notebooks/``), not whatever matches a file-name pattern: a
learner's copy (JupyterLab's Duplicate names it ``01_tensors-Copy1.ipynb``) or Lab's
``Untitled.ipynb`` is no lesson, and every tool (save_cells, slides, lesson_size, i18n, the
site, its decks and zip, nbval under ``make test``, the Makefile) leaves it alone, named in one
line. A table of contents the tools cannot use, or a notebook that is not valid JSON, is a
:class:`LessonError` in one line.

    python -m tools.lessons    # the lessons' paths, one a line
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TOC = "_toc.yml"  # beside the notebooks' folder
# A lesson's name: its number, then what `import utils.<name>` can import (save_cells.py).
NAME = re.compile(r"\d\d_[a-z][a-z0-9_]*")
# git's conflict markers at the start of a line (`git merge` of a notebook both sides changed)
_CONFLICT = re.compile(r"^(<{7}|={7}|>{7})( |$)", re.M)
IGNORED = "ignored "  # how a tool's line about a notebook that is no lesson begins
_FIX = "fix it, or restore it with git"
_reported: set[Path] = set()  # a tool lists the lessons several times: say it once
# A table of contents is a few hundred bytes, two levels deep. Bounds read before any YAML is
# built: a 418-byte "billion laughs" (aliases of aliases) took gigabytes, brackets nested
# 1,000 deep overflowed the recursion, a FIFO blocked every tool.
TOC_MAX_BYTES = 64 * 1024
TOC_MAX_DEPTH = 8


class LessonError(ValueError):
    """A table of contents or a notebook the tools cannot use; the message is one line."""


def _stderr(message: str) -> None:
    # stderr: stdout may be a tool's data (`i18n.py todo --json > t.json`)
    print(message, file=sys.stderr)


def shown(path: Path) -> str:
    """``path`` as a user would type it here: relative to the working folder when inside it."""
    try:  # without resolving: a link is named as itself
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _yaml_error(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return where + (getattr(err, "problem", None) or str(err).splitlines()[0])


def _load_toc(toc: Path, where: str) -> object:
    """The YAML in ``toc``, read only from a regular file (not a link, FIFO or device), at
    most TOC_MAX_BYTES, without anchors or aliases and at most TOC_MAX_DEPTH deep; a
    :class:`LessonError` otherwise. The events are checked before anything is built."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(toc, flags)
    except OSError as err:
        if toc.is_symlink():
            raise LessonError(f"{where}: is a link; make it a plain file") from None
        raise err
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise LessonError(f"{where}: not a regular file; make it a plain file")
        raw = f.read(TOC_MAX_BYTES + 1)
    if len(raw) > TOC_MAX_BYTES:
        raise LessonError(
            f"{where}: larger than {TOC_MAX_BYTES:,} bytes; a table of contents lists a few lessons"
        )
    text = raw.decode("utf-8")
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1
            raise LessonError(
                f"{where}: line {line}: YAML anchors and aliases (& and *) are "
                "not allowed; write each entry out"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > TOC_MAX_DEPTH:
                line = event.start_mark.line + 1
                raise LessonError(
                    f"{where}: line {line}: nested more than {TOC_MAX_DEPTH} "
                    "deep; a table of contents is a list of `- file:` entries"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return yaml.safe_load(text)


def listed(notebooks: Path = NOTEBOOKS) -> list[Path]:
    """The lessons ``notebooks``' table of contents (``notebooks/../_toc.yml``) lists, in its
    order; a :class:`LessonError` naming the file and what is wrong when it cannot be used."""
    toc = notebooks.parent / TOC
    where, folder = shown(toc), notebooks.name
    usage = f"format: jb-book, root: README, chapters: a list of `- file: {folder}/NN_name`"
    try:
        data = _load_toc(toc, where)
    except FileNotFoundError:
        raise LessonError(f"{where}: missing; it lists the lessons ({usage})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise LessonError(f"{where}: cannot be read ({err})") from None
    except yaml.YAMLError as err:
        raise LessonError(f"{where}: not valid YAML ({_yaml_error(err)})") from None
    book = isinstance(data, dict) and data.get("format") == "jb-book"
    if not book or not isinstance(data.get("root"), str):
        raise LessonError(f"{where}: not a Jupyter Book table of contents ({usage})")
    chapters = data.get("chapters")
    if not isinstance(chapters, list) or not chapters:
        raise LessonError(f"{where}: chapters is not a list of lessons ({usage})")
    paths: list[Path] = []
    for entry in chapters:
        file = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(file, str) or set(entry) - {"file", "title"}:
            raise LessonError(f"{where}: {str(entry)[:80]!r} is not `- file: {folder}/NN_name`")
        parent, _, stem = file.removesuffix(".ipynb").rpartition("/")
        path = notebooks / f"{stem}.ipynb"
        if parent != folder or not NAME.fullmatch(stem):
            raise LessonError(
                f"{where}: {file!r} is not a lesson in {folder}/ (a lesson is {folder}/NN_name: "
                "two digits, _, then lower-case letters, digits and _)"
            )
        if path in paths:
            raise LessonError(f"{where}: {file!r} is listed twice")
        if any(p.name[:2] == stem[:2] for p in paths):
            raise LessonError(f"{where}: two lessons are numbered {stem[:2]}: renumber one")
        if path.is_symlink() or not path.is_file():
            what = "a link" if path.is_symlink() else "not a file" if path.exists() else "missing"
            raise LessonError(f"{where}: {file!r} lists {shown(path)}, which is {what}")
        paths.append(path)
    return paths


def lesson_notebooks(
    folder: Path = NOTEBOOKS, log: Callable[[str], object] = _stderr
) -> list[Path]:
    """The lessons in ``folder`` as its table of contents lists them; one line to ``log`` for
    each other ``.ipynb`` there (ignored)."""
    lessons = listed(folder)
    for other in sorted(set(folder.glob("*.ipynb")) - set(lessons)):
        if other.resolve() not in _reported:
            _reported.add(other.resolve())
            log(f"{IGNORED}{shown(other)}: not a lesson (not listed in {TOC})")
    return lessons


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook (nbformat 4), or a :class:`LessonError` in one line that names the
    file and where its JSON breaks (and the merge conflict that usually broke it)."""
    where = shown(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LessonError(f"{where}: cannot be read as a notebook ({err}); {_FIX}") from None
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        conflict = _CONFLICT.search(text)
        hint = (
            f"; merge conflict markers at line {text.count(chr(10), 0, conflict.start()) + 1}: "
            "resolve the conflict, or take one side with `git checkout --ours/--theirs`"
            if conflict
            else f"; {_FIX}"
        )
        why = f"line {err.lineno}: {err.msg}"
        raise LessonError(f"{where}: not valid notebook JSON ({why}){hint}") from None
    try:
        return nbformat.reads(text, as_version=4)
    except Exception as err:  # valid JSON but no notebook: nbformat raises many kinds
        first = (str(err).splitlines() or [type(err).__name__])[0][:160]
        raise LessonError(f"{where}: not a notebook ({first}); {_FIX}") from None


def main() -> int:
    try:
        print("\n".join(shown(p) for p in lesson_notebooks()))
    except LessonError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
