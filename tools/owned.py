"""Where a tool may write, replace or delete: inside its own folder, never through a link.

Every tool that removes or rewrites files it made (tools/clean.py, the site build, the
translations, the homework courses) finds its paths with :func:`within` and removes with
:func:`remove`: a name it read from a record or a pattern is refused when it is absolute, has
a ``..``, or reaches its place through a link (a linked folder leads outside the project, and
a linked file is someone else's). Walks never enter a linked folder (:func:`entries`). Before
writing, a tool asks :func:`write_refusal` about every path it (or a program it runs) will
create or replace, and stops with its one line before writing anything.

Standard library only: tools/clean.py runs it with the system's Python, while it removes .venv.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePath, PurePosixPath


def within(folder: Path, name: str | PurePath) -> Path | None:
    """``folder / name`` when ``name`` is a relative path without ``..`` and nothing from
    ``folder`` down to it (itself included) is a link; None otherwise. It need not exist."""
    text = name.as_posix() if isinstance(name, PurePath) else str(name)
    rel = PurePosixPath(text)
    if not rel.parts or rel.is_absolute() or ".." in rel.parts or "\\" in text or "\0" in text:
        return None
    path = folder
    for part in rel.parts:
        path = path / part
        if path.is_symlink():
            return None
    return path


def write_refusal(folder: Path, names: Iterable[str | PurePath]) -> str | None:
    """None when a tool may create or replace every one of ``names`` in ``folder`` (the rule of
    :func:`within`); else one line naming the first that it may not, and the link on its way."""
    for name in names:
        if within(folder, name) is None:
            link = linked_on_the_way(folder, folder / name)
            if link == folder / name:
                return f"{link} is a link: nothing is written through it"
            if link is not None:
                return f"{folder / name} is reached through the link {link}: nothing written"
            return f"{name!s} is not a path inside {folder}: nothing written"
    return None


def private_folder(path: Path) -> str | None:
    """Make ``path`` (and its missing parents) a folder only its owner reads, writes and enters
    (0700): a teacher's course, gradebook and grades, in a checkout every student of a hub may
    read. The caller has checked ``path`` is no link. A line when an existing folder's mode was
    narrowed (None otherwise)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.lstat().st_mode)
    os.chmod(path, 0o700)  # mkdir's mode passes through the umask, and an old folder kept its own
    if mode & 0o077:
        return f"{path} was open to others ({oct(mode)}): now its owner's alone (0700)"
    return None


def linked_on_the_way(root: Path, path: Path) -> Path | None:
    """The first of ``path`` and its folders below ``root`` that is a link (``build`` or
    ``build/site`` alike), or None; None too when ``path`` is not under ``root``. Neither is
    resolved: a link is what is looked for."""
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    step = root
    for part in rel.parts:
        step = step / part
        if step.is_symlink():
            return step
    return None


def is_regular(path: Path) -> bool:
    """A plain file, not a link, folder, FIFO or device (reading one of those can block)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def entries(folder: Path) -> Iterator[Path]:
    """Everything under ``folder`` that is not a folder (files, links, a link to a folder
    included), without entering a linked folder."""
    for top, dirs, files in os.walk(folder, followlinks=False):
        links = sorted(d for d in dirs if os.path.islink(os.path.join(top, d)))
        dirs[:] = sorted(d for d in dirs if d not in links)
        for name in sorted(files + links):
            yield Path(top, name)


def remove(path: Path | None) -> int:
    """Remove ``path`` (from :func:`within`): a file, or a folder with all it holds (links in
    it removed, never followed); how many files went. A link or None: nothing, 0."""
    if path is None or path.is_symlink():
        return 0
    if path.is_dir():
        count = sum(1 for _ in entries(path))
        shutil.rmtree(path)  # removes the links it meets, never what they point to
        return count
    if path.exists():
        path.unlink()
        return 1
    return 0


def prune(folder: Path, stop: Path) -> None:
    """Remove the empty folders in ``folder`` and then ``folder`` and its parents up to
    ``stop`` (included) while empty; never a linked one, never a full one."""
    if folder.is_symlink() or not folder.is_dir():
        return
    for top, dirs, _ in os.walk(folder, topdown=False, followlinks=False):
        for name in dirs:
            sub = Path(top, name)
            if not sub.is_symlink() and not any(sub.iterdir()):
                sub.rmdir()
    while folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()
        if folder == stop:
            break
        folder = folder.parent


def replace_file(path: Path, text: str, mode: int = 0o644) -> None:
    """``text`` (UTF-8) as the file ``path`` with ``mode``, replaced whole: written beside it
    and renamed over it, so a link at ``path`` is replaced, never written through."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)  # os.open's mode passes through the umask
    os.replace(tmp, path)


def root_folder(path: Path, mode: int, make: bool = True) -> str | None:
    """Make ``path`` a folder of root's with ``mode`` (unless ``make`` is False), or, when it is
    there, accept it only if it already is one (never re-own or re-mode a folder: someone else's
    files would change hands, and one a user made first is theirs). None, or the line saying
    why not."""
    if not path.exists() and not path.is_symlink():
        if not make:
            return f"{path} is missing"
        path.mkdir(mode=mode)
        os.chmod(path, mode)  # mkdir's mode passes through the umask
        return None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or stat.S_IMODE(st.st_mode) != mode:
        return f"{path} is not a root-owned folder with mode {mode:o}"
    return None
