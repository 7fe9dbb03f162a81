"""Homework from the lessons (tools/teaching/assignments.py) and the class grader
(tools/teaching/grade.py, tools/teaching/sandbox.py): the release holds no solution, a
learner's Restart & Run All of it completes, bad files get one line, and a class of 30
submissions, untrusted ones among them, gets the scores it earned and changes nothing else."""

from __future__ import annotations

import copy
import csv
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tools import conventions
from tools.lessons import lesson_notebooks
from tools.teaching import assignments, sandbox
from tools.teaching.grade import Refused, grade, read_submission

ROOT = Path(__file__).resolve().parents[1]
LESSON = "01"
CHECKS = ["ex01_q1", "ex01_q2", "ex01_q3", "ex01_q4"]


@pytest.fixture(scope="module")
def courses(released_course) -> dict[str, Path]:
    """The English and Chinese courses of lesson 01, as `make assignments` writes them."""
    return {lang: released_course(LESSON, lang) for lang in assignments.LANGS}


def _release(course: Path) -> Path:
    return course / "release" / "01_tensors" / "01_tensors.ipynb"


NUMBERS = [assignments.lesson_number(p) for p in lesson_notebooks()]


@pytest.mark.e2e  # writes every lesson's nbgrader course in both languages (about 50 s)
@pytest.mark.parametrize("lang", assignments.LANGS)
@pytest.mark.parametrize("number", NUMBERS)
def test_the_release_holds_no_solution_code_or_text(number, lang, released_course) -> None:
    path = assignments.lesson_for(number, lang)
    lesson = nbformat.read(path, as_version=4)
    release = (released_course(number, lang) / "release" / path.stem / path.name).read_text(
        encoding="utf-8"
    )
    text = "\n".join(c.source for c in nbformat.reads(release, as_version=4).cells)
    solution = [c for c in lesson.cells if "solution" in c.metadata.get("tags", [])]
    # a line the lesson also shows outside its solutions (an answer cell's given input) is no leak
    shown = {
        line.strip()
        for c in lesson.cells
        if "solution" not in c.metadata.get("tags", [])
        for line in c.source.splitlines()
    }
    code = {
        line.strip()
        for c in solution
        if c.cell_type == "code" and "check" not in c.metadata.get("tags", [])
        for line in c.source.splitlines()
        if line.strip() and line.strip() not in shown
    }
    prose = {
        line.strip()
        for c in solution
        if c.cell_type == "markdown"
        for line in c.source.splitlines()
        if line.strip()
    }
    assert len(code) > 5 and len(prose) > 3  # the search has something to find
    released = {line.strip() for line in text.splitlines()}  # whole lines: "]:" is in any text
    assert [line for line in code | prose if line in released] == []
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS", "_graded", ".grade("):
        assert marker not in text
    cells = nbformat.reads(release, as_version=4).cells
    exercises = "\n".join(c.source for c in cells if "exercise" in c.metadata.get("tags", []))
    # nor says where they are (core prose may say "a good solution")
    assert assignments.SOLUTIONS_WORD[lang].search(exercises) is None


def _run_all_says_not_done(release: Path, lang: str, cwd: Path) -> None:
    """A learner's Restart & Run All of ``release`` completes, every check saying not done."""
    nb = nbformat.read(release, as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()  # raises on the first error
    checks = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    said = ["".join(o.get("text", "") for o in c.outputs) for c in checks]
    todo = "not done yet" if lang == "en" else "还没做"
    assert len(said) == len(set(conventions.answer_numbers(nb))) > 0, said
    assert all(todo in line for line in said), said


@pytest.mark.e2e  # the release run whole in a kernel, as a learner's Restart & Run All
@pytest.mark.parametrize("lang", assignments.LANGS)
def test_a_learners_restart_and_run_all_of_the_release_completes_saying_not_done(
    courses, lang, tmp_path
) -> None:
    _run_all_says_not_done(_release(courses[lang]), lang, tmp_path)


# The other lessons' releases, in English (the Chinese release differs only in its language
# line, run above for 01): 04 trains and 05 launches torchrun, minutes together.
@pytest.mark.e2e
@pytest.mark.parametrize("number", [n for n in NUMBERS if n != LESSON])
def test_every_lessons_release_runs_all_saying_not_done(number, tmp_path, released_course) -> None:
    path = assignments.lesson_for(number, "en")
    release = released_course(number, "en") / "release" / path.stem / path.name
    (tmp_path / "work").mkdir()
    _run_all_says_not_done(release, "en", tmp_path / "work")


def test_a_file_that_is_no_submission_gets_one_line(released_course, tmp_path) -> None:
    release = _release(released_course(LESSON, "en"))
    cases = {
        "a.txt": (b"hello", "not a notebook: a.txt is not an .ipynb file"),
        "b.ipynb": (b"{not json", "not a notebook: the file is not valid JSON"),
        "c.ipynb": (b"\xff\xfe", "not a notebook: the file is not UTF-8 text"),
        "d.ipynb": (b'{"cells": 3}', "not a Jupyter notebook: JSON without a notebook's"),
        "i.ipynb": (b'{"nbformat": 4, "nbformat_minor": 5, "cells": [3]}', "not a valid Jupyter"),
        "e.ipynb": (b" " * (2 * 2**20), "too large: 2.0 MB, more than 1 MB"),
        "f.ipynb": (b"[" * 100_000, "not a notebook: the file is not valid JSON"),
        "g.ipynb": (
            (ROOT / "notebooks" / "01_tensors.ipynb").read_bytes(),
            "not lesson 01's assignment",
        ),
    }
    for name, (data, line) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(Refused, match=line.replace("(", r"\(").replace(".", r"\.")):
            read_submission(tmp_path / name, 2**20, LESSON)
    (tmp_path / "h.ipynb").symlink_to(release)
    with pytest.raises(Refused, match="not a plain file"):
        read_submission(tmp_path / "h.ipynb", 2**20, LESSON)
    assert read_submission(release, 2**20, LESSON).cells


def test_the_grader_refuses_to_run_submissions_it_cannot_isolate(monkeypatch, capsys) -> None:
    from tools.teaching import grade as grader

    monkeypatch.setattr(grader.sandbox.os, "geteuid", lambda: 1000)
    assert grader.main(["--lesson", "01", "--submissions", "."]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said == [
        "grade: the grader creates a throw-away user per submission, which needs root: run it "
        "as root (sudo make grade ..., or in a container or VM)"
    ]


def test_grading_without_a_submissions_folder_is_a_usage_error(capsys) -> None:
    from tools.teaching import grade as grader

    with pytest.raises(SystemExit) as stop:
        grader.main(["--lesson", "01", "--submissions", ""])
    assert stop.value.code == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert "the folder of submitted notebooks" in said[-1]
    # make reads SUBMISSIONS before building anything (the venv stamp included)
    env = {k: v for k, v in os.environ.items() if k not in ("SUBMISSIONS", "MAKEFLAGS")}
    done = subprocess.run(
        ["make", "--no-print-directory", "grade", "LESSON=01"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "make grade needs SUBMISSIONS" in done.stderr


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_a_run_updates_its_students_rows_and_keeps_every_other(tmp_path) -> None:
    from tools.teaching.grade import merge

    head = "student,ex01_q1,ex01_q2,total,note\n"
    latest, run = tmp_path / "grades.csv", tmp_path / "run.csv"
    latest.write_text(head + "alice,1,1,2,\nbob,0,1,1,\ncarol,1,0,1,late\n", encoding="utf-8")
    run.write_text(head + "bob,1,1,2,\ncarol,1,0,1,late\ndave,0,0,0,not a notebook\n")
    said = []
    merge(latest, run, said.append)
    assert said == [
        "bob: updated from 1 to 2 points",
        "carol: unchanged (1 points)",
        "dave: added (0 points)",
    ]
    rows = _rows(latest)
    assert sorted(rows) == ["alice", "bob", "carol", "dave"]
    assert rows["alice"]["total"] == "2" and rows["bob"]["ex01_q1"] == "1"
    assert rows["dave"]["note"] == "not a notebook"
    assert not list(tmp_path.glob(".*"))  # no partial file left beside it
    # a first run: its rows, each said
    said.clear()
    merge(tmp_path / "new.csv", run, said.append)
    assert sorted(_rows(tmp_path / "new.csv")) == ["bob", "carol", "dave"]
    assert [line.split(":")[1] for line in said] == [" added (2 points)"] + [
        " added (1 points)"
    ] + [" added (0 points)"]


def _stand_in_grading(monkeypatch) -> list[tuple[str, str]]:
    """No kernel: the routing is tested. The (course folder, student) of each grading, in order;
    each student's note says it was a stand-in."""
    from tools.teaching import grade as grader

    seen = []

    def autograde(course, name, student, limit_s, logs, memory_bytes, lang="en"):
        seen.append((course.name, student))
        (logs / f"{student}.log").write_text("stand-in")
        return f"stand-in grade of {student}"

    monkeypatch.setattr(grader, "_autograde", autograde)
    monkeypatch.setattr(grader, "solutions_lost", lambda course, name, note: "")
    return seen


@pytest.mark.e2e  # two grading runs of sandboxed kernels (about 35 s)
def test_every_file_gets_a_row_and_a_late_run_loses_none(courses, tmp_path, monkeypatch) -> None:
    from tools.teaching import grade as grader

    seen = _stand_in_grading(monkeypatch)
    release = _release(courses["en"]).read_bytes()
    first = tmp_path / "first"
    first.mkdir()
    for name in ("carol.ipynb", "a b.ipynb", "gina.v2.ipynb", "ålice.ipynb", "=x.ipynb"):
        (first / name).write_bytes(release)
    (first / "carol.html").write_text("<p>my notes</p>")
    (first / "bob.ipynb").write_text("{not json")
    out = tmp_path / "out"
    grader.grade(LESSON, first, out)
    assert [s for _, s in seen] == [grader.SOLUTION_ID, "carol"]  # the lesson's solutions first
    rows = _rows(out / "grades.csv")
    assert sorted(rows) == sorted(
        ["'=x.ipynb'", "a b.ipynb", "bob", "carol", "carol.html", "gina.v2.ipynb", "ålice.ipynb"]
    )
    assert rows["carol"]["note"] == "stand-in grade of carol"
    assert rows["carol.html"]["note"].startswith("not a notebook: carol.html is not an .ipynb")
    for name in ("a b.ipynb", "gina.v2.ipynb", "ålice.ipynb"):
        assert "a student id" in rows[name]["note"], name
    assert rows["bob"]["note"].startswith("not a notebook")
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["bob.html", "carol.html"]
    for page in (out / "feedback").iterdir():
        assert grader.CSP_META in page.read_text(encoding="utf-8"), page
    # a late submission: its own run and record; every other row stays, each change said
    late = tmp_path / "late"
    late.mkdir()
    (late / "dave.ipynb").write_bytes(release)
    (late / "bob.ipynb").write_bytes(release)
    grader.grade(LESSON, late, out)
    rows = _rows(out / "grades.csv")
    assert len(rows) == 8 and rows["dave"]["note"] == "stand-in grade of dave"
    assert rows["bob"]["note"] == "stand-in grade of bob"
    assert rows["carol"]["note"] == "stand-in grade of carol"
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 2
    assert sorted(_rows(runs[0] / "grades.csv")) == sorted(rows.keys() - {"dave"})
    assert sorted(_rows(runs[1] / "grades.csv")) == ["bob", "dave"]
    log = (runs[1] / "grade.log").read_text(encoding="utf-8")
    assert "dave: added (0 points)" in log
    assert "bob: updated, still 0 points" in log
    assert (runs[1] / "logs" / "dave.log").exists()
    assert (runs[0] / "feedback" / "bob.html").read_text() != (
        out / "feedback" / "bob.html"
    ).read_text()


@pytest.mark.e2e  # writes a real nbgrader course per job (30-50 s): beside the class's tests
def test_side_by_side_every_student_has_one_row_and_one_page(
    courses, tmp_path, monkeypatch
) -> None:
    """--jobs: each job its own nbgrader course (no two processes write one gradebook); the
    class's rows and pages are those of one job, the solutions graded first, alone."""
    from tools.teaching import grade as grader

    seen = _stand_in_grading(monkeypatch)
    release = _release(courses["en"]).read_bytes()
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    students = ["amy", "bob", "cy", "dan", "eve"]
    for student in students:
        (submitted / f"{student}.ipynb").write_bytes(release)
    (submitted / "notes.txt").write_text("not a notebook")
    out = tmp_path / "out"
    grader.grade(LESSON, submitted, out, jobs=3)
    assert seen[0] == ("course-0", grader.SOLUTION_ID)
    assert sorted(seen[1:]) == sorted(
        [("course-0", "amy"), ("course-0", "dan"), ("course-1", "bob"), ("course-1", "eve"),
         ("course-2", "cy")]
    )  # fmt: skip
    rows = _rows(out / "grades.csv")
    assert sorted(rows) == sorted([*students, "notes.txt"])
    assert all(rows[s]["note"] == f"stand-in grade of {s}" for s in students)
    assert sorted(p.stem for p in (out / "feedback").iterdir()) == students
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o700


@pytest.mark.e2e  # writes a real nbgrader course per job (30-50 s): beside the class's tests
def test_a_chinese_course_is_graded_in_chinese(courses, tmp_path, monkeypatch, capsys) -> None:
    """COURSE_LANG=zh make grade (--lang zh): the grader's lines and the notes in grades.csv
    are Chinese, the facts (names, numbers) the same."""
    from tools.teaching import grade as grader

    _stand_in_grading(monkeypatch)
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    (submitted / "bob.ipynb").write_text("{not json")
    (submitted / "carol.ipynb").write_bytes(_release(courses["zh"]).read_bytes())
    grader.grade(LESSON, submitted, tmp_path / "out", "zh")
    rows = _rows(tmp_path / "out" / "grades.csv")
    assert rows["bob"]["note"] == "不是笔记本：文件不是有效的 JSON（第 1 行，第 2 列）"
    said = capsys.readouterr().out
    assert "课程自带的答案：满分" in said and "carol：新增（0 分）" in said, said


@pytest.mark.e2e  # make assignments as a teacher types it, twice (about 10 s)
def test_make_assignments_deletes_no_file_it_did_not_write(tmp_path, capsys) -> None:
    course, lessons = tmp_path / "course", [assignments.lesson_for(LESSON, "en")]
    assignments.write_course(course, "en", lessons)
    mine = course / "source" / "01_tensors" / "mine.txt"
    mine.write_text("the teacher's")
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + "c.Exchange.root = '/srv/ours'\n")
    assignments.write_course(course, "en", lessons)
    assert mine.read_text() == "the teacher's"
    assert (course / "release" / "01_tensors" / "mine.txt").exists()  # copied into the release
    assert "c.Exchange.root = '/srv/ours'" in config.read_text()
    assert f"kept {mine}" in capsys.readouterr().out
    # one in the way is refused before anything changes
    stray = course / "release" / "01_tensors" / "notes.txt"
    stray.write_text("the teacher's too")
    before = _tree(course)
    with pytest.raises(assignments.AssignmentError, match="was not written by make assignments"):
        assignments.write_course(course, "en", lessons)
    assert _tree(course) == before
    # a config it cannot tell from a teacher's is kept aside, not replaced
    stray.unlink()
    config.write_text("c = get_config()  # the teacher's own\n")
    assignments.write_course(course, "en", lessons)
    kept = list(course.glob("nbgrader_config.py.kept-*"))
    assert [p.read_text() for p in kept] == ["c = get_config()  # the teacher's own\n"]


def test_stderr_warnings_and_logging_in_a_check_cell_never_cost_a_point() -> None:
    from nbgrader.utils import determine_grade
    from traitlets.config import Config

    from tools.teaching import grade as grader

    def check_cell(*outputs):
        cell = nbformat.v4.new_code_cell("ex.q2.check(fit_line)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 1,
                                     "grade_id": "ex01_q2", "locked": True}  # fmt: skip
        cell.outputs = list(outputs)
        return cell

    bar = nbformat.v4.new_output("stream", name="stderr", text="100%|##########| 50/50\n")
    warned = nbformat.v4.new_output("stream", name="stderr", text="UserWarning: to copy ...\n")
    passed = nbformat.v4.new_output("stream", name="stdout", text="✓ right\n")
    raised = nbformat.v4.new_output("error", ename="AssertionError", evalue="hint", traceback=[])
    nb = nbformat.v4.new_notebook(
        cells=[check_cell(bar, passed), check_cell(warned, passed), check_cell(passed, raised)]
    )
    assert [determine_grade(c)[0] for c in nb.cells] == [0, 0, 0]  # nbgrader's own reading
    nb, _ = grader.StderrIsOutput().preprocess(nb, {})
    assert [determine_grade(c)[0] for c in nb.cells] == [1, 1, 0]  # the check's own verdict
    assert "100%" in nb.cells[0].outputs[0].text  # still shown in the feedback
    # and the grader's course runs it before nbgrader reads the points
    c = Config()
    exec(grader.AUTOGRADE_STEPS, {"c": c})
    steps = [step.__name__ for step in c.Autograde.autograde_preprocessors]
    assert steps.index("StderrIsOutput") < steps.index("SaveAutoGrades")


@pytest.mark.e2e
def test_a_configuration_that_fails_the_lessons_own_solutions_grades_nobody(tmp_path) -> None:
    if sandbox.check_host():
        pytest.skip(sandbox.check_host())
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    shutil.copyfile(_release_of_a_fresh_course(tmp_path), submitted / "alice.ipynb")
    out = tmp_path / "out"
    # 128 MiB for the whole submission (its cgroup): too little for a kernel that imports torch
    with pytest.raises(assignments.AssignmentError) as refused:
        grade(LESSON, submitted, out, cell_timeout=60, timeout=120, memory_bytes=2**27)
    said = str(refused.value)
    assert said.startswith("the lesson's own solutions lose points in this configuration")
    assert "--memory-gb 0.125" in said and "nobody was graded" in said
    assert "ex01_q1, ex01_q2" in said  # each exercise, and why in a teacher's words:
    assert "used up the submission's memory" in said or "did not start" in said, said
    assert "IPKernelApp" not in said
    assert not (out / "grades.csv").exists()


def _release_of_a_fresh_course(tmp_path: Path) -> Path:
    course = tmp_path / "course"
    assignments.write_course(course, "en", [assignments.lesson_for(LESSON, "en")])
    return _release(course)


def _feedback_html(nb) -> str:
    """``nb`` rendered as nbgrader's generate_feedback renders it (its template and config)."""
    import nbgrader
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    c = Config()
    c.HTMLExporter.template_name = "feedback"
    c.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    c.HTMLExporter.extra_template_paths = [
        str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")
    ]
    scores = {"score": 1, "max_score": 4, "late_penalty": 0, "notebook": "01_tensors"}
    body, _ = HTMLExporter(config=c).from_notebook_node(nb, resources={"nbgrader": scores})
    return body


def test_a_feedback_page_runs_no_script_of_the_students(browser, tmp_path) -> None:
    from tools.teaching.grade import safe_page

    shown = nbformat.v4.new_code_cell("display(HTML(...))")
    shown.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": "<script>document.title += '+display'; alert('display')</script>",
                "text/plain": "<IPython.core.display.HTML object>",
            },
        )
    ]
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("<script>document.title += '+markdown'</script>"),
            nbformat.v4.new_markdown_cell("<img src=x onerror=\"document.title += '+onerror'\">"),
            shown,
        ]
    )
    page = _feedback_html(nb)
    said = []
    for name, text in (("as_nbgrader_writes_it.html", page), ("safe.html", safe_page(page))):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        tab = browser.new_page()
        tab.on("dialog", lambda d: (said.append(d.message), d.dismiss()))
        tab.goto(path.as_uri(), wait_until="load")
        said.append(tab.title())
        tab.close()
    # as nbgrader writes it, each of the student's scripts runs (so this test sees them run) ...
    assert said[0] == "display" and len(said) == 3, said
    assert sorted(said[1].split("+")) == ["01_tensors", "display", "markdown", "onerror"], said
    # ... and the page the grader writes runs none of them: its title as written, no dialog
    assert said[2] == "01_tensors", said
    head = safe_page(page).split("<head", 1)[1]
    assert head.split(">", 1)[1].startswith('<meta http-equiv="Content-Security-Policy"')


def test_nbgraders_lab_panels_stay_out_of_a_learners_lab() -> None:
    import sys

    from tools.publishing import lab

    env = dict(os.environ, JUPYTER_CONFIG_PATH=lab.config_path(os.environ))
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    line = [x for x in (listed.stdout + listed.stderr).splitlines() if "@jupyter/nbgrader v" in x]
    # make venv removes it (RISE's app would load it anyway); where it is, Lab disables it
    assert all("disabled" in x for x in line), line


# ---- a class of 30 ------------------------------------------------------------------------

PROBE = "pwned-by-a-submission"  # what the untrusted submissions try to write or delete


def _answers(course: Path) -> dict[str, str]:
    """grade_id of each answer cell -> the lesson's solution code for it."""
    source = nbformat.read(course / "source" / "01_tensors" / "01_tensors.ipynb", as_version=4)
    found = {}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            body = cell.source.split("### BEGIN SOLUTION\n", 1)[1]
            found[meta["grade_id"]] = body.split("### END SOLUTION", 1)[0]
    return found


def _submission(release, answers: dict[str, str], right: set[int], extra: dict[int, str]):
    """The release with the answers of ``right`` filled in and ``extra`` code prepended."""
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            n = int(meta["grade_id"].split("_q")[1].split("_")[0])
            if n in right:  # the right answer, after the extra code if any
                cell.source = extra.get(n, "") + "\n" + answers[meta["grade_id"]]
            elif n in extra:  # in place of the placeholder: a wrong answer, or mischief
                cell.source = extra[n]
    return nb


def _class(release, answers, attacked: dict[str, str]) -> tuple[dict, dict[str, list[int]]]:
    """30+ submissions (id -> notebook or raw bytes) and the scores each should get."""
    every = {1, 2, 3, 4}
    root, course, work = attacked["root"], attacked["course"], attacked["work"]
    cases: dict[str, tuple[set[int], dict[int, str], list[int]]] = {
        **{f"right{i}": (every, {}, [1, 1, 1, 1]) for i in range(1, 5)},
        "only_q1": ({1}, {}, [1, 0, 0, 0]),
        "only_q3": ({3}, {}, [0, 0, 1, 0]),
        "q1_q2": ({1, 2}, {}, [1, 1, 0, 0]),
        "q2_q4": ({2, 4}, {}, [0, 1, 0, 1]),
        "all_but_q4": ({1, 2, 3}, {}, [1, 1, 1, 0]),
        "placeholder1": (set(), {}, [0, 0, 0, 0]),
        "placeholder2": (set(), {}, [0, 0, 0, 0]),
        # plausible mistakes: the rows without keepdim fail to broadcast; forgot / 255
        "wrong_q1": (
            every - {1},
            {
                1: "X = torch.arange(12.0).reshape(4, 3)\n"
                "centred_cols = X - X.mean(dim=0)\ncentred_rows = X - X.mean()"
            },
            [0, 1, 1, 1],
        ),
        "wrong_q2": (
            every - {2},
            {
                2: "images = np.zeros((2, 32, 32, 3), dtype=np.uint8)\n"
                "X = torch.from_numpy(images).permute(0, 3, 1, 2).float()\n"
                "shares_memory = False"
            },
            [1, 0, 1, 1],
        ),
        "raises_in_q2": (every - {2}, {2: "raise RuntimeError('oops')"}, [1, 0, 1, 1]),
        "loops_forever": (every, {2: "while True:\n    pass"}, [1, 0, 1, 1]),
        "ignores_interrupts": (
            every,
            {
                3: "import signal\n"
                "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "while True:\n    pass"
            },
            [1, 1, 0, 0],
        ),
        "too_slow": (
            every,
            {2: "import time\ntime.sleep(25)", 3: "time.sleep(25)", 4: "time.sleep(200)"},
            [1, 1, 1, 0],
        ),
        "crashes": (every, {2: "import os\nos._exit(1)"}, [1, 0, 0, 0]),
        "segfaults": (every, {3: "import ctypes\nctypes.string_at(0)"}, [1, 1, 0, 0]),
        "deletes_files": (
            every,
            {
                1: "import os, subprocess\nsubprocess.run(['rm', '-rf', "
                f"{course!r}, {root + '/utils'!r}, {root + '/notebooks'!r}, "
                f"{work!r}, '/tmp', '/var/tmp', os.path.expanduser('~')])\n"
                "import glob, shutil\n"
                "[shutil.rmtree(p, ignore_errors=True) for p in "
                f"glob.glob({work + '/*'!r})]"
            },
            [1, 1, 1, 1],
        ),
        # reads the hidden tests and solutions: if it can, it leaves its answers undone
        "reads_hidden_tests": (
            every,
            {
                1: "import glob\nfound = []\n"
                f"for p in glob.glob({work + '/*/*/*'!r}) + "
                f"glob.glob({work + '/*/*/*/*/*'!r}) + "
                f"glob.glob({course + '/source/*/*'!r}):\n"
                "    try:\n        found.append(open(p).read(10))\n"
                "    except OSError:\n        pass\n"
                "assert not found, found"
            },
            [1, 1, 1, 1],
        ),
        "overwrites_checks": (
            set(),
            {
                1: "import utils.exercises as _u\n"
                "_u.Exercise.grade = lambda self, *a: None\n"
                "ex.q1.__class__.check = lambda self, *a: True\n"
                "import sys, types\n"
                "sys.modules['_graded.tensors'] = types.SimpleNamespace()\n"
                "class _Fake:\n"
                "    def __getattr__(self, name):\n"
                "        return self\n"
                "    def __call__(self, *a):\n        return True\n"
                "ex = _Fake()"
            },
            [0, 0, 0, 0],
        ),
        "prints_all_passed": (
            set(),
            {n: "print('All tests passed! 4/4')" for n in every},
            [0, 0, 0, 0],
        ),
        "writes_outside": (
            every,
            {
                1: "import os\nfor d in ['/tmp', '/var/tmp', '/dev/shm', "
                f"{root!r}, {root + '/notebooks'!r}, {course!r}, {work!r}]:\n"
                "    try:\n"
                f"        open(os.path.join(d, {PROBE!r}), 'w').write('x')\n"
                "    except OSError:\n        pass\n"
                f"open({PROBE!r}, 'w').write('in its own folder: allowed')"
            },
            [1, 1, 1, 1],
        ),
        "leaves_a_process": (
            every,
            {1: "import subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True)"},
            [1, 1, 1, 1],
        ),
        "uses_the_network": (
            every,
            {
                1: "import socket\ntry:\n"
                "    socket.create_connection(('127.0.0.1', 22), timeout=2)\n"
                "except OSError:\n    pass"
            },
            [1, 1, 1, 1],
        ),
        "hogs_memory": (every, {1: "hog = bytearray(20 * 2**30)"}, [0, 1, 1, 1]),  # MemoryError
        "prints_a_flood": (
            every,
            {1: "for _ in range(3000):\n    print('x' * 10_000)"},
            [1, 1, 1, 1],
        ),
    }
    made: dict[str, object] = {}
    expected: dict[str, list[int]] = {}
    for student, (right, extra, scores) in cases.items():
        made[student] = _submission(release, answers, right, extra)
        expected[student] = scores
    lesson = (Path(root) / "notebooks" / "01_tensors.ipynb").read_bytes()
    for student, data in {
        "not_json": b"{ this is not json",
        "not_a_notebook_but_json": b'{"cells": "none"}',
        "huge": b" " * (3 * 2**20),
        "wrong_lesson": lesson,
    }.items():
        made[student] = data
        expected[student] = [0, 0, 0, 0]
    made["a_text_file.txt"] = b"my answers are in my head"
    expected["a_text_file.txt"] = [0, 0, 0, 0]  # keyed by its file name: no student id
    return made, expected


def _tree(folder: Path) -> dict[str, tuple]:
    """Every file and link under ``folder`` with its size and modification time."""
    found = {}
    for top, dirs, files in os.walk(folder):
        # left out: caches (pytest's, ruff's, Python's), git's own files, the grader's folder
        dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git", ".ruff_cache", "grading")]
        for name in files:
            path = Path(top, name)
            st = path.lstat()
            found[str(path)] = (st.st_size, st.st_mtime_ns)
    return found


def _shared_writable() -> dict[str, int]:
    found = {}
    for folder in sandbox.SHARED_WRITABLE:
        for path in Path(folder).iterdir() if Path(folder).is_dir() else []:
            try:
                found[str(path)] = path.lstat().st_uid
            except OSError:
                pass
    return found


@pytest.mark.e2e
def test_a_class_of_30_gets_the_scores_it_earned_and_changes_nothing_else(
    courses, tmp_path
) -> None:
    if sandbox.check_host():
        pytest.skip(sandbox.check_host())
    course = courses["en"]
    release = nbformat.read(_release(course), as_version=4)
    work = ROOT / "build" / "grading"
    attacked = {"root": str(ROOT), "course": str(course), "work": str(work)}
    made, expected = _class(release, _answers(course), attacked)
    assert len(made) >= 30
    submitted = tmp_path / "submitted"
    submitted.mkdir()
    for name, nb in made.items():
        path = submitted / (name if name.endswith(".txt") else f"{name}.ipynb")
        if isinstance(nb, bytes):
            path.write_bytes(nb)
        else:
            nbformat.write(nb, path)
    ours = sandbox.USER_PREFIX  # (other programs on the machine may add users meanwhile)
    users_before = {u.pw_name for u in pwd.getpwall() if u.pw_name.startswith(ours)}
    project, course_files, shared = _tree(ROOT), _tree(course), _shared_writable()
    out = tmp_path / "out"

    # 40 s a cell: a kernel's first `import torch` took over 20 s once on the shared 2-core
    # machine; 90 s a submission: too_slow finishes q3 at about 55 s, then runs out at q4
    csv_path = grade(LESSON, submitted, out, cell_timeout=40, timeout=90, max_bytes=2**21)

    print(csv_path.read_text(encoding="utf-8"))  # for the record (pytest -s)
    with csv_path.open(encoding="utf-8") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    got = {s: [int(rows[s][c]) for c in CHECKS] for s in rows}
    assert got == expected
    assert all(int(rows[s]["total"]) == sum(expected[s]) for s in expected)
    for student in ("not_json", "huge", "wrong_lesson", "a_text_file.txt", "crashes", "too_slow"):
        assert rows[student]["note"], student  # one line saying why
    assert rows["too_slow"]["note"] == "the submission's time limit (90 s) ran out"
    # the cell is named as the teacher counts code cells, the deep dives the grader left out
    # (tools/teaching/needed.py) included
    code = [c for c in release.cells if c.cell_type == "code"]
    (q2,) = [k for k, c in enumerate(code, 1) if c.metadata.get("nbgrader", {}).get("solution")
             and c.metadata["nbgrader"]["grade_id"] == "ex01_q2_answer"]  # fmt: skip
    assert rows["loops_forever"]["note"] == f"interrupted after 40 s: code cell {q2}"
    assert sorted(p.stem for p in (out / "feedback").iterdir()) == sorted(
        s for s in expected if s != "a_text_file.txt"
    )
    # nothing else changed: the project, the course, the shared folders; no user, process left
    assert _tree(ROOT) == project
    assert _tree(course) == course_files
    new = {p: uid for p, uid in _shared_writable().items() if p not in shared}
    assert [p for p in new if PROBE in p] == []
    # the grader's users are system users (useradd --system: uid below 1000) and are gone now;
    # other programs on a shared machine may leave files of their own removed users meanwhile
    known = {u.pw_uid for u in pwd.getpwall()}
    assert {p: uid for p, uid in new.items() if uid not in known and uid < 1000} == {}
    assert {u.pw_name for u in pwd.getpwall() if u.pw_name.startswith(ours)} == users_before
    assert not list(work.glob("run-*"))
    assert shutil.which("pgrep") is None or all(
        not name.startswith(sandbox.USER_PREFIX) for name in os.popen("ps -eo user=").read().split()
    )
