"""Build the offline teaching site from ``notebooks/`` into ``build/site`` (``make html``).

    python -m tools.publishing.build_site [--execute] [--notebooks DIR] [--out DIR]

Each lesson gets a page, a deck and its notebook (tools/publishing/pages.py), the site a
search (search.py), the teacher's guide (guides.py), the zip (archive.py) and MathJax from
the jupyter-server-mathjax wheel: nothing is loaded from another host. Every other language
with a strings file gets the same under ``<out>/<code>``, from ``translations/<code>``
(tools/authoring/i18n.py).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; two builds at once there are the user's to avoid
    fcntl = None

import nbformat

from tools import conventions
from tools.authoring import i18n, lesson_size
from tools.lessons import LessonError, lesson_notebooks
from tools.owned import entries, is_regular, linked_on_the_way
from tools.publishing import archive, guides, pages
from tools.publishing.decks import REVEAL, TEMPLATES
from tools.publishing.pages import STATIC, Lesson, SiteError, parse_header

ROOT = Path(__file__).resolve().parents[2]
# Every file a build wrote, with its sha256 (sha256sum's format): a rebuild replaces the
# folder only if it holds exactly these files, unchanged, so nothing a user put there is lost.
MANIFEST = f"{STATIC}/built-files.sha256"
# How long a second build of the same folder waits for the first (`make html EXECUTE=1` runs
# every notebook first: minutes) before it gives up in one line.
LOCK_WAIT_S = 900.0


def lock_path(out_dir: Path) -> Path:
    """The lock beside ``out_dir`` (build/.site.lock): inside it, a rebuild would delete it."""
    return out_dir.parent / f".{out_dir.name}.lock"


@contextmanager
def building(out_dir: Path, wait_s: float = LOCK_WAIT_S, log: Callable = print) -> Iterator[None]:
    """Hold ``out_dir``'s build lock (fcntl.flock, freed by the system when a build dies):
    a second build of the same folder waits, saying so in one line, at most ``wait_s``."""
    if fcntl is None:
        yield
        return
    lock = lock_path(out_dir)
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:  # never through a link: the lock is rewritten with this process's id
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as err:
        raise SiteError(f"cannot open the build lock {lock}: {err.strerror}") from None
    try:
        deadline, said = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                if time.monotonic() >= deadline:
                    raise SiteError(
                        f"another build (process {other}) is still writing {out_dir}: run this "
                        "again when it has finished, or give another --out"
                    ) from None
                if not said:
                    log(f"  another build (process {other}) is writing {out_dir}: waiting for it")
                    said = True
                time.sleep(0.2)  # flock has no timeout of its own
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # frees the lock


def find_mathjax() -> Path:
    """The folder of MathJax 2's ``MathJax.js`` (the jupyter-server-mathjax wheel)."""
    try:
        import jupyter_server_mathjax
    except ImportError as exc:  # pragma: no cover - the pin in requirements.txt installs it
        raise SiteError(
            "MathJax is missing: `pip install -r requirements.txt` (jupyter-server-mathjax) "
            "or run `make venv`"
        ) from exc
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (static / "MathJax.js").is_file():
        raise SiteError(f"{static} holds no MathJax.js: reinstall jupyter-server-mathjax")
    return static


def execute_notebook(nb: nbformat.NotebookNode, path: Path, timeout: int = 600) -> None:
    """Run ``nb`` in memory as ``make refresh`` does (tools/authoring/run_notebooks.py, under
    tools/harness/contract.py), so the outputs are made as the stored ones were."""
    from tools.authoring import run_notebooks
    from tools.harness import contract

    contract.apply()
    result = run_notebooks.execute(nb, path, timeout, "python3")
    if not result.passed:
        raise SiteError(f"{path.name} did not run:\n{result.report}")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def record_build(out_dir: Path) -> None:
    """Write ``MANIFEST``: every file now under ``out_dir`` (a build's, just written)."""
    files = [p for p in entries(out_dir) if is_regular(p)]
    lines = [f"{_sha256(p)}  {p.relative_to(out_dir).as_posix()}\n" for p in files]
    (out_dir / MANIFEST).write_text("".join(lines), encoding="utf-8")


def out_problem(out_dir: Path) -> str | None:
    """Why ``out_dir`` cannot be the site's own folder, in one line; None when it can."""
    if out_dir.is_symlink():  # replacing it would write, or delete, through the link
        return f"{out_dir} is a symbolic link: give the folder it points to"
    # the same for a folder on the way inside the project (build/ a link): make clean keeps both
    if (link := linked_on_the_way(ROOT, out_dir)) is not None:
        return f"{out_dir} is reached through the link {link}: give a folder that is not"
    existing = next((p for p in (out_dir, *out_dir.parents) if p.exists()), None)
    if existing == out_dir and not out_dir.is_dir():
        return f"{out_dir} is a file, not a folder: give a folder for the site"
    if existing is not None and not existing.is_dir():
        return f"{out_dir} is inside {existing}, which is a file: give a folder"
    return None


def check_rebuildable(out_dir: Path) -> None:
    """A :class:`SiteError` unless ``out_dir`` is empty or holds exactly the files that the
    build recorded in ``MANIFEST``, unchanged: replacing it then loses nothing."""
    if not any(out_dir.iterdir()):
        return
    manifest = out_dir / MANIFEST
    if not manifest.is_file():  # a mistyped --out could be anything
        raise SiteError(
            f"{out_dir} is not empty and has no {MANIFEST}, so this tool did not build it (or "
            f"built it before keeping that record): pick another --out, or delete it yourself "
            f"if nothing in it is yours"
        )
    lines = manifest.read_text(encoding="utf-8", errors="replace").splitlines()
    recorded = {name: digest for digest, _, name in (line.partition("  ") for line in lines)}
    foreign, changed = [], []
    for path in entries(out_dir):  # a link, to a folder too, is listed and never entered
        rel = path.relative_to(out_dir).as_posix()
        if rel == MANIFEST:
            continue
        # A link, FIFO or device is never the build's, and reading one could block forever.
        if rel not in recorded or not is_regular(path):
            foreign.append(rel)
        elif _sha256(path) != recorded[rel]:
            changed.append(rel)
    if lost := foreign + changed:
        named = ", ".join(lost[:2]) + (f" and {len(lost) - 2} more" if len(lost) > 2 else "")
        what = "files this tool did not write" if foreign else "files changed since the build"
        if foreign and changed:
            what = "files this tool did not write or that changed since the build"
        raise SiteError(
            f"{out_dir} holds {what} ({named}), which a rebuild would lose: move them out "
            "of the folder, or pick another --out"
        )


def copy_regular(src: Path, dst: Path, log: Callable[[str], object] = print) -> None:
    """Copy the folder ``src`` into ``dst``, regular files and folders only (a FIFO would block
    the copy), naming each other entry in one line to ``log``."""

    def specials(folder: str, names: list[str]) -> list[str]:
        skipped = [n for n in names if not (Path(folder, n).is_dir() or Path(folder, n).is_file())]
        for name in skipped:
            log(f"  skipped {Path(folder, name)}: not a regular file or folder")
        return skipped

    shutil.copytree(src, dst, ignore=specials, dirs_exist_ok=True)


def build_site(
    notebooks_dir: Path,
    out_dir: Path,
    execute: bool = False,
    log: Callable[[str], object] = print,
    translations: Path | None = None,
    wait_s: float = LOCK_WAIT_S,
) -> list[Lesson]:
    """Render every lesson in ``notebooks_dir`` into a site in ``out_dir``, in English, and with
    ``translations`` (the catalogs' folder) in every language too; the English lessons.

    ``out_dir`` is replaced only if :func:`check_rebuildable`, by one build at a time
    (:func:`building`, waiting at most ``wait_s``); a failed build leaves nothing there.
    ``execute`` re-runs each notebook in memory first. A translated page shows the
    English text of a cell its catalog lacks (``i18n.py check`` fails until none is left).
    Bad input raises :class:`SiteError`, ``LessonError`` (the table of contents),
    ``i18n.I18nError`` or ``guides.GuideError`` (a teacher's guide), saying what to fix.
    """
    if problem := out_problem(out_dir):
        raise SiteError(problem)
    paths = lesson_notebooks(notebooks_dir, log)
    notebooks = [i18n.load_notebook(p) for p in paths]
    codes = conventions.codes() if translations is not None else [conventions.SOURCE]
    catalogs = {
        code: [i18n.Catalog.load(p, code, translations) for p in paths] for code in codes[1:]
    }
    # Every header and download is read before out_dir is touched, each download as stored.
    english = [parse_header(p, nb) for p, nb in zip(paths, notebooks, strict=True)]
    lessons = {conventions.SOURCE: english}
    downloads = {conventions.SOURCE: [p.read_bytes() for p in paths]}
    for code, cats in catalogs.items():
        stored = [i18n.translate(nb, cat) for nb, cat in zip(notebooks, cats, strict=True)]
        downloads[code] = [i18n.notebook_text(nb).encode() for nb in stored]
        lessons[code] = [parse_header(p, nb) for p, nb in zip(paths, stored, strict=True)]
    # Measured on the English cells (Chinese has no spaces to count words by): same sections.
    dives = [lesson_size.deep_dives(nb) for nb in notebooks]
    # The teacher's guide in each language that has one (TEACHING.md, TEACHING.zh.md).
    guide_pages = {code: guides.render(code, codes) for code in codes}
    with_guide = frozenset(code for code, guide in guide_pages.items() if guide is not None)
    mathjax = find_mathjax()
    with building(out_dir, wait_s, log):
        if out_dir.exists():
            check_rebuildable(out_dir)
            shutil.rmtree(out_dir)
        try:
            static = out_dir / STATIC
            static.mkdir(parents=True)
            copy_regular(mathjax, static / "mathjax", log)
            copy_regular(TEMPLATES / "static", static, log)
            copy_regular(REVEAL, static / "reveal.js", log)
            # The whole collection in one zip: a single notebook does not run without `utils`.
            size = archive.write_archive(out_dir / archive.NAME)
            log(f"  {archive.NAME}  ({size / 1e6:.1f} MB)")
            for path, nb in zip(paths, notebooks, strict=True):
                if execute:
                    start = time.perf_counter()
                    execute_notebook(nb, path)
                    log(f"  executed {path.name}  ({time.perf_counter() - start:.1f} s)")
            for code in codes:
                # The (maybe re-executed) English notebooks with the catalog's markdown and
                # comments: every language shows the same code and outputs.
                cats = catalogs.get(code)
                nbs = notebooks if cats is None else list(map(i18n.translate, notebooks, cats))
                pages.render_language(
                    code,
                    codes,
                    nbs,
                    lessons[code],
                    downloads[code],
                    dives,
                    out_dir,
                    log,
                    guide_pages[code],
                    with_guide,
                )
        except BaseException:
            shutil.rmtree(out_dir, ignore_errors=True)  # an unfinished site is of no use
            raise
        record_build(out_dir)
    return english


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 24 * 3600:  # nan fails both
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0 to 86400")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument(
        "--translations",
        type=Path,
        default=ROOT / "translations",
        help="catalogs of the translated sites (tools/authoring/i18n.py); default: %(default)s",
    )
    parser.add_argument(
        "--english-only", action="store_true", help="skip the translated sites (build/site/zh)"
    )
    parser.add_argument(
        "--execute",
        action="store_true",
        help="re-execute each notebook (in memory) before rendering; stored outputs otherwise",
    )
    parser.add_argument(
        "--wait",
        type=_seconds,
        default=LOCK_WAIT_S,
        help="seconds to wait for another build of the same --out to finish (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    # Usage errors (exit 2) before anything is read or written; build_site checks the content.
    if problem := out_problem(args.out):
        parser.error(f"--out {problem}")
    if not args.notebooks.is_dir():
        parser.error(f"--notebooks {args.notebooks} is not a folder")
    start = time.perf_counter()
    print(f"Building the site from {args.notebooks} into {args.out}")
    try:
        lessons = build_site(
            args.notebooks,
            args.out,
            execute=args.execute,
            translations=None if args.english_only else args.translations,
            wait_s=args.wait,
        )
    except (SiteError, LessonError, i18n.I18nError, archive.ArchiveError, guides.GuideError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"Built {len(lessons)} lesson pages + index per language in "
        f"{time.perf_counter() - start:.1f} s.\n"
        f"Open {(args.out / 'index.html').resolve().as_uri()} "
        f"(or: python -m http.server -d {args.out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
