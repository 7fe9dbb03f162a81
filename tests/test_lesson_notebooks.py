"""Which notebooks the tools read as lessons (tools/lessons.py): those _toc.yml lists, and how
they read them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.toc import list_lessons
from tools.authoring import i18n, lesson_size, save_cells, slides
from tools.lessons import LessonError
from tools.publishing import build_site

HEADER = """# 07 · Sample lesson

A lesson that exists only inside this test.

**Objectives**
- check the tools

**Prerequisites:** none.

**Hardware**: any CPU.

**Learner time**: core path about 1 min.

**Run time**: about 1 s on the 2-core CPU.
"""
# What JupyterLab's "New notebook" saves: one empty code cell.
UNTITLED = """{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "3f1c2a7e-1b2c-4d5e-8f90-123456789abc",
   "metadata": {},
   "outputs": [],
   "source": []
  }
 ],
 "metadata": {
  "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
  "language_info": {"name": "python"}
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"""


def _sample_project(root: Path) -> Path:
    """``root/notebooks`` holding one lesson, 07_sample, and an empty ``root/utils``."""
    notebooks = root / "notebooks"
    notebooks.mkdir()
    (root / "utils").mkdir()
    lesson = new_notebook(cells=[new_markdown_cell(HEADER), new_code_cell("x = 1")])
    nbformat.write(lesson, notebooks / "07_sample.ipynb")
    return notebooks


def _run(tool: str, root: Path, monkeypatch) -> None:
    """``tool`` on ``root/notebooks`` (a lesson and Untitled.ipynb), as its make target runs it."""
    notebooks = root / "notebooks"
    if tool == "utils":  # make utils: tools/authoring/save_cells.py (check: it writes nothing)
        monkeypatch.setattr(save_cells, "ROOT", root)
        save_cells.main(["check"])
    elif tool == "html":
        build_site.build_site(notebooks, root / "site", log=print)
    elif tool == "translations":
        i18n.main(["--notebooks", str(notebooks), "--translations", str(root / "tr"), "build"])
    else:
        monkeypatch.setattr(slides, "NOTEBOOKS", notebooks)
        slides.main(["write"])


@pytest.mark.parametrize("tool", ["utils", "html", "translations", "slides"])
def test_a_notebook_that_is_not_a_lesson_is_ignored_in_one_line(
    tmp_path: Path, tool: str, monkeypatch, capsys
) -> None:
    # Rule: the tools read the lessons _toc.yml lists; any other notebook is left alone, named once.
    notebooks = _sample_project(tmp_path)
    untitled = notebooks / "Untitled.ipynb"
    untitled.write_text(UNTITLED, encoding="utf-8")
    list_lessons(notebooks)

    _run(tool, tmp_path, monkeypatch)

    out, err = capsys.readouterr()
    named = [line for line in (out + err).splitlines() if "Untitled" in line]
    assert len(named) == 1 and named[0].startswith("ignored ") and "not a lesson" in named[0], (
        out + err
    )
    assert untitled.read_text(encoding="utf-8") == UNTITLED, "the learner's notebook was changed"
    made = [p for p in tmp_path.rglob("*") if "Untitled" in p.name and p != untitled]
    assert not made, f"{tool} made files from Untitled.ipynb: {made}"


# --- Lessons are listed, not matched (_toc.yml), in a copy of the project ---------------------

ROOT = Path(__file__).resolve().parents[1]
SIXTH = "06_tensors_again"  # a copy of 01 under a new name and title, listed in _toc.yml
COPY = "01_tensors-Copy1"  # what JupyterLab's Duplicate names a copy of 01: no lesson


def copy_project(dest: Path) -> Path:
    """The project's files (tracked, and new ones git does not ignore) as they are here, in a
    fresh git repository at ``dest`` (the zip lists the files git tracks)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    return dest


def run_in(root: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``root``, as a maintainer types it there."""
    return subprocess.run(
        [sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def sixth_lesson_and_a_copy(tmp_path_factory) -> tuple[Path, dict[str, str], bytes]:
    """A copy of the project with a sixth lesson (01 under a new name and title, its slide
    metadata and learner time stale) and one line for it in _toc.yml, and a learner's
    `01_tensors-Copy1.ipynb` (stale too, and tracked: the worst case for the zip); every tool
    run there as its make target runs it: (root, what each printed, the copy's bytes)."""
    root = copy_project(tmp_path_factory.mktemp("project"))
    notebooks = root / "notebooks"
    for stem, title in ((SIXTH, "# 06 · Tensors again"), (COPY, None)):
        nb = nbformat.read(notebooks / "01_tensors.ipynb", as_version=4)
        if title:
            nb.cells[0].source = nb.cells[0].source.replace("# 01 · Tensors", title, 1)
        for cell in nb.cells:  # what `slides write` writes: stale, so a tool that reads it writes
            cell.metadata.pop("slideshow", None)
        nb.cells[0].source = re.sub(
            r"core path about \d+ min", "core path about 99 min", nb.cells[0].source
        )
        nbformat.write(nb, notebooks / f"{stem}.ipynb")
    with (root / "_toc.yml").open("a", encoding="utf-8") as toc:
        toc.write(f"- file: notebooks/{SIXTH}\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    copy = (notebooks / f"{COPY}.ipynb").read_bytes()
    said = {}
    for name, args in {
        "generate": ["-m", "tools.authoring.generate"],
        "html": ["-m", "tools.publishing.build_site", "--out", "build/site"],
        "nbval": ["-m", "pytest", "--collect-only", "-q", "--nbval", "-p", "no:randomly"],
    }.items():
        done = run_in(root, *args, *(["notebooks"] if name == "nbval" else []))
        assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        said[name] = done.stdout + done.stderr
    return root, said, copy


@pytest.mark.e2e  # every maintainer's command and nbval on a project copy (about 45 s)
def test_a_sixth_lesson_listed_in_the_toc_is_picked_up_by_every_tool(
    sixth_lesson_and_a_copy,
) -> None:
    # Rule: a lesson is a line in _toc.yml; nothing else is edited for the tools to take it.
    root, said, _ = sixth_lesson_and_a_copy
    saved = root / "utils" / "tensors_again.py"
    assert saved.is_file(), "make generate wrote no utils module from the sixth lesson"
    nb = nbformat.read(root / "notebooks" / f"{SIXTH}.ipynb", as_version=4)
    assert all("slideshow" in cell.metadata for cell in nb.cells), "no slide metadata written"
    assert "core path about 99 min" not in nb.cells[0].source, "the learner time stayed stale"
    assert (root / "notebooks" / "zh" / f"{SIXTH}.ipynb").is_file(), "no Chinese notebook"
    site = root / "build" / "site"
    for lang in ("", "zh/"):
        for name in (f"{SIXTH}.html", f"{SIXTH}.slides.html", f"{SIXTH}.ipynb"):
            assert (site / lang / name).is_file(), f"the site has no {lang}{name}"
        assert f'href="{SIXTH}.html"' in (site / lang / "index.html").read_text(encoding="utf-8")
    with zipfile.ZipFile(site / "pytorch-blitz.zip") as archive:
        assert f"pytorch-blitz/notebooks/{SIXTH}.ipynb" in archive.namelist()
    assert f"notebooks/{SIXTH}.ipynb::Cell 0" in said["nbval"], said["nbval"][-2000:]


@pytest.mark.e2e  # shares the sixth lesson's run of every command
def test_a_duplicated_notebook_is_ignored_by_every_tool(sixth_lesson_and_a_copy) -> None:
    # JupyterLab's Duplicate: the learner's copy is theirs, never a lesson of any tool.
    root, said, copy = sixth_lesson_and_a_copy
    assert (root / "notebooks" / f"{COPY}.ipynb").read_bytes() == copy, "the copy was rewritten"
    made = [
        p
        for p in root.rglob("*Copy1*")
        if p.name != f"{COPY}.ipynb" or p.parent.name != "notebooks"
    ]
    assert not made, f"the tools made files from the learner's copy: {made}"
    with zipfile.ZipFile(root / "build" / "site" / "pytorch-blitz.zip") as archive:
        assert not [n for n in archive.namelist() if "Copy1" in n], "the zip ships the copy"
    assert f"{COPY}.ipynb::" not in said["nbval"], "nbval collects the copy"
    for name, text in said.items():
        named = [line for line in text.splitlines() if "Copy1" in line]
        assert named, f"{name} did not say it ignored the copy"
        assert all(
            f"ignored notebooks/{COPY}.ipynb: not a lesson" in line
            or f"left out notebooks/{COPY}.ipynb: not a lesson" in line
            for line in named
        ), named


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project that a test may break, restoring what it broke."""
    return copy_project(tmp_path_factory.mktemp("broken"))


def _one_line_each(root: Path, commands: dict[str, list[str]], *expected: str) -> None:
    """Each command ends with an exit code other than 0 and names the problem in one line
    (the one that holds everything ``expected``), with no traceback."""
    for name, args in commands.items():
        done = run_in(root, *args)
        said = done.stdout + done.stderr
        assert done.returncode != 0, f"{name} passed:\n{said[-2000:]}"
        assert "Traceback" not in said, f"{name}:\n{said[-3000:]}"
        lines = [line for line in said.splitlines() if all(e in line for e in expected)]
        assert len(lines) == 1, f"{name}: {expected!r} said {len(lines)} times:\n{said[-3000:]}"


BROKEN_RUN_TIMES = {
    "truncated": (None, "not valid JSON (line "),  # the real file cut in half
    "a-list": ("[]", "holds list, not an object"),
    "notebooks-a-list": ('{"notebooks": []}', "notebooks is not an object"),
    "text": ('{"notebooks": {"01_tensors": {"subset": {"whole": "abc", "core": 1}}}}', "'abc'"),
    "nan": ('{"notebooks": {"01_tensors": {"subset": {"whole": NaN, "core": 1}}}}', "nan"),
    "negative": ('{"notebooks": {"01_tensors": {"subset": {"whole": -1, "core": 1}}}}', "is -1"),
    "no-core": ('{"notebooks": {"01_tensors": {"subset": {"whole": 1}}}}', "not {"),
    "other-data": (
        '{"notebooks": {"01_tensors": {"tiny": {"whole": 1, "core": 1}}}}',
        "subset/full",
    ),
    "text-measured": ('{"measured_with": 3}', "measured_with is not text"),
}


@pytest.mark.parametrize(("text", "why"), BROKEN_RUN_TIMES.values(), ids=BROKEN_RUN_TIMES)
def test_a_broken_run_times_file_is_refused_in_one_line(tmp_path: Path, text, why) -> None:
    store = tmp_path / "run_times.json"
    good = lesson_size.RUN_TIMES.read_text(encoding="utf-8")
    store.write_text(good[: len(good) // 2] if text is None else text, encoding="utf-8")
    with pytest.raises(LessonError) as refused:
        lesson_size.load_run_times(store)
    assert str(refused.value).startswith(f"{store}: ") and why in str(refused.value)
    assert "\n" not in str(refused.value)


# The commands a maintainer types, on three of them (each command starts Python: slow).
@pytest.mark.e2e  # four commands as typed, each a fresh Python (the reader's own test is above)
@pytest.mark.parametrize("case", ["truncated", "text", "nan"])
def test_a_broken_run_times_file_is_one_line_and_nothing_is_rewritten(
    project: Path, case: str
) -> None:
    # notebooks/run_times.json is checked once, before any of it is used or a notebook written.
    text, why = BROKEN_RUN_TIMES[case]
    store = project / "notebooks" / "run_times.json"
    good = store.read_text(encoding="utf-8")
    lesson = project / "notebooks" / "01_tensors.ipynb"
    before = lesson.read_bytes()
    store.write_text(good[: len(good) // 2] if text is None else text, encoding="utf-8")
    try:
        commands = {
            "make generate": ["-m", "tools.authoring.generate"],
            "generate --check": ["-m", "tools.authoring.generate", "--check"],
            "lesson_size check": ["-m", "tools.authoring.lesson_size", "check"],
            "run_notebooks --inplace": [
                "-m",
                "tools.authoring.run_notebooks",
                "--inplace",
                "notebooks/01_tensors.ipynb",
            ],  # fmt: skip
        }
        _one_line_each(project, commands, "notebooks/run_times.json: ", why)
        assert lesson.read_bytes() == before, "a notebook was rewritten"
    finally:
        store.write_text(good, encoding="utf-8")


@pytest.mark.e2e  # seven commands as typed, each a fresh Python
def test_a_notebook_with_merge_conflict_markers_is_named_in_one_line(project: Path) -> None:
    # The tools read a notebook through one reader: file, line, and the likely cause.
    path = project / "notebooks" / "02_autograd.ipynb"
    good = path.read_text(encoding="utf-8")
    lines = good.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"source": [' in line)
    ours, theirs = lines[at + 1], lines[at + 1].replace('"', '"(theirs) ', 1)
    conflict = ["<<<<<<< HEAD\n", ours, "=======\n", theirs, ">>>>>>> lesson-edits\n"]
    path.write_text("".join(lines[: at + 1] + conflict + lines[at + 2 :]), encoding="utf-8")
    try:
        commands = {
            "slides check": ["-m", "tools.authoring.slides", "check"],
            "lesson_size check": ["-m", "tools.authoring.lesson_size", "check"],
            "save_cells check": ["-m", "tools.authoring.save_cells", "check"],
            "i18n check": ["-m", "tools.authoring.i18n", "check"],
            "make generate": ["-m", "tools.authoring.generate"],
            "generate --check": ["-m", "tools.authoring.generate", "--check"],
            "make html": ["-m", "tools.publishing.build_site", "--out", "build/site"],
        }
        expected = (
            f"notebooks/02_autograd.ipynb: not valid notebook JSON (line {at + 2}: "
            f"Expecting value); merge conflict markers at line {at + 2}"
        )
        _one_line_each(project, commands, expected)
    finally:
        path.write_text(good, encoding="utf-8")


@pytest.mark.parametrize(
    ("chapters", "why"),
    [
        (None, "_toc.yml: missing; it lists the lessons"),
        (["notebooks/07_sample", "notebooks/07_sample"], "'notebooks/07_sample' is listed twice"),
        (["notebooks/07_sample", "notebooks/07_other"], "two lessons are numbered 07"),
        (["../notebooks/07_sample"], "is not a lesson in notebooks/"),
        (["/tmp/notebooks/07_sample"], "is not a lesson in notebooks/"),
        (["notebooks/zh/07_sample"], "is not a lesson in notebooks/"),
        (["utils/07_sample"], "is not a lesson in notebooks/"),
        (["notebooks/08_gone"], "lists notebooks/08_gone.ipynb, which is missing"),
        (["notebooks/07_link"], "lists notebooks/07_link.ipynb, which is a link"),
        ("chapters: [", "_toc.yml: not valid YAML (line "),
        ("format: jb-article", "not a Jupyter Book table of contents"),
    ],
    ids=[
        "missing",
        "duplicate",
        "same-number",
        "dotdot",
        "absolute",
        "zh",
        "elsewhere",
        "gone",
        "link",
        "not-yaml",
        "other-format",
    ],  # fmt: skip
)
def test_a_broken_table_of_contents_is_one_line_in_every_tool(
    tmp_path: Path, monkeypatch, capsys, chapters, why: str
) -> None:
    notebooks = _sample_project(tmp_path)
    (notebooks / "07_other.ipynb").write_bytes((notebooks / "07_sample.ipynb").read_bytes())
    (notebooks / "07_link.ipynb").symlink_to("07_sample.ipynb")
    if isinstance(chapters, list):
        list_lessons(notebooks)  # a well-formed file, then the listed names replaced
        lines = ["format: jb-book", "root: README", "chapters:"]
        (tmp_path / "_toc.yml").write_text("\n".join(lines + [f"- file: {c}" for c in chapters]))
    elif chapters is not None:
        (tmp_path / "_toc.yml").write_text(chapters)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(save_cells, "ROOT", tmp_path)
    monkeypatch.setattr(slides, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(lesson_size, "NOTEBOOKS", notebooks)
    folders = ["--notebooks", str(notebooks), "--translations", str(tmp_path / "tr")]
    for name, run in {
        "save_cells": lambda: save_cells.main(["check"]),
        "slides": lambda: slides.main(["check"]),
        "lesson_size": lambda: lesson_size.main(["check"]),
        "i18n": lambda: i18n.main([*folders, "build"]),
        "html": lambda: build_site.main(["--notebooks", str(notebooks), "--out", "site"]),
    }.items():
        assert run() != 0, f"{name} accepted the table of contents"
        out, err = capsys.readouterr()
        lines = [line for line in (out + err).splitlines() if not line.startswith("Building")]
        assert len(lines) == 1 and why in lines[0], f"{name}: {out + err}"
    assert not (tmp_path / "site").exists() and not (notebooks / "zh").exists()


_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("laughs", "anchors and aliases (& and *) are not allowed"),
        ("alias", "anchors and aliases (& and *) are not allowed"),
        ("deep", "nested more than"),
        ("large", "larger than"),
        ("fifo", "not a regular file"),
        ("link", "is a link"),
    ],
)
def test_the_table_of_contents_is_read_within_bounds(tmp_path: Path, kind: str, why: str) -> None:
    # Issue 46, case 12: a 418-byte billion laughs took 45 s and 3 GB then MemoryError,
    # 1,000 nested brackets a RecursionError, a FIFO blocked every tool forever.
    import tools.lessons as lessons_mod

    notebooks = _sample_project(tmp_path)
    toc = tmp_path / "_toc.yml"
    head = "format: jb-book\nroot: README\nchapters:\n- file: notebooks/07_sample\n"
    if kind == "laughs":
        toc.write_text(head + _LAUGHS)
    elif kind == "alias":
        toc.write_text("format: &f jb-book\nroot: README\nchapters:\n- file: notebooks/07_sample\n")
    elif kind == "deep":
        toc.write_text(head + "x: " + "[" * 1000 + "]" * 1000 + "\n")
    elif kind == "large":
        toc.write_text(head + "#" * (lessons_mod.TOC_MAX_BYTES + 1) + "\n")
    elif kind == "fifo":
        os.mkfifo(toc)
    else:
        (tmp_path / "real.yml").write_text(head)
        toc.symlink_to("real.yml")
    with pytest.raises(LessonError, match=re.escape(why)) as info:
        lessons_mod.listed(notebooks)
    assert "\n" not in str(info.value) and "_toc.yml" in str(info.value)


@pytest.mark.e2e  # pytest started as typed, a fresh Python
def test_a_broken_table_of_contents_stops_pytest_in_one_line(tmp_path: Path) -> None:
    # Issue 46, case 11: 13 test modules list the lessons at import; a broken _toc.yml was
    # 14 tracebacks ("Interrupted: 14 errors during collection"), not the one line it is.
    root = Path(__file__).resolve().parents[1]
    copy = tmp_path / "p"
    for name in ("tools", "utils", "tests"):
        shutil.copytree(root / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(root / name, copy / name)
    (copy / "notebooks").mkdir()
    (copy / "_toc.yml").write_text("chapters: [\n")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    modules = ["tests/test_lessons.py", "tests/test_site.py", "tests/test_translations.py"]
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*argv, *modules], cwd=copy, env=env, capture_output=True, text=True, timeout=120
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Traceback" not in out and "errors during collection" not in out, out
    said = [line for line in out.splitlines() if "_toc.yml: not valid YAML" in line]
    assert len(said) == 1, out


def test_the_size_tables_total_row_counts_the_lessons(tmp_path: Path) -> None:
    # Issue 46, case 13: with a sixth lesson listed the total row still said "all five".
    notebooks = _sample_project(tmp_path)
    paths = []
    for number in range(1, 7):
        path = notebooks / f"{number:02d}_sample.ipynb"
        shutil.copy(notebooks / "07_sample.ipynb", path)
        paths.append(path)
    rows = lesson_size.table(paths).splitlines()
    assert rows[8].startswith("| all 6 |"), rows[8]
    assert not any("five" in row for row in rows)


def test_a_translation_whose_lesson_left_the_toc_is_removed_with_a_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    # Issue 46, case 10: lesson 05 taken out of _toc.yml, its file still there: make
    # translations said only "ignored ...: not a lesson" and deleted notebooks/zh/05 silently.
    notebooks = _sample_project(tmp_path)
    shutil.copy(notebooks / "07_sample.ipynb", notebooks / "08_more.ipynb")
    tr = tmp_path / "tr"
    for stem in ("07_sample", "08_more"):
        i18n.record(notebooks / f"{stem}.ipynb", {}, "zh", tr, False)
    list_lessons(notebooks, "07_sample", "08_more")
    folders = ["--notebooks", str(notebooks), "--translations", str(tr), "build"]
    i18n.main(folders)
    assert (notebooks / "zh" / "08_more.ipynb").is_file()
    capsys.readouterr()
    list_lessons(notebooks, "07_sample")  # 08 left the table of contents, its file stays
    i18n.main(folders)
    out, err = capsys.readouterr()
    removed = [line for line in (out + err).splitlines() if line.startswith("removed ")]
    assert not (notebooks / "zh" / "08_more.ipynb").exists()
    assert len(removed) == 1 and "zh/08_more.ipynb" in removed[0], out + err
    assert "tr/zh/08_more.json" in removed[0], removed
