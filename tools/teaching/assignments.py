"""Homework from the lessons: each lesson notebook becomes an nbgrader assignment.

One source: the lesson notebooks (English ``notebooks/NN_x.ipynb``, Chinese
``notebooks/zh/NN_x.ipynb``). For each, this writes the nbgrader *source* notebook of a course
folder and lets ``nbgrader generate_assignment`` make the *release* a teacher hands out:

- the solution cells (tag ``solution``) go; a sentence of the exercises' introduction that
  points to them goes too (the release has none);
- each answer cell (tags ``exercise`` + ``answer``, metadata ``exercise: n``) becomes an
  nbgrader solution cell: its placeholder lines stay, and a ``### BEGIN SOLUTION`` ...
  ``### END SOLUTION`` region holds the lesson's solution code for exercise n, which
  ``generate_assignment`` removes (its code stub is empty, so "Restart & Run All" of the
  release completes and each check says "not done yet");
- each check cell (tags ``exercise`` + ``check``) becomes a locked autograded test cell worth
  1 point, ``grade_id`` ``exNN_qn``: the learner's ``ex.qn.check(...)`` line, then a
  ``### BEGIN HIDDEN TESTS`` region holding one inert comment that names the check and its
  arguments: the class grader judges it in its own process, on values the submission's
  kernel hands over as data (tools/teaching/judge.py), never by code run in that kernel;
- the cell importing the checks is locked; in the Chinese assignment it also sets
  ``BLITZ_LANG=zh`` (unless set), so the checks answer in Chinese wherever the release runs.

Nothing here is committed: the course folders are build output (``build/assignments/<lang>``,
this tool's own folder: it rewrites only the ``source/`` and ``release/`` folders of the
lessons it makes, never through a link). The release is
``build/assignments/<lang>/release/NN_x/NN_x.ipynb``.

    python -m tools.teaching.assignments [NN ...] [--lang en zh]   # make assignments
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from tools.lessons import LessonError, lesson_notebooks
from tools.owned import is_regular, private_folder, write_refusal

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "assignments"
LANGS = ("en", "zh")
# How each language names the solutions in prose: a sentence that does is left out.
SOLUTIONS_WORD = {"en": re.compile(r"\bsolutions?\b", re.I), "zh": re.compile("参考答案")}
SENTENCE_END = {"en": re.compile(r"(?<=[.!?])\s+"), "zh": re.compile(r"(?<=[。！？])")}
ZH_LANGUAGE_LINE = 'os.environ.setdefault("BLITZ_LANG", "zh")  # 检查用中文回答'


class AssignmentError(ValueError):
    """A lesson whose exercise section cannot become an assignment; one line."""


class NoChecks(AssertionError):
    """A lesson whose exercises have no checks yet (no check cells)."""


def _tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def lesson_number(lesson: Path) -> str:
    return lesson.name[:2]


def _nbgrader(kind: str, grade_id: str, points: int | None = None) -> dict:
    meta = {
        "grade": kind == "test",
        "solution": kind == "answer",
        "locked": kind in ("test", "locked"),
        "grade_id": grade_id,
        "schema_version": 3,
    }
    if points is not None:
        meta["points"] = points
    return meta


def _checks_module(source: str, where: str) -> tuple[str, str]:
    """(module, alias) of ``from utils.exercises import <module> as <alias>``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "utils.exercises":
            name = node.names[0]
            return name.name, name.asname or name.name
    raise AssertionError(where)


def _check_call(source: str, alias: str, where: str) -> tuple[str, list[str]]:
    """(``qn``, each argument's source) of the check cell's one line ``<alias>.qn.check(...)``."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        body = []
    call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "check"
        and isinstance(call.func.value, ast.Attribute)
        and isinstance(call.func.value.value, ast.Name)
        and call.func.value.value.id == alias
    ):
        raise AssertionError(where)
    if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        raise AssertionError(where)
    return call.func.value.attr, [ast.get_source_segment(source, a) for a in call.args]


def hidden_test(module: str, question: str, args: list[str]) -> str:
    """The grader's test: an inert marker naming the check and its arguments' expressions. The
    grader judges it in its own process (tools/teaching/judge.py); nothing in the cell runs a
    test where the submission's code could rewrite it."""
    from tools.teaching.judge import marker

    return "\n".join(
        ["### BEGIN HIDDEN TESTS", marker(module, question, args), "### END HIDDEN TESTS"]
    )


def _without_solution_sentences(text: str, lang: str) -> str:
    paragraphs = []
    for paragraph in text.split("\n\n"):
        if not SOLUTIONS_WORD[lang].search(paragraph):
            paragraphs.append(paragraph)  # as written, line breaks and all
            continue
        sentences = SENTENCE_END[lang].split(paragraph)
        kept = [s for s in sentences if not SOLUTIONS_WORD[lang].search(s)]
        if kept:
            paragraphs.append((" " if lang == "en" else "").join(kept).rstrip())
    return "\n\n".join(paragraphs)


def source_notebook(lesson: Path, lang: str):
    """The nbgrader source notebook of ``lesson`` (module docstring)."""
    nb = nbformat.read(lesson, as_version=4)
    number = lesson_number(lesson)
    where = f"{lesson}: "
    if not any({"exercise", "check"} <= _tags(c) for c in nb.cells):
        raise NoChecks(f"{where}no check cells (tags exercise + check): nothing to grade")
    solutions: dict[int, list[str]] = {}
    for cell in nb.cells:
        tags = _tags(cell)
        if cell.cell_type == "code" and "solution" in tags and "check" not in tags:
            n = cell.metadata.get("exercise")
            if not isinstance(n, int):
                raise AssertionError(f"{where}solution cell {cell.get('id')} has no `exercise: n`")
            solutions.setdefault(n, []).append(cell.source.strip("\n"))
    cells, module, alias, answers, checks = [], None, None, set(), set()
    for cell in nb.cells:
        tags = _tags(cell)
        if "solution" in tags:
            continue
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if "exercise" in tags and cell.cell_type == "markdown":
            cell.source = _without_solution_sentences(cell.source, lang)
        elif "exercise" in tags and module is None and "utils.exercises" in cell.source:
            module, alias = _checks_module(cell.source, f"{where}no checks import")
            if lang == "zh":
                cell.source = f"import os\n\n{ZH_LANGUAGE_LINE}\n{cell.source}"
            cell.metadata["nbgrader"] = _nbgrader("locked", f"ex{number}_checks")
        elif {"exercise", "answer"} <= tags:
            n = cell.metadata.get("exercise")
            if n not in solutions:
                raise AssertionError(f"{where}exercise {n}'s answer cell has no solution cell")
            body = "\n\n".join(solutions[n])
            cell.source = f"{cell.source.rstrip()}\n### BEGIN SOLUTION\n{body}\n### END SOLUTION"
            cell.metadata["nbgrader"] = _nbgrader("answer", f"ex{number}_q{n}_answer")
            answers.add(n)
        elif {"exercise", "check"} <= tags:
            n = cell.metadata.get("exercise")
            if alias is None:
                raise AssertionError(f"{where}a check cell comes before the checks' import")
            question, args = _check_call(
                cell.source,
                alias,
                f"{where}check cell {cell.get('id')} is not `{alias}.qN.check(...)`",
            )
            test = hidden_test(module, question, args)
            cell.source = f"{cell.source.rstrip()}\n{test}"
            cell.metadata["nbgrader"] = _nbgrader("test", f"ex{number}_q{n}", points=1)
            checks.add(n)
        cells.append(cell)
    if not checks:
        raise NoChecks(f"{where}no check cells (tags exercise + check): nothing to grade")
    if answers != checks:
        raise AssertionError(
            f"{where}exercises with an answer cell {sorted(answers)} "
            f"differ from those with a check cell {sorted(checks)}"
        )
    nb.cells = cells
    return nb


def course_id(lang: str) -> str:
    """The nbgrader course of the lessons in ``lang`` (also the hub's homework course)."""
    return f"pytorch-blitz-{lang}"


def config_text(lang: str, grading: str = "") -> str:
    """The course's nbgrader_config.py; ``grading``: extra lines for the grader's course."""
    return f"""# Written by tools/teaching/assignments.py (build output: rewritten on every run,
# up to its end line; lines below that are yours and are kept).
import sys

sys.path.insert(0, {str(ROOT)!r})  # tools.teaching: the grader's steps and CSV export

c = get_config()  # noqa: F821 (nbgrader's config loader defines it)
c.CourseDirectory.course_id = "{course_id(lang)}"
# The release's answer cells keep their placeholders and nothing else: Restart & Run All
# completes and every check says "not done yet".
c.ClearSolutions.code_stub = {{"python": ""}}
c.ExportApp.plugin_class = "tools.teaching.export.ScoresCsv"
{grading}"""


def lesson_for(number: str, lang: str, notebooks: Path = ROOT / "notebooks") -> Path:
    """The lesson notebook numbered ``number`` (e.g. "01") in ``lang``."""
    lessons = lesson_notebooks(notebooks)
    for lesson in lessons:
        if lesson_number(lesson) == number:
            return lesson if lang == "en" else lesson.parent / lang / lesson.name
    numbers = ", ".join(lesson_number(p) for p in lessons)
    raise LessonError(f"no lesson {number}: the lessons are {numbers}")


def nbgrader_env() -> dict[str, str]:
    """This environment with its bin folder first on PATH (nbgrader runs ``alembic``)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def nbgrader(course: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    """``nbgrader <args>`` in ``course``, as a teacher types it there. nbgrader runs the
    ``alembic`` program by name: the environment's bin folder goes first on PATH (``make``
    does not activate the environment)."""
    return subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        env=nbgrader_env(),
        capture_output=True,
        text=True,
        **kw,
    )


def failure(done: subprocess.CompletedProcess) -> str:
    """The line of nbgrader's log that says what went wrong."""
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"\w*(Error|Exception)\b", line)]
    return (errors or lines or [f"exit code {done.returncode}"])[-1]


# nbgrader's database and SQLite's journal beside it, which nbgrader writes in the course
GRADEBOOK = ("gradebook.db", "gradebook.db-journal")
RECORD = ".written-by-assignments.json"  # {path in the course: sha256} of what this tool wrote
CONFIG_END = (
    "# ---- end of what tools/teaching/assignments.py writes; "
    "your own lines go below and are kept ----"
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> list[Path]:
    """Every file, link and special file under ``folder``; a linked folder is not entered."""
    found = []
    for top, dirs, files in os.walk(folder):
        found += [Path(top, n) for n in files]
        found += [Path(top, d) for d in dirs if Path(top, d).is_symlink()]
    return sorted(found)


def _read_record(course: Path) -> dict[str, str] | None:
    path = course / RECORD
    if not is_regular(path):
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _ours(course: Path, path: Path, record: dict[str, str] | None, own: set[str]) -> bool:
    """Whether this tool wrote ``path`` and nobody changed it since. Before the record existed
    (a course written by an older version) the paths this tool writes count as its own."""
    rel = path.relative_to(course).as_posix()
    if not is_regular(path):
        return False
    if record is None:
        return rel in own
    return record.get(rel) == _digest(path)


def _plan(course: Path, names: list[str], record) -> tuple[list[Path], list[Path]]:
    """(files to remove, teacher's files kept) in the lessons' source/ and release/ folders;
    AssignmentError, before anything is removed, when a file not ours is in the way."""
    remove_, kept = [], []
    for name in names:
        own = {f"source/{name}/{name}.ipynb", f"release/{name}/{name}.ipynb"}
        for step in ("source", "release"):
            for path in _files(course / step / name):
                rel = path.relative_to(course).as_posix()
                if _ours(course, path, record, own):
                    remove_.append(path)
                elif step == "release":
                    raise AssignmentError(
                        f"{path} was not written by make assignments (or changed since), and "
                        f"nbgrader rewrites release/{name}/ whole: move it (a file in source/"
                        f"{name}/ is copied into the release); nothing written"
                    )
                elif rel in own:
                    raise AssignmentError(
                        f"{path} was changed since make assignments wrote it: move it away "
                        "(it is written from the lesson notebook); nothing written"
                    )
                else:
                    kept.append(path)
    return remove_, kept


def _config(course: Path, text: str, record) -> str | None:
    """nbgrader_config.py's new text: ``text``, then the teacher's own lines kept from the old
    file (below the end line). A file this tool cannot tell apart from a teacher's is kept
    aside first; the name of that copy, or None."""
    path = course / "nbgrader_config.py"
    if not path.exists():
        return None
    old = path.read_text(encoding="utf-8")
    ours, marker, theirs = old.partition(CONFIG_END)
    recorded = (record or {}).get("nbgrader_config.py#ours")
    if marker and (recorded is None or recorded == hashlib.sha256(ours.encode()).hexdigest()):
        return theirs.lstrip("\n")
    aside = path.with_name(f"nbgrader_config.py.kept-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(path, aside)
    return aside


def write_course(course: Path, lang: str, lessons: list[Path], grading: str = "") -> list[str]:
    """Write ``course``'s config and each lesson's source notebook, then run nbgrader's
    generate_assignment for each; the assignment names (the lessons' file stems).

    Nothing this did not write is deleted: a record (``RECORD``) names every file it wrote with
    its digest; a teacher's own file in a lesson's source/ folder stays (and nbgrader copies it
    into the release), one in the way is refused in one line before anything changes, and the
    teacher's lines below ``CONFIG_END`` in nbgrader_config.py are kept."""
    # every path this or nbgrader writes or replaces, checked before anything is removed
    # (tools/owned.py): a linked source/ or release/ would take the lesson, or lose release/
    # half-way; a linked gradebook.db (nbgrader's SQLite database) would be written through
    names = ["nbgrader_config.py", RECORD, *GRADEBOOK] + [
        f"{d}/{p.stem}" for p in lessons for d in ("source", "release")
    ]
    if problem := write_refusal(course, names):
        raise AssignmentError(problem)
    course.mkdir(parents=True, exist_ok=True)
    record = _read_record(course)
    notebooks = [(lesson, source_notebook(lesson, lang)) for lesson in lessons]
    stale, kept = _plan(course, [lesson.stem for lesson in lessons], record)
    record = dict(record or {})
    for path in kept:
        print(f"assignments: kept {path} (not written by make assignments)")
    tail = _config(course, config_text(lang, grading), record)
    if isinstance(tail, Path):
        print(
            f"assignments: {course / 'nbgrader_config.py'} was not as make assignments wrote it: "
            f"kept as {tail.name}; put your own lines below its end line"
        )
        tail = ""
    ours = config_text(lang, grading)
    (course / "nbgrader_config.py").write_text(
        f"{ours}{CONFIG_END}\n{tail or ''}", encoding="utf-8"
    )
    record["nbgrader_config.py#ours"] = hashlib.sha256(ours.encode()).hexdigest()
    for path in stale:
        path.unlink()
        record.pop(path.relative_to(course).as_posix(), None)
    names = []
    for lesson, nb in notebooks:
        name = lesson.stem
        folder = course / "source" / name
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{name}.ipynb")
        # nbgrader rewrites the release whole (--force); only files this tool wrote were there
        done = nbgrader(course, "generate_assignment", name, "--force")
        if done.returncode != 0:
            raise AssignmentError(f"nbgrader generate_assignment {name}: {failure(done)}")
        kept_here = {p for p in kept if p.is_relative_to(folder)}
        for path in [folder / f"{name}.ipynb", *_files(course / "release" / name)]:
            if path not in kept_here and is_regular(path):
                record[path.relative_to(course).as_posix()] = _digest(path)
        names.append(name)
        (course / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True), "utf-8")
    (course / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True), "utf-8")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", metavar="NN", help="lesson numbers (default: all)")
    parser.add_argument("--lang", nargs="+", choices=LANGS, default=list(LANGS))
    args = parser.parse_args(argv)
    try:
        numbers = args.lessons or [lesson_number(p) for p in lesson_notebooks()]
        for lang in args.lang:
            lessons = [lesson_for(n, lang) for n in numbers]
            if not args.lessons:  # all lessons: those whose exercises have no checks yet wait
                ready = []
                for lesson in lessons:
                    try:
                        source_notebook(lesson, lang)
                        ready.append(lesson)
                    except NoChecks:
                        print(f"{lang}: {lesson.name}: skipped, its exercises have no checks yet")
                lessons = ready
            course = OUT / lang
            if problem := write_refusal(ROOT, [course.relative_to(ROOT)]):
                raise AssignmentError(problem)
            # solutions, hidden tests and the gradebook: the teacher's alone, also where a
            # hub's students can read the checkout (TEACHING.md)
            if said := private_folder(OUT):
                print(f"assignments: {said}")
            for name in write_course(course, lang, lessons):
                release = course / "release" / name / f"{name}.ipynb"
                print(f"{lang}: {release.relative_to(ROOT)}")
    except (LessonError, AssignmentError, AssertionError) as err:
        print(f"assignments: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
