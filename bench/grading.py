"""Benchmark: how long the class grader takes a right submission (not in `make test`).

    sudo .venv/bin/python -m bench.grading --lessons 01 05 --students 8 --jobs 1 2

For each lesson, writes the lesson's course in a scratch folder (tools/teaching/assignments.py,
as `make assignments` does), copies its source notebook (the lesson's own solutions: a right
submission) once per student, grades the folder with the real grader's command line
(`python -m tools.teaching.grade`, as a teacher types it) and prints one line: submissions,
wall time, seconds per submission and the goal (lesson 04: 60 s a submission; others: 10 s),
for each ``--jobs`` (submissions side by side: the grader's own ``--jobs``), with its speed-up
over the first.
As root, with what tools/teaching/sandbox.py's ``check_host`` asks for (bubblewrap).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from utils.cli import number

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ("01", "02", "03", "04", "05")
GOAL_S = {"04": 60.0}  # seconds a submission; every other lesson: DEFAULT_GOAL_S
DEFAULT_GOAL_S = 10.0


def lesson_number(text: str) -> str:
    if text not in LESSONS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(LESSONS)} (not {text})")
    return text


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", nargs="+", type=lesson_number, default=list(LESSONS))
    parser.add_argument("--students", type=number(int, least=1, most=1000), default=40, metavar="N")
    parser.add_argument("--lang", choices=("en", "zh"), default="en")
    parser.add_argument(
        "--jobs",
        nargs="+",
        type=number(int, least=1, most=64),
        default=[1, 2],
        metavar="N",
        help="the grader's --jobs, one run each (default: 1 2)",
    )
    parser.add_argument("--memory-gb", type=number(float, above=0, most=1024), default=8.0,
                        metavar="GB", help="the grader's --memory-gb (default 8)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="a tiny run: lesson 01, 2 students")
    args = parser.parse_args(argv)
    if args.smoke:
        args.lessons, args.students, args.jobs = ["01"], 2, [1]
    return args


def bench_lesson(
    lesson: str, students: int, lang: str, scratch: Path, jobs: int = 1, memory_gb: float = 8.0
) -> tuple[float, int]:
    """Grade ``students`` copies of ``lesson``'s solutions; (wall seconds, grader's exit code)."""
    from tools.teaching.assignments import lesson_for, write_course

    course, submissions, out = scratch / "course", scratch / "submissions", scratch / "out"
    path = lesson_for(lesson, lang)
    write_course(course, lang, [path])
    submissions.mkdir()
    for i in range(students):
        shutil.copyfile(
            course / "source" / path.stem / f"{path.stem}.ipynb", submissions / f"s{i:03d}.ipynb"
        )
    argv = [sys.executable, "-m", "tools.teaching.grade", "--lesson", lesson, "--lang", lang]
    argv += ["--submissions", str(submissions), "--out", str(out)]
    argv += ["--jobs", str(jobs), "--memory-gb", f"{memory_gb:g}"]
    started = time.monotonic()
    rc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL).returncode
    return time.monotonic() - started, rc


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from tools.teaching import sandbox

    if why := sandbox.check_host():
        print(f"grading: {why}", file=sys.stderr)
        return 2
    worst = 0
    for lesson in args.lessons:
        goal = GOAL_S.get(lesson, DEFAULT_GOAL_S)
        first = None
        for jobs in args.jobs:
            with tempfile.TemporaryDirectory(prefix=f"bench-grading-{lesson}-") as scratch:
                wall, rc = bench_lesson(
                    lesson, args.students, args.lang, Path(scratch), jobs, args.memory_gb
                )
            each = wall / args.students
            first = first or each
            verdict = "within" if each <= goal else "over"
            if rc:
                verdict, worst = f"grader failed (exit {rc})", 1
            print(
                f"lesson {lesson} ({args.lang}), --jobs {jobs}: {args.students} submissions, "
                f"{wall:.1f} s, {each:.1f} s a submission ({first / each:.2f}x --jobs "
                f"{args.jobs[0]}), goal {goal:g} s: {verdict}",
                flush=True,
            )
    return worst


if __name__ == "__main__":
    sys.exit(main())
