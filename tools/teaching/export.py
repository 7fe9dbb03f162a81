"""nbgrader's export step for the class grader: ``grades.csv`` with one row per student and
one column per exercise (the check cells' ``grade_id``, e.g. ``ex01_q1``), the total, and a
note: why a submission scored less than it might have (not a notebook, time limit, ...).

    nbgrader export --to grades.csv --ScoresCsv.notes=notes.json   (in the course folder)

``notes`` is a JSON object {student id: note} written by tools/teaching/grade.py; a student
who is there and has no submission in the gradebook (bad input) gets a row of zeros.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode


def _number(value: float | None) -> str:
    value = value or 0.0
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


class ScoresCsv(ExportPlugin):
    """Per-exercise scores of one assignment, one row per student (module docstring)."""

    notes = Unicode("", help="JSON file {student id: note}").tag(config=True)

    def export(self, gradebook) -> None:
        notes = json.loads(Path(self.notes).read_text(encoding="utf-8")) if self.notes else {}
        names = self.assignment or [a.name for a in gradebook.assignments]
        if len(names) != 1:  # one line, not nbgrader's traceback (issue 46, case 15)
            found = ", ".join(names) or "none"
            self.log.error(
                "export one assignment at a time: add --assignment NAME (this course has: %s)",
                found,
            )
            raise SystemExit(2)
        assignment = gradebook.find_assignment(names[0])
        notebook = assignment.notebooks[0]
        checks = sorted((c.name for c in notebook.grade_cells), key=_check_order)
        # the lesson's own solutions, graded first by the grader, are no student's row
        ids = {s.id for s in gradebook.students} - {"_lesson_solutions"}
        students = sorted(ids | set(notes))
        with open(self.to or "grades.csv", "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["student", *checks, "total", "note"])
            for student in students:
                scores = dict.fromkeys(checks, 0.0)
                try:
                    graded = gradebook.find_submission_notebook(
                        notebook.name, assignment.name, student
                    )
                except MissingEntry:
                    graded = None
                if graded is not None:
                    for grade in graded.grades:
                        if grade.name in scores:
                            scores[grade.name] = grade.score or 0.0
                total = sum(scores.values())
                out.writerow(
                    [
                        student,
                        *map(_number, scores.values()),
                        _number(total),
                        notes.get(student, ""),
                    ]
                )


def _check_order(name: str) -> tuple[str, int]:
    """``ex01_q2`` before ``ex01_q10``."""
    stem, _, number = name.rpartition("_q")
    return (stem, int(number)) if number.isdigit() else (name, 0)
