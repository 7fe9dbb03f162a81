"""The lessons' conventions, defined once: the cell tags, each language's words, and the
cells of an exercise section (:func:`exercise_problems`).

A language is one file, ``tools/publishing/templates/strings/<code>.json``: the site's interface
words, and under ``"lesson"`` what marks a lesson in that language (the deep-dive heading's
first word, the header's field labels, the learner-time and run-time lines that
``tools/authoring/lesson_size.py write`` stamps, how a duration is written, the page's ``<html
lang>``). English is the source; every other language also has its catalogs in
``translations/<code>/`` (tools/authoring/i18n.py). The site (tools/publishing/build_site.py),
the lesson sizes
(tools/authoring/lesson_size.py) and the tests read these; adding a language is its catalogs plus
its strings file (tests/test_conventions.py builds a fake third one).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import nbformat

# Cell tags (Lab: the property inspector's "Cell Tags"). A cell with none of the first three
# is on the core path; `save` copies a cell into utils (tools/authoring/save_cells.py).
OPTIONAL, EXERCISE, SOLUTION, SAVE = "optional", "exercise", "solution", "save"
# An exercise that answers back (CONTRIBUTING.md, "Exercises that answer back"): the learner's
# `answer` cell and the `check` cell right under it, in the exercise part; the solution's code
# and its `check` in the solution part. Each of these code cells names its exercise in its
# metadata, ``"exercise": n``.
ANSWER, CHECK = "answer", "check"
NUMBER = "exercise"  # the metadata key
# A check cell holds one call and nothing else: `ex.q2.check(X, shares_memory)`.
_CHECK_CALL = re.compile(r"\w+\.q(\d+)\.check\([^\n]*\)")
# The question above an answer cell opens with a third-level heading that holds its number,
# in any language ("### Exercise 2. Images from NumPy", "### 练习 2. ...").
_QUESTION = re.compile(r"###\s+\D*?(\d+)\b")
SOURCE = "en"  # the language the notebooks are written in
STRINGS_DIR = Path(__file__).resolve().parent / "publishing" / "templates" / "strings"


@functools.cache
def _text(path: Path) -> str:
    # read once per process: lesson_size formats a duration, build_site a page, many times
    return path.read_text(encoding="utf-8")


def strings(code: str) -> dict:
    """Language ``code``'s words (its whole strings file), a fresh dict the caller may change."""
    path = STRINGS_DIR / f"{code}.json"
    if not path.is_file():
        raise KeyError(f"no strings file for language {code!r}: {path}")
    return json.loads(_text(path))


def lesson_words(code: str) -> dict:
    """What marks a lesson in language ``code`` (the strings file's ``"lesson"`` part)."""
    return strings(code)["lesson"]


def codes() -> list[str]:
    """Every language with a strings file, the source first."""
    others = sorted(p.stem for p in STRINGS_DIR.glob("*.json") if p.stem != SOURCE)
    return [SOURCE, *others]


def _tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def answer_numbers(nb: nbformat.NotebookNode) -> list[int]:
    """The exercises a lesson asks for: the numbers of its answer cells, in order."""
    return [
        c.metadata.get(NUMBER)
        for c in nb.cells
        if c.cell_type == "code" and {ANSWER, EXERCISE} <= _tags(c)
    ]


def exercise_problems(nb: nbformat.NotebookNode) -> list[str]:
    """What breaks the exercise convention in lesson ``nb`` (one line each, naming the cell):
    under each question (a ``###`` heading with its number) an ``answer`` code cell, then its
    ``check`` cell, in the exercise part; in the solution part each exercise's solution code,
    then a ``check`` cell with the same call; each of these code cells carries ``"exercise":
    n`` in its metadata; exercises numbered 1, 2, ... A lesson with no cell tagged answer
    or check (its exercises do not answer back yet) has nothing to report."""
    if not any(_tags(c) & {ANSWER, CHECK} for c in nb.cells):
        return []  # the format before exercises answered back: nothing to hold it to
    found: list[str] = []
    answers: dict[int, list[int]] = {}
    checks: dict[str, dict[int, list[int]]] = {EXERCISE: {}, SOLUTION: {}}
    solutions: dict[int, list[int]] = {}
    for i, cell in enumerate(nb.cells):
        tags, where = _tags(cell), f"cell {i} ({cell.get('id', 'no id')})"
        part = EXERCISE if EXERCISE in tags else SOLUTION if SOLUTION in tags else None
        role = ANSWER if ANSWER in tags else CHECK if CHECK in tags else None
        if ANSWER in tags and CHECK in tags:
            found.append(f"{where}: tagged both {ANSWER} and {CHECK}; a cell has one role")
            continue
        if role and (part is None or (role == ANSWER and part != EXERCISE)):
            allowed = EXERCISE if role == ANSWER else f"{EXERCISE} or {SOLUTION}"
            found.append(f"{where}: tagged {role} outside the {allowed} part; tag it {allowed}")
            continue
        if role and cell.cell_type != "code":
            found.append(f"{where}: a {role} cell must be a code cell")
            continue
        solution_code = part == SOLUTION and cell.cell_type == "code" and role is None
        if not (role or solution_code):
            continue
        n = cell.metadata.get(NUMBER)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            what = role or "solution code"
            found.append(
                f"{where}: a {what} cell needs its exercise's number in its metadata, "
                f'"{NUMBER}": n'
            )
            continue
        if role == ANSWER:
            answers.setdefault(n, []).append(i)
            before = nb.cells[i - 1] if i else None
            heading = _QUESTION.match(before.source) if before is not None else None
            if (
                before is None
                or before.cell_type != "markdown"
                or EXERCISE not in _tags(before)
                or not heading
                or int(heading.group(1)) != n
            ):
                found.append(
                    f"{where}: the answer cell of exercise {n} must follow its question, a "
                    f"markdown cell tagged {EXERCISE} that opens with a ### heading holding {n}"
                )
        elif role == CHECK:
            checks[part].setdefault(n, []).append(i)
            call = _CHECK_CALL.fullmatch(cell.source.strip())
            if not call or int(call.group(1)) != n:
                found.append(
                    f"{where}: a check cell of exercise {n} holds one call, `ex.q{n}.check(...)`, "
                    "and nothing else"
                )
            before = nb.cells[i - 1] if i else None
            kind = ANSWER if part == EXERCISE else "solution code"
            fits = (
                before is not None
                and before.cell_type == "code"
                and before.metadata.get(NUMBER) == n
                and (
                    ANSWER in _tags(before)
                    if part == EXERCISE
                    else not _tags(before) & {ANSWER, CHECK}
                )
                and part in _tags(before)
            )
            if not fits:
                found.append(
                    f"{where}: the check of exercise {n} must directly follow its {kind} cell"
                )
        else:
            solutions.setdefault(n, []).append(i)
    numbers = sorted(set(answers) | set(checks[EXERCISE]) | set(checks[SOLUTION]) | set(solutions))
    if numbers and numbers != list(range(1, len(numbers) + 1)):
        found.append(f"the exercises are numbered {numbers}, not 1 to {len(numbers)}")
    for n in numbers:
        for role, part, cells in (
            (ANSWER, EXERCISE, answers),
            (CHECK, EXERCISE, checks[EXERCISE]),
            (CHECK, SOLUTION, checks[SOLUTION]),
        ):
            if (count := len(cells.get(n, []))) != 1:
                found.append(f"exercise {n} has {count} {role} cells in the {part} part, not one")
        if not solutions.get(n):
            found.append(f"exercise {n} has no solution code in the {SOLUTION} part")
    exercise_checks = {n: nb.cells[c[0]].source.strip() for n, c in checks[EXERCISE].items()}
    for n, cells in checks[SOLUTION].items():
        if n in exercise_checks and nb.cells[cells[0]].source.strip() != exercise_checks[n]:
            found.append(
                f"cell {cells[0]}: the solution's check of exercise {n} must make the same call "
                "as the exercise's check, on the names the answer cell defines"
            )
    return found
