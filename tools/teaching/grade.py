"""Grade a class: a folder of submitted notebooks in, ``grades.csv`` and a feedback page per
student out (``make grade LESSON=01 SUBMISSIONS=folder``).

One ``.ipynb`` per student, named by the student's id (``alice.ipynb``: letters, digits,
``-`` and ``_``). The grader builds a private nbgrader course for the lesson
(tools/teaching/assignments.py: the same source the release came from), then for each
submission runs ``nbgrader autograde`` (forked from a Python that has imported nbgrader and
PyTorch once: tools/teaching/forked.py; its kernel isolated and bounded:
tools/teaching/sandbox.py; the lesson's deep dives that no later cell needs are left out:
tools/teaching/needed.py), then ``nbgrader generate_feedback`` and ``nbgrader export``
(tools/teaching/export.py). The verdicts are computed here, not in the student's kernel
(tools/teaching/judge.py): after each check cell, the kernel hands over the values the check
names as data (never a pickle this process unpickles) and the student's functions are called
with data; the lesson's own judge decides in this process, and its points replace whatever
nbgrader read from the cells (``record_verdicts``). So a point never depends on what a cell
printed, wrote to stderr or raised, and code that rewrites ``print``, the import system,
IPython's input transformers or the checks changes only its own answers. Not guaranteed: an
answer is judged on the values the kernel sends, however it made them (a function's inputs
are drawn at grading time, so its right outputs take a right function; a hard-coded right
tensor is as good as a computed one). Out, in ``--out`` (default ``build/grades/NN_x[-zh]``):
``grades.csv`` (one row per student, one column per exercise, the total, a note) and
``feedback/<student>.html``. ``grades.csv`` is the latest grade of every student across runs:
a run (a late submission, a regrade) adds or updates its students' rows, every other row stays,
and one line per student says what changed. Each run also keeps its own record,
``runs/<UTC time>/``: that run's ``grades.csv``, ``grade.log`` (what it printed), its feedback
pages and nbgrader's log of each submission (``logs/<student>.log``); nothing there is ever
rewritten. Every file in the submissions folder gets a row: a file that is not a notebook,
not JSON, too large (checked before it is read), not this lesson's assignment, or whose name is
no student id gets its row of zeros (keyed by its file name when that is no student id) with
one line saying why, and the run goes on. Hidden files (``.name``) are skipped with a line.

Submissions are untrusted. What protects the machine, the other submissions and the
gradebook: each kernel runs as its own throw-away Unix user, in its own folder, in fresh
mount, PID, network and IPC namespaces where the course, the submissions and the output are
out of sight and ``/tmp`` is private; each cell and each submission has a time limit; the
user, its folder and its processes are removed afterwards (tools/teaching/sandbox.py says
how, and what it does not protect). Linux and root only.

    python -m tools.teaching.grade --lesson 01 --submissions SUBMITTED [--lang zh]
        [--out FOLDER] [--cell-timeout 120] [--timeout 900] [--max-mb 20] [--memory-gb 16]
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor

from tools.conventions import OPTIONAL
from tools.lessons import LessonError
from tools.owned import (
    is_regular,
    linked_on_the_way,
    private_folder,
    remove,
    within,
    write_refusal,
)
from tools.teaching import classroom, forked, sandbox
from tools.teaching.assignments import (
    ROOT,
    AssignmentError,
    failure,
    lesson_for,
    nbgrader,
    nbgrader_env,
    write_course,
)
from tools.teaching.words import in_lang
from utils import data
from utils.cli import number

WORK = "build/grading"  # this tool's own folder: one run-* folder per run, removed after it
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
SOLUTION_ID = "_lesson_solutions"  # no student id: they start with a letter or digit
GRACE_S = 120  # beyond the submission's limit before nbgrader itself is stopped


# nbgrader's autograde steps: JudgedExecute runs the submission and judges each check outside
# its kernel (tools/teaching/judge.py); the points nbgrader saves are then replaced by the
# judge's own (record_verdicts). StderrIsOutput keeps stderr in the feedback as plain output.
AUTOGRADE_STEPS = """from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades,
)
from tools.teaching.grade import StderrIsOutput
from tools.teaching.judge import JudgedExecute

c.Autograde.autograde_preprocessors = [
    JudgedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, StderrIsOutput,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]
"""


class StderrIsOutput(Preprocessor):
    """nbgrader gives a test cell no points when it wrote to stderr, even when its test passed:
    a progress bar (tqdm), a warning or a log line from the student's function would cost the
    point. A check's verdict is whether it raised (an ``error`` output), so stderr is shown as
    ordinary output instead: kept in the feedback, never read as a verdict."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and (cell.metadata.get("nbgrader") or {}).get("grade"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream" and output.get("name") == "stderr":
                    output["name"] = "stdout"
        return cell, resources


class Refused(Exception):
    """A submission that is not graded; the message is its one line."""


def read_submission(path: Path, max_bytes: int, number_: str, lang: str = "en"):
    """The notebook in ``path``, or :class:`Refused` saying why it cannot be graded."""
    if not path.name.lower().endswith(".ipynb"):
        raise Refused(in_lang(lang, "not a notebook: {name} is not an .ipynb file", name=path.name))
    if not is_regular(path):
        raise Refused(
            in_lang(
                lang,
                "not a plain file: {name} (a link, folder or device is not read)",
                name=path.name,
            )
        )
    size = path.lstat().st_size
    if size > max_bytes:
        raise Refused(
            in_lang(
                lang,
                "too large: {size:.1f} MB, more than {most:g} MB",
                size=size / 2**20,
                most=max_bytes / 2**20,
            )
        )
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)  # bounded even if the file grew since
    if len(data) > max_bytes:
        raise Refused(in_lang(lang, "too large: more than {most:g} MB", most=max_bytes / 2**20))
    try:
        text = data.decode("utf-8")
        parsed = json.loads(text)
    except UnicodeDecodeError:
        raise Refused(in_lang(lang, "not a notebook: the file is not UTF-8 text")) from None
    except (json.JSONDecodeError, RecursionError) as err:
        where = (
            in_lang(lang, " (line {line}, column {column})", line=err.lineno, column=err.colno)
            if hasattr(err, "lineno")
            else ""
        )
        raise Refused(
            in_lang(lang, "not a notebook: the file is not valid JSON{where}", where=where)
        ) from None
    if not (
        isinstance(parsed, dict)
        and isinstance(parsed.get("nbformat"), int)
        and isinstance(parsed.get("cells"), list)
    ):
        raise Refused(
            in_lang(lang, "not a Jupyter notebook: JSON without a notebook's version and cells")
        )
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # nbformat's validation errors have many types
        first = str(err).strip().splitlines()[0][:160] if str(err).strip() else type(err).__name__
        raise Refused(in_lang(lang, "not a valid Jupyter notebook: {first}", first=first)) from None
    ids = {(cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") for cell in nb.cells}
    if not any(isinstance(i, str) and i.startswith(f"ex{number_}_q") for i in ids):
        raise Refused(
            in_lang(
                lang,
                "not lesson {n}'s assignment: none of its check cells (ex{n}_q1, ...) is in it",
                n=number_,
            )
        )
    return nb


# A feedback page shows the student's notebook: its markdown and HTML outputs are the
# student's, so no script of it may run where a teacher or a student opens it (no script, no
# request out, no form sent: styles and inline images only).
FEEDBACK_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "form-action 'none'; base-uri 'none'"
)
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{FEEDBACK_CSP}">'
HEAD = re.compile(r"<head(\s[^>]*)?>", re.I)


def safe_page(page: str) -> str:
    """``page`` with the policy as the first thing in its <head> (a policy applies only to
    what follows it); a page without a <head> (never nbgrader's) is refused."""
    found = HEAD.search(page)
    if found is None:
        raise AssignmentError("a feedback page without <head>: not written")
    return page[: found.end()] + CSP_META + page[found.end() :]


def _feedback_page(student: str, note: str) -> str:
    return safe_page(
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        f"{html.escape(student)}</title></head><body><p>{html.escape(note)}</p></body></html>\n"
    )


def _sweep(ledger: Path, log) -> None:
    """Remove every user the ledger names that still exists (a run that was cut short)."""
    if ledger.exists():
        for name in ledger.read_text(encoding="ascii").split():
            sandbox.remove_user(name, log)


FORMULA_START = ("=", "+", "-", "@")  # a spreadsheet would run such a cell as a formula


def row_key(name: str) -> str:
    """The grades.csv key of a file whose name is no student id: its name, written as Python's
    ``ascii()`` when a spreadsheet would misread it (a control character, a formula start)."""
    if name.startswith(FORMULA_START) or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        return ascii(name)
    return name


# what a run writes or replaces in --out (feedback/<student>.html too, see _output_refusal)
OUTPUT_NAMES = ("grades.csv", ".grades.csv.part", "feedback", "runs")


def _output_refusal(out: Path, names) -> str | None:
    """tools/owned.py's rule for ``names`` in ``out``, and (inside the checkout) for the way to
    ``out`` itself, such as a linked ``build/``."""
    if (link := linked_on_the_way(ROOT, out) or (out if out.is_symlink() else None)) is not None:
        return f"{link} is a link: the grader writes nothing through it"
    return write_refusal(out, names)


def refuse_linked_output(out: Path) -> None:
    """The grader writes only inside ``out``, never through a link (tools/owned.py's rule): a
    linked ``grades.csv`` (or its ``.part``), ``feedback/``, a page in it, or ``runs/``, or a
    link on the way to ``out`` inside the checkout, is refused before anything is graded."""
    pages = []
    if (out / "feedback").is_dir() and not (out / "feedback").is_symlink():
        pages = [f"feedback/{p.name}" for p in (out / "feedback").iterdir()]
    if why := _output_refusal(out, [*OUTPUT_NAMES, *pages]):
        raise AssignmentError(why)


def new_record(out: Path) -> Path:
    """A fresh ``out/runs/<UTC time>`` folder for this run's record (never an existing one)."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H%M%SZ", time.gmtime())
    for n in range(1, 1000):
        record = runs / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            record.mkdir()
            return record
        except FileExistsError:
            continue
    raise AssignmentError(f"{runs}: no free folder name for {stamp}")


def _read_rows(path: Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = {row["student"]: row for row in reader if row.get("student")}
        return list(reader.fieldnames or []), rows


def _points(row: dict[str, str]) -> str:
    return row.get("total") or "0"


def merge(latest: Path, run_csv: Path, say, lang: str = "en") -> None:
    """Fold this run's rows (``run_csv``) into ``latest``: its students' rows added or updated,
    every other row kept, one line per student of this run saying what changed."""
    fields, new = _read_rows(run_csv)
    old_fields, old = _read_rows(latest) if latest.exists() else ([], {})
    if old_fields and "student" not in old_fields:
        raise AssignmentError(f"{latest} has no student column: not a grades.csv, left as it is")
    # this run's columns first; a column only earlier runs had stays, before the total
    extra = [c for c in old_fields if c not in fields]
    columns = fields[:-2] + extra + fields[-2:] if fields[-2:] == ["total", "note"] else fields
    columns += [c for c in extra if c not in columns]
    for student, row in sorted(new.items()):
        before = old.get(student)
        if before is None:
            say(
                in_lang(
                    lang, "{student}: added ({points} points)", student=student, points=_points(row)
                )
            )
        elif all(before.get(c, "") == row.get(c, "") for c in fields):
            say(
                in_lang(
                    lang,
                    "{student}: unchanged ({points} points)",
                    student=student,
                    points=_points(row),
                )
            )
        elif _points(before) != _points(row):
            say(
                in_lang(
                    lang,
                    "{student}: updated from {before} to {points} points",
                    student=student,
                    before=_points(before),
                    points=_points(row),
                )
            )
        else:
            say(
                in_lang(
                    lang,
                    "{student}: updated, still {points} points (a score or the note changed)",
                    student=student,
                    points=_points(row),
                )
            )
        old[student] = row
    part = latest.with_name(f".{latest.name}.part")
    with part.open("w", encoding="utf-8", newline="") as f:
        out = csv.DictWriter(f, columns, restval="", extrasaction="ignore")
        out.writeheader()
        for student in sorted(old):
            out.writerow(old[student])
    os.replace(part, latest)  # whole or not at all: an interrupted run leaves the old file


class _Log:
    say = None  # the run's own printer, once its record is open

    def warning(self, fmt: str, *args) -> None:
        if self.say:
            self.say(fmt % args, err=True)
        else:
            print("grade: " + fmt % args, file=sys.stderr)


def grade(
    number_: str,
    submissions: Path,
    out: Path,
    lang: str = "en",
    cell_timeout: int = 120,
    timeout: int = 900,
    max_bytes: int = 20 * 2**20,
    notebooks: Path = ROOT / "notebooks",
    memory_bytes: int = 16 * 2**30,
    jobs: int = 1,
) -> Path:
    """Grade ``submissions`` against lesson ``number_`` of ``notebooks``, ``jobs`` submissions
    side by side; the path of grades.csv.

    Side by side, each job is an nbgrader course of its own (its gradebook, its sandbox users'
    ledger): no two processes write one gradebook. Their exports are joined into one grades.csv.
    """
    lesson = lesson_for(number_, lang, notebooks)
    name = lesson.stem
    if not submissions.is_dir():
        raise AssignmentError(f"{submissions} is not a folder of submitted notebooks")
    refuse_linked_output(out)
    work_root = within(ROOT, WORK)
    if work_root is None:
        raise AssignmentError(f"{WORK} is reached through a link: the grader does not write there")
    work_root.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=work_root))
    os.chmod(run, 0o711)  # a kernel's user may pass through to its own folder, not list
    reports, accepted = run / "reports", run / "accepted"
    reports.mkdir(mode=0o700)
    accepted.mkdir(mode=0o700)
    log = _Log()
    kernel_env = [
        f"BLITZ_LANG={lang}",
        "CUDA_VISIBLE_DEVICES=",  # graded on the CPU: same numbers on every machine
        # the cores shared among the submissions side by side: with more threads than cores
        # OpenMP's threads wait on each other (lesson 02 at --jobs 2 on 2 cores, measured:
        # 11 to 22 s a submission with 2 threads each, 5.3 to 6 s with 1)
        f"OMP_NUM_THREADS={max(1, (classroom.cores() or 1) // max(1, jobs))}",
        "PYTHONDONTWRITEBYTECODE=1",
    ]
    # Notebook 04 reads CIFAR-10 where the teacher's environment says (utils/data.py; make grade
    # passes the subset beside the checkout): the kernel has no network to download it.
    for setting in (data.CHOICE_ENV, data.SUBSET_ENV, data.ROOT_ENV):
        if value := os.environ.get(setting):
            path_like = setting != data.CHOICE_ENV  # the kernel runs in its own folder
            kernel_env.append(f"{setting}={Path(value).resolve() if path_like else value}")
    jobs = max(1, jobs)
    courses = [run / f"course-{k}" for k in range(jobs)]
    hidden = [str(p) for p in (*courses, reports, accepted, submissions.resolve(), out.resolve())]

    # the lesson's deep dives, which a submission's grading leaves out when no later cell
    # needs them (tools/teaching/needed.py)
    deep_dives = [
        c.get("id")
        for c in nbformat.read(lesson, as_version=4).cells
        if OPTIONAL in c.metadata.get("tags", [])
    ]

    def grading(k: int) -> str:
        return f"""
# The grader's course (tools/teaching/grade.py): each submission's kernel sandboxed and bounded.
{AUTOGRADE_STEPS}
c.SandboxedExecute.timeout = {cell_timeout}
c.SandboxedExecute.submission_timeout = {timeout}
c.SandboxedExecute.report_dir = {str(reports)!r}
c.JudgedExecute.verdicts_dir = {str(reports)!r}
c.SandboxedExecute.lang = {lang!r}
c.JudgedExecute.request_timeout = {cell_timeout}
c.JudgedExecute.deep_dives = {deep_dives!r}
c.SandboxKernelManager.work_root = {str(run / f"sandboxes-{k}")!r}
c.SandboxKernelManager.ledger = {str(run / f"users-{k}")!r}
c.SandboxKernelManager.hidden_paths = {hidden!r}
c.SandboxKernelManager.kernel_env = {kernel_env!r}
c.SandboxKernelManager.memory = {memory_bytes}
"""

    notes: dict[str, str] = {}
    said = None
    lock = threading.Lock()  # one line at a time from the jobs

    def say(line: str, err: bool = False) -> None:
        with lock:
            print(f"grade: {line}", file=sys.stderr if err else sys.stdout, flush=True)
            said.write(line + "\n")
            said.flush()

    try:
        # every student's grades and feedback: the teacher's alone (TEACHING.md)
        if narrowed := private_folder(out):
            print(f"grade: {narrowed}")
        record = new_record(out)  # this run's own record, beside the latest grades.csv
        logs = record / "logs"  # nbgrader's own log of each submission, for a surprising score
        logs.mkdir()
        said = (record / "grade.log").open("a", encoding="utf-8")
        log.say = say
        side = in_lang(lang, ", {jobs} side by side", jobs=jobs) if jobs > 1 else ""
        say(
            in_lang(
                lang,
                "run {record}: lesson {n} ({lang}), submissions from {folder}{side}",
                record=record.name,
                n=number_,
                lang=lang,
                folder=submissions,
                side=side,
            )
        )
        graded = []
        files = sorted(submissions.iterdir())
        notebooks_of = {p.name[: -len(".ipynb")] for p in files if p.name.endswith(".ipynb")}
        for path in files:
            if path.name.startswith("."):
                say(in_lang(lang, "ignored {name!r} (a hidden file)", name=path.name))
                continue
            # a student's row is theirs alone: any other file (carol.html beside carol.ipynb)
            # gets a row keyed by its whole file name
            student = path.name[: -len(".ipynb")] if path.name.endswith(".ipynb") else None
            if student is None or not STUDENT_ID.fullmatch(student):
                key = row_key(path.name)
                if student is None and not path.name.lower().endswith(".ipynb"):
                    why = in_lang(
                        lang, "not a notebook: {name} is not an .ipynb file", name=path.name
                    )
                    stem = path.name.rsplit(".", 1)[0]
                    if stem in notebooks_of:
                        why += in_lang(
                            lang, " (student {stem} is graded from {stem}.ipynb)", stem=stem
                        )
                else:
                    why = in_lang(
                        lang,
                        "not graded: a student id (the file name before .ipynb) is letters, "
                        "digits, - and _, starting with a letter or digit; rename the file",
                    )
                notes[key] = why
                say(f"{key}: {why}")
                continue
            try:
                nb = read_submission(path, max_bytes, number_, lang)
            except Refused as why:
                notes[student] = str(why)
                say(f"{student}: {why}")
                continue
            nbformat.write(nb, accepted / f"{student}.ipynb")  # as read: later changes unseen
            graded.append(student)

        # no more courses than submissions: each costs nbgrader's generate_assignment
        courses = courses[: max(1, min(jobs, len(graded)))]
        share = {course: graded[k :: len(courses)] for k, course in enumerate(courses)}
        course_of = {s: course for course, mine in share.items() for s in mine}

        def set_up(k: int) -> None:
            course = courses[k]
            course.mkdir(mode=0o700)
            (run / f"sandboxes-{k}").mkdir(mode=0o711)
            write_course(course, lang, [lesson], grading(k))
            for student in share[course]:
                folder = course / "submitted" / student / name
                folder.mkdir(parents=True)
                os.replace(accepted / f"{student}.ipynb", folder / f"{name}.ipynb")

        # nbgrader's steps around the grading, course by course, side by side as the grading
        with ThreadPoolExecutor(len(courses)) as pool:
            list(pool.map(set_up, range(len(courses))))

        def autograde(k: int, student: str) -> str | None:
            course = courses[k]
            note = _autograde(course, name, student, timeout + GRACE_S, logs, memory_bytes, lang)
            _sweep(run / f"users-{k}", log)
            record_verdicts(course, name, student, reports / f"{student}.verdicts.json")
            report = reports / f"{student}.txt"
            if note is None and report.exists():
                note = report.read_text(encoding="utf-8")
            return note

        # The lesson's own solutions first, in this very configuration (limits, data): if they
        # lose a point, every student would too, through no fault of theirs
        first = courses[0]
        if graded:
            started = time.monotonic()
            folder = first / "submitted" / SOLUTION_ID / name
            folder.mkdir(parents=True)
            shutil.copyfile(first / "source" / name / f"{name}.ipynb", folder / f"{name}.ipynb")
            lost = solutions_lost(first, name, autograde(0, SOLUTION_ID))
            if lost:
                limits = (
                    f"--memory-gb {memory_bytes / 2**30:g}, --cell-timeout {cell_timeout}, "
                    f"--timeout {timeout}"
                )
                raise AssignmentError(
                    f"the lesson's own solutions lose points in this configuration ({limits}), "
                    f"so nobody was graded: {lost} (see {logs / SOLUTION_ID}.log)"
                )
            say(
                in_lang(
                    lang,
                    "the lesson's own solutions: full marks in {s:.1f} s",
                    s=time.monotonic() - started,
                )
            )

        def grade_share(k: int) -> None:
            for student in share[courses[k]]:
                started = time.monotonic()
                note = autograde(k, student)
                if note:
                    notes[student] = note
                took = time.monotonic() - started
                say(
                    in_lang(lang, "{student}: graded in {s:.1f} s", student=student, s=took)
                    + (f" ({note})" if note else "")
                )

        with ThreadPoolExecutor(len(courses)) as pool:
            for done_ in [pool.submit(grade_share, k) for k in range(len(courses))]:
                done_.result()  # a job's error stops the run, as it would one at a time

        # each course's export: its own students, and (the first) every file not graded
        def export(k: int) -> list[list[str]]:
            course = courses[k]
            mine = {s: n for s, n in notes.items() if course_of.get(s, first) == course}
            (run / f"notes-{k}.json").write_text(json.dumps(mine), encoding="utf-8")
            if share[course]:
                done = nbgrader(course, "generate_feedback", name, "--force")
                if done.returncode != 0:
                    say(f"nbgrader generate_feedback: {failure(done)}", err=True)
            part = run / f"grades-{k}.csv"
            done = nbgrader(
                course,
                "export",
                f"--to={part}",
                f"--ScoresCsv.notes={run / f'notes-{k}.json'}",
                f"--assignment={name}",
            )
            if done.returncode != 0:
                raise AssignmentError(f"nbgrader export: {failure(done)}")
            with part.open(encoding="utf-8", newline="") as f:
                return list(csv.reader(f))

        with ThreadPoolExecutor(len(courses)) as pool:
            parts = list(pool.map(export, range(len(courses))))
        header = parts[0][0]
        rows = [row for part in parts for row in part[1:]]
        run_csv = record / "grades.csv"
        with run_csv.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(sorted(rows, key=lambda row: row[0]))
        feedback, kept = out / "feedback", record / "feedback"
        feedback.mkdir(exist_ok=True)
        kept.mkdir()
        # a page per student id; a file refused for its name has its row, and no page
        pages = [s for s in sorted(set(graded) | set(notes)) if STUDENT_ID.fullmatch(s)]
        for student in pages:
            page = course_of.get(student, first) / "feedback" / student / name / f"{name}.html"
            target = kept / f"{student}.html"
            if page.exists():
                target.write_text(safe_page(page.read_text(encoding="utf-8")), encoding="utf-8")
            else:
                target.write_text(_feedback_page(student, notes.get(student, "not graded")))
            # checked again at the write: a link made while the class was graded
            if why := _output_refusal(out, [f"feedback/{student}.html"]):
                say(f"{student}: feedback not copied: {why} (the page is in {target})", err=True)
                continue
            shutil.copyfile(target, feedback / f"{student}.html")
        csv_path = out / "grades.csv"
        if why := _output_refusal(out, OUTPUT_NAMES):
            raise AssignmentError(f"{why}; this run's grades are in {run_csv}")
        merge(csv_path, run_csv, say, lang)
        say(in_lang(lang, "this run's record: {record}", record=record))
        return csv_path
    finally:
        if said:
            said.close()
        for k in range(jobs):
            _sweep(run / f"users-{k}", log)
        remove(within(work_root, run.name))


def record_verdicts(course: Path, name: str, student: str, verdicts: Path) -> None:
    """The judge's points (``verdicts``: {grade_id: points}, written by
    tools/teaching/judge.py) in place of whatever nbgrader saved for ``student``: a check
    without a verdict (not run, the kernel gone) scores 0."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        points = json.loads(verdicts.read_text(encoding="utf-8")) if verdicts.exists() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        points = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        try:
            graded = gradebook.find_submission_notebook(name, name, student)
        except MissingEntry:
            return  # nbgrader saved nothing: the export gives 0 points
        for grade_ in graded.grades:
            given = points.get(grade_.name, 0) if isinstance(points, dict) else 0
            most = grade_.max_score or 0
            ok = isinstance(given, (int, float)) and not isinstance(given, bool)
            grade_.auto_score = float(min(max(given, 0), most)) if ok else 0.0
        gradebook.db.commit()


def solutions_lost(course: Path, name: str, note: str | None) -> str:
    """Which exercises the lesson's own solutions (student ``SOLUTION_ID``) lost, and why, in
    one line; "" when they got full marks."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        checks = sorted(
            (c.name, c.max_score) for c in gradebook.find_assignment(name).notebooks[0].grade_cells
        )
        try:
            graded = gradebook.find_submission_notebook(name, name, SOLUTION_ID)
            scores = {g.name: g.score or 0.0 for g in graded.grades}
        except MissingEntry:
            scores = {}
    if scores and all(scores.get(check, 0.0) >= most for check, most in checks):
        return ""
    path = course / "autograded" / SOLUTION_ID / name / f"{name}.ipynb"
    errors = {}
    if path.exists():
        for cell in nbformat.read(path, as_version=4).cells:
            grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    said = f"{output.get('ename')}: {output.get('evalue', '')}".strip()
                    errors[grade_id] = said.splitlines()[0][:200]
    lost: dict[str, list[str]] = {}  # why: the exercises lost for it
    for check, most in checks:
        if scores.get(check, 0.0) < most:
            lost.setdefault(errors.get(check) or note or "not run", []).append(check)
    return "; ".join(f"{', '.join(checks_)}: {why}" for why, checks_ in lost.items())


def in_a_teachers_words(said: str, memory_bytes: int, log_name: str) -> str:
    """What nbgrader's failed run means, as a teacher reads it: which limit, what to change;
    nbgrader's own last error line only where no known cause fits."""
    memory = f"--memory-gb {memory_bytes / 2**30:g}"
    if "Kernel died before replying to kernel_info" in said:
        return (
            "not graded: the submission's Python did not start (with " + memory + " the kernel "
            f"could not even load; raise it, or read {log_name})"
        )
    if re.search(r"DeadKernelError|Kernel died|kernel (?:has )?died", said):
        return (
            "not graded: the submission's Python stopped while it ran (a cell used more than "
            f"{memory} of memory, or the code ended its own process; see {log_name})"
        )
    if re.search(r"AF_UNIX path too long|File name too long", said):
        return f"not graded: a socket path was too long on this machine (see {log_name})"
    done = subprocess.CompletedProcess([], 1, "", said)
    return f"nbgrader could not grade it: {failure(done)} (see {log_name})"


def _autograde(
    course: Path,
    name: str,
    student: str,
    limit_s: int,
    logs: Path,
    memory_bytes: int,
    lang: str = "en",
) -> str | None:
    """Run nbgrader autograde for one student (forked: tools/teaching/forked.py), its log in
    ``logs``; a note when nbgrader itself failed."""
    log = logs / f"{student}.log"
    log.write_bytes(b"")
    argv = ["autograde", name, f"--student={student}", "--force"]
    code = forked.run(course, argv, nbgrader_env(), log, limit_s)
    if code is None:
        return in_lang(lang, "the grader stopped after {s} s: not graded", s=limit_s)
    if code != 0:
        said = log.read_bytes().decode("utf-8", "replace")
        log_name = f"runs/{logs.parent.name}/logs/{student}.log"  # beside grades.csv
        return in_a_teachers_words(said, memory_bytes, log_name)
    return None


def default_jobs(memory_bytes: int) -> int:
    """Submissions side by side: one a CPU core this process may use, no more than the
    machine's memory holds at ``memory_bytes`` each (each submission's cap), at least one;
    a line when memory is what limits it."""
    cores = classroom.cores() or 1
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    jobs = max(1, min(cores, total // memory_bytes))
    if jobs < cores:
        print(
            f"grade: {jobs} submission(s) at a time, not {cores} (one a core): at "
            f"{memory_bytes / 2**30:g} GB each, more would not fit this machine's "
            f"{total / 2**30:.1f} GB (--memory-gb lowers the cap, --jobs sets the number)"
        )
    return jobs


def _folder_given(text: str) -> Path:
    # `make grade` without SUBMISSIONS passes "": that is no folder, not the current one
    if not text.strip():
        raise argparse.ArgumentTypeError("the folder of submitted notebooks, e.g. SUBMISSIONS=in")
    return Path(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Each check is judged in the grader's own process, on values the submission's "
        "kernel hands over as data (code in a submission cannot change a verdict, only its own "
        "answers); a point never depends on a cell's output. See TEACHING.md.",
    )
    parser.add_argument("--lesson", required=True, metavar="NN", help="lesson number, e.g. 01")
    parser.add_argument("--submissions", required=True, type=_folder_given, metavar="FOLDER")
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FOLDER",
        help="where grades.csv and feedback/ go (default build/grades/NN_x[-zh])",
    )
    parser.add_argument(
        "--cell-timeout",
        type=number(int, least=1, most=3600),
        default=120,
        metavar="S",
        help="seconds for one cell, then it is interrupted",
    )
    parser.add_argument(
        "--timeout",
        type=number(int, least=1, most=86400),
        default=900,
        metavar="S",
        help="seconds for a whole submission",
    )
    parser.add_argument(
        "--max-mb",
        type=number(float, above=0, most=1024),
        default=20,
        metavar="MB",
        help="largest submission read",
    )
    parser.add_argument(
        "--jobs",
        type=number(int, least=1, most=64),
        metavar="N",
        help="submissions graded side by side (default: one a CPU core, as many as the "
        "machine's memory holds at --memory-gb each)",
    )
    parser.add_argument(
        "--memory-gb",
        type=number(float, above=0, most=1024),
        default=16,
        metavar="GB",
        help="memory of a submission, all its processes together (a cgroup; no swap)",
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"\d\d", args.lesson):
        parser.error(f"argument --lesson: a two-digit lesson number such as 01 (not {args.lesson})")
    why = sandbox.check_host()
    if why:
        print(f"grade: {why}", file=sys.stderr)
        return 2
    try:
        lesson = lesson_for(args.lesson, args.lang)
        out = args.out or ROOT / "build" / "grades" / (
            lesson.stem + ("" if args.lang == "en" else f"-{args.lang}")
        )
        memory_bytes = int(args.memory_gb * 2**30)
        jobs = args.jobs or default_jobs(memory_bytes)
        started = time.monotonic()
        csv = grade(
            args.lesson,
            args.submissions,
            out,
            args.lang,
            args.cell_timeout,
            args.timeout,
            int(args.max_mb * 2**20),
            memory_bytes=memory_bytes,
            jobs=jobs,
        )
    except (LessonError, AssignmentError, AssertionError) as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    took = time.monotonic() - started
    print("grade: " + in_lang(args.lang, "{csv} and {feedback}/ written in {s:.0f} s", csv=csv,
                           feedback=csv.parent / "feedback", s=took))  # fmt: skip
    print(csv.read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
