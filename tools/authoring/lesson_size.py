"""How big each lesson is and how long it takes a learner, by one formula.

A cell is on the core path, in a deep dive (tag ``optional``) or an exercise (``exercise``,
``solution``). A learner's time for a part is what they read, work through, wait for and
write, in minutes (the constants below; CONTRIBUTING.md, "Learner time", says how they were
calibrated against an independent estimate, which tests/test_core_path.py checks):

    words / 110 + 0.15 per code line + 0.25 per code cell + 0.25 per formula
    + 5 per exercise + 3 × the machine's run time (notebooks/run_times.json)
    + the first run's download (the core path of a lesson that downloads its data)

``write`` stamps these and the run times into the headers of both languages and README.md's
table, and folds each deep dive's heading and each solution's code in JupyterLab; ``check``
fails where any of that is stale.

    python -m tools.authoring.lesson_size [table | write | check] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools import conventions
from tools.authoring import i18n
from tools.lessons import LessonError, lesson_notebooks, read_notebook, shown

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
RUN_TIMES = NOTEBOOKS / "run_times.json"  # written by run_notebooks.py --record-times
CORE_BUDGET = (5_000, 450)  # words of markdown, non-blank code lines: all five core paths
PARTS = ("core", "deep dives", "exercises")
TIME_FIELDS = ("Learner time", "Run time")  # the header's lines that ``write`` stamps
COLLAPSED = "jp-MarkdownHeadingCollapsed"
# A heading that opens a deep dive (several may follow each other), in any language.
DEEP_DIVE = re.compile(
    r"^#{2,4}\s+("
    + "|".join(re.escape(conventions.lesson_words(c)["deep_dive"]) for c in conventions.codes())
    + ")",
    re.I,
)
# The learner-time formula (CONTRIBUTING.md, "Learner time": how these were calibrated).
WORDS_PER_MIN = 110  # prose, read to understand it rather than skimmed
MIN_PER_CODE_LINE = 0.15  # 9 s: read a non-blank code line, type or change it
MIN_PER_CODE_CELL = 0.25  # 15 s: run a cell and read what it printed
MIN_PER_FORMULA = 0.25  # 15 s: a formula ($...$) on top of its words
MIN_PER_EXERCISE = 5  # write an answer, run its check, fix it (the solution is read like any cell)
SLOWER_CPU = 3  # a learner's CPU, busy with other work too, against the recorded run time
DOWNLOAD_MBIT_PER_S = 10  # an assumed connection for a first run's download, not a measurement
# What a lesson's first run downloads: its name and bytes (cifar-10-python.tar.gz, the file
# torchvision's CIFAR10 fetches from www.cs.toronto.edu: 170,498,071 bytes, the length
# that server sends in public download logs).
FIRST_DOWNLOAD = {"04_cifar10": ("CIFAR-10", 170_498_071)}
# notebooks/run_times.json's "measured_with" (run_notebooks.record_times writes it): which
# machine the run times come from; the run-time lines name it.
MEASURED_WITH = (
    "python -m tools.authoring.run_notebooks --record-times on {cpu}, {cpus} CPUs, "
    "OMP_NUM_THREADS={threads}"
)
# README's lesson tables, English and Chinese: a lesson's row ends in "| C / D / E min |"
# ("分钟" in Chinese), the total row in "| **C** / D / E min |" (core / deep dives / exercises).
_README_ROW = re.compile(r"^(\| (\d\d) \| .*\| )\d+ / \d+ / \d+ (min|分钟) \|$", re.M)
_README_TOTAL = re.compile(
    r"^(\| \| (?:all \w+|全部\w+) \| .*\| )\*\*\d+\*\* / \d+ / \d+ (min|分钟) \|$", re.M
)


def about(seconds: float, lang: str) -> str:
    """A measured duration as a header gives it: 7 s, 45 s, 1.5 min (zh: 7 秒, 1.5 分钟)."""
    words = conventions.lesson_words(lang)
    if seconds < 90:
        n = max(1, round(seconds)) if seconds < 20 else 5 * round(seconds / 5)
        return words["seconds"].format(n)
    return words["minutes"].format(f"{round(seconds / 30) / 2:g}")  # to the half minute


def _run_times_problem(times: object) -> str | None:
    """What is wrong with run_times.json's content, or None: ``{"measured_with": text,
    "notebooks": {stem: {"subset"|"full": {"whole", "core"[, "exercises"]: seconds}}}}``."""
    if not isinstance(times, dict):
        return f"holds {type(times).__name__}, not an object"
    if not isinstance(times.get("measured_with", ""), str):
        return "measured_with is not text"
    notebooks = times.get("notebooks", {})
    if not isinstance(notebooks, dict):
        return "notebooks is not an object of notebook names"
    for stem, runs in notebooks.items():
        if not isinstance(runs, dict) or not runs or set(runs) - {"subset", "full"}:
            return f"notebooks.{stem} is {str(runs)[:40]}, not an object of subset/full runs"
        for data, seconds in runs.items():
            where = f"notebooks.{stem}.{data}"
            keys = set(seconds) if isinstance(seconds, dict) else set()
            if not {"whole", "core"} <= keys <= {"whole", "core", "exercises"}:
                return f'{where} is {str(seconds)[:40]}, not {{"whole": s, "core": s}}'
            for key, value in seconds.items():
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if not number or not math.isfinite(value) or value < 0:
                    return f"{where}.{key} is {value!r:.40}, not a number of seconds"
    return None


def load_run_times(path: Path | None = None) -> dict:
    """notebooks/run_times.json, checked before any of it is used ({} when there is none); a
    LessonError in one line naming the file and what is wrong."""
    path = path or RUN_TIMES
    if not path.exists():
        return {}
    fix = f"fix it, or restore it with git (`git checkout {shown(path)}`)"
    try:
        times = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise LessonError(f"{shown(path)}: cannot be read ({err}); {fix}") from None
    except json.JSONDecodeError as err:
        raise LessonError(
            f"{shown(path)}: not valid JSON (line {err.lineno}: {err.msg}); {fix}"
        ) from None
    if problem := _run_times_problem(times):
        raise LessonError(f"{shown(path)}: {problem}; {fix}")
    return times


def machine(times: dict) -> dict[str, str] | None:
    """The machine the run times were measured on (``cpu``, ``cpus``, ``threads``), read
    from their ``measured_with``; None when it does not say (an older or hand-made record)."""
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>.+?)", re.escape(MEASURED_WITH))
    found = re.fullmatch(pattern, times.get("measured_with", ""))
    return found.groupdict() if found and found["threads"].isdigit() else None


def run_line(stem: str, lang: str) -> str | None:
    """The header's run-time line for notebook ``stem``; None if no subset run is recorded
    (or the record does not say on which machine)."""
    times = load_run_times()
    measured, on = times.get("notebooks", {}).get(stem, {}), machine(times)
    if "subset" not in measured or on is None:
        return None
    words = {k: about(v, lang) for k, v in measured["subset"].items()}
    words |= {f"{k}_full": about(v, lang) for k, v in measured.get("full", {}).items()}
    template = "run_time_line_full" if "full" in measured else "run_time_line"
    return conventions.lesson_words(lang)[template].format(**words, **on)


def run_seconds(stem: str) -> dict[str, float]:
    """The machine's time for each part of notebook ``stem`` as a learner runs it: with the
    full data where that was measured (what a learner downloads), else the subset; the
    exercises' share only where the record has it (else it stays in the deep dives')."""
    measured = load_run_times().get("notebooks", {}).get(stem, {})
    run = measured.get("full") or measured.get("subset") or {}
    core, exercises = run.get("core", 0.0), run.get("exercises", 0.0)
    dives = max(0.0, run.get("whole", 0.0) - core - exercises)
    return {"core": core, "deep dives": dives, "exercises": exercises}


def download_minutes(stem: str) -> float:
    """The first run's download of notebook ``stem`` at the assumed connection."""
    size = FIRST_DOWNLOAD.get(stem, ("", 0))[1]
    return size * 8 / (DOWNLOAD_MBIT_PER_S * 1e6) / 60


def rounded(exact: float) -> int:
    """Minutes as a header shows them: to the minute below 10, else to 5 minutes."""
    if exact <= 0:
        return 0
    return max(1, round(exact)) if exact < 10 else 5 * round(exact / 5)


def part_of(cell: nbformat.NotebookNode) -> str:
    tags = set(cell.get("metadata", {}).get("tags", []))
    if conventions.OPTIONAL in tags:
        return "deep dives"
    return "exercises" if tags & {conventions.EXERCISE, conventions.SOLUTION} else "core"


@dataclass
class Size:
    words: int = 0  # of prose (markdown)
    lines: int = 0  # non-blank code lines
    cells: int = 0  # code cells
    formulas: int = 0  # in the prose
    exercises: int = 0  # the exercises to write (measure counts them for the whole lesson)

    def __add__(self, other: Size) -> Size:
        return Size(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    @property
    def exact_minutes(self) -> float:
        """Reading, working through the code and writing the exercises (no machine time)."""
        return (
            self.words / WORDS_PER_MIN
            + self.lines * MIN_PER_CODE_LINE
            + self.cells * MIN_PER_CODE_CELL
            + self.formulas * MIN_PER_FORMULA
            + self.exercises * MIN_PER_EXERCISE
        )

    @property
    def minutes(self) -> int:
        return rounded(self.exact_minutes)


def size(cell: nbformat.NotebookNode) -> Size:
    """What a learner reads, works through and writes in one cell."""
    if cell.cell_type == "markdown":
        return Size(words=len(cell.source.split()), formulas=len(i18n.formulas(cell.source)))
    if cell.cell_type == "code":
        tags = set(cell.get("metadata", {}).get("tags", []))
        if conventions.ANSWER in tags or {conventions.CHECK, conventions.EXERCISE} <= tags:
            return Size()  # writing the answer and running its check: the exercise's minutes
        lines = sum(1 for line in cell.source.splitlines() if line.strip())
        return Size(lines=lines, cells=1)
    return Size()


@dataclass
class DeepDive:
    """``optional`` cells from one deep-dive heading to the next or to a cell not optional."""

    start: int  # index of its first cell
    size: Size = field(default_factory=Size)


@dataclass
class Lesson:
    path: Path
    parts: dict[str, Size]
    deep_dives: list[DeepDive]

    def exact_minutes(self, part: str) -> float:
        """A learner's minutes for ``part``: its size, the machine's recorded time for it on a
        slower CPU and, on the core path, the first run's download."""
        stem = self.path.stem
        waiting = run_seconds(stem)[part] * SLOWER_CPU / 60
        download = download_minutes(stem) if part == "core" else 0.0
        return self.parts[part].exact_minutes + waiting + download

    def minutes(self, part: str) -> int:
        return rounded(self.exact_minutes(part))


def _time_line(name: str, lang: str) -> re.Pattern:
    """The header's line for field ``name`` ("Learner time", "Run time") in ``lang``."""
    label = re.escape(conventions.lesson_words(lang)["header_fields"][name])
    return re.compile(rf"^\*\*{label}.*$", re.M)


def _without_times(header: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The first cell without the lines ``write`` stamps: what they say does not change the
    times they give (else each ``write`` would move its own numbers)."""
    source = header.source
    for name in TIME_FIELDS:
        source = _time_line(name, conventions.SOURCE).sub("", source)
    return nbformat.from_dict({**header, "source": source})


def exercise_count(nb: nbformat.NotebookNode) -> int:
    """How many exercises a learner writes: the distinct numbers of its answer cells
    (tools/conventions.py, exercise_problems)."""
    return len(set(conventions.answer_numbers(nb)))


def measure(path: Path, nb: nbformat.NotebookNode | None = None) -> Lesson:
    nb = nb if nb is not None else read_notebook(path)
    parts = {name: Size() for name in PARTS}
    dives: list[DeepDive] = []
    previous = ""
    for i, cell in enumerate(nb.cells):
        part = part_of(cell)
        parts[part] += size(_without_times(cell) if i == 0 else cell)
        if part == "deep dives":
            starts = cell.cell_type == "markdown" and DEEP_DIVE.match(cell.source)
            if previous != "deep dives" or starts:
                dives.append(DeepDive(i))
            dives[-1].size += size(cell)
        previous = part
    parts["exercises"].exercises = exercise_count(nb)
    return Lesson(path, parts, dives)


def deep_dives(nb: nbformat.NotebookNode) -> list[DeepDive]:
    """The deep-dive sections of a notebook (the site marks each with its minutes)."""
    return measure(Path("-"), nb).deep_dives


def _stamp(header: str, lesson: Lesson, lang: str) -> tuple[str, list[str]]:
    """``header`` (a first cell in ``lang``) with its learner and run times as measured, and
    what it should say but cannot (no such line in it, no run recorded)."""
    words, missing = conventions.lesson_words(lang), []
    learner = words["learner_time_line"].format(*(lesson.minutes(p) for p in PARTS))
    if lesson.path.stem in FIRST_DOWNLOAD:
        what, size_bytes = FIRST_DOWNLOAD[lesson.path.stem]
        learner += words["learner_time_download"].format(
            what=what,
            mb=round(size_bytes / 1e6),
            mbit=DOWNLOAD_MBIT_PER_S,
            minutes=about(download_minutes(lesson.path.stem) * 60, lang),
        )
    for name, line in zip(TIME_FIELDS, (learner, run_line(lesson.path.stem, lang)), strict=True):
        if line is None:
            missing.append(
                f"no run time recorded in {RUN_TIMES.name} (or its measured_with does not "
                "name the CPU and threads): python -m tools.authoring.run_notebooks "
                f"--record-times {lesson.path.name}"
            )
            continue
        header = _time_line(name, lang).sub(lambda _, line=line: line, header)
        if line not in header:
            missing.append(f"the header should say '{line}'")
    return header, missing


def _stamped(path: Path) -> tuple[nbformat.NotebookNode, i18n.Catalog, list[str]]:
    """The notebook and its catalog as ``write`` leaves them, and what it cannot fix."""
    nb = read_notebook(path)
    lesson = measure(path, nb)
    header, old_header = nb.cells[0], nb.cells[0].source
    header.source, missing = _stamp(old_header, lesson, conventions.SOURCE)
    found = [f"{path.name}: {line}" for line in missing]
    for cell in nb.cells:  # a solution's code opens folded: the answer is not under the task
        cell.metadata.pop(COLLAPSED, None)
        if cell.cell_type == "code" and conventions.SOLUTION in cell.metadata.get("tags", []):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    for dive in lesson.deep_dives:
        cell = nb.cells[dive.start]
        if cell.cell_type == "markdown" and DEEP_DIVE.match(cell.source):
            cell.metadata[COLLAPSED] = True
        else:
            found.append(f"{path.name}: cell {dive.start} opens a deep dive: make it a heading")
    catalog = i18n.Catalog.load(path)
    entry = catalog.entries.get(header.get("id", ""))
    if entry is not None:
        text, missing_zh = _stamp(entry.text, lesson, "zh")
        found += [f"{path.name} (zh): {line}" for line in missing_zh if line not in missing]
        # A translation that was current stays current: only the numbers changed.
        fresh = entry.en_hash == i18n.source_hash(old_header)
        new_hash = i18n.source_hash(header.source) if fresh else entry.en_hash
        catalog.entries[header.id] = i18n.Entry(text, new_hash)
    return nb, catalog, found


def write(path: Path) -> bool:
    """Stamp the times into both headers and the folds into Lab's metadata; whether it did."""
    nb, catalog, _ = _stamped(path)
    changed = nbformat.writes(nb) != nbformat.writes(read_notebook(path))
    if changed:
        nbformat.write(nb, path)
    if catalog.entries != i18n.Catalog.load(path).entries:
        catalog.save([c.id for c in nb.cells])
        changed = True
    return changed


def problems(path: Path) -> list[str]:
    """What ``check`` reports for one English notebook and its catalog."""
    nb, catalog, found = _stamped(path)
    if nbformat.writes(nb) != nbformat.writes(read_notebook(path)):
        found.append(f"{path.name}: the header's times or Lab's folds are stale")
    if catalog.entries != i18n.Catalog.load(path).entries:
        found.append(f"{path.name}: the Chinese header's times are stale")
    return found


def readme_with_times(text: str, paths: list[Path]) -> str:
    """``text`` (README.md) with its lesson table's learner times measured from ``paths``."""
    lessons = {path.stem[:2]: measure(path) for path in paths}

    def row(match: re.Match) -> str:
        lesson = lessons.get(match.group(2))
        if lesson is None:  # a row for a notebook that is gone: check reports it
            return match.group(0)
        times = " / ".join(str(lesson.minutes(p)) for p in PARTS)
        return f"{match.group(1)}{times} {match.group(3)} |"

    core, dives, exercises = (
        rounded(sum(lesson.exact_minutes(p) for lesson in lessons.values())) for p in PARTS
    )
    return _README_TOTAL.sub(
        lambda m: f"{m.group(1)}**{core}** / {dives} / {exercises} {m.group(2)} |",
        _README_ROW.sub(row, text),
    )


def readme_problems(paths: list[Path], readme: Path = README) -> list[str]:
    """What ``check`` reports for the README's lesson table."""
    text = readme.read_text(encoding="utf-8")
    found = []
    for unit in ("min", "分钟"):  # the English table and the Chinese one
        numbers = sorted(m.group(2) for m in _README_ROW.finditer(text) if m.group(3) == unit)
        totals = [m for m in _README_TOTAL.finditer(text) if m.group(2) == unit]
        if numbers != sorted(path.stem[:2] for path in paths) or len(totals) != 1:
            found.append(
                f"{readme.name}: the lesson table in '{unit}' needs one row per notebook and "
                "a total row"
            )
    if readme_with_times(text, paths) != text:
        found.append(f"{readme.name}: the lesson table's learner times are stale")
    return found


def table(paths: list[Path]) -> str:
    rows = [
        "| notebook | core words | core code lines | core code cells | core | deep dives "
        "| exercises | total |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lessons = [measure(path) for path in paths]
    named = [
        (lesson.path.stem, lesson.parts, {p: lesson.exact_minutes(p) for p in PARTS})
        for lesson in lessons
    ]
    named.append(
        (
            f"all {len(lessons)}",  # however many the table of contents lists
            {p: sum((parts[p] for _, parts, _ in named), Size()) for p in PARTS},
            {p: sum(exact[p] for _, _, exact in named) for p in PARTS},
        )
    )
    for name, parts, exact in named:
        core = parts["core"]
        times = " | ".join(f"{rounded(exact[p])} min" for p in PARTS)
        rows.append(
            f"| {name} | {core.words:,} | {core.lines} | {core.cells} | {times} "
            f"| {rounded(sum(exact.values()))} min |"
        )
    words, lines = CORE_BUDGET
    return "\n".join(rows) + f"\n\nBudget of the core path: {words:,} words, {lines} code lines."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="table", choices=("table", "write", "check"))
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    try:  # what every command reads is checked before anything is written
        paths = args.notebooks or lesson_notebooks(NOTEBOOKS)
        load_run_times()
        for path in paths:
            read_notebook(path)
        return _command(args.command, paths, all_lessons=not args.notebooks)
    except LessonError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _command(command: str, paths: list[Path], all_lessons: bool) -> int:
    if command == "table":
        print(table(paths))
        return 0
    if command == "write":
        for path in paths:
            if write(path):
                print(f"updated {path.relative_to(ROOT) if path.is_absolute() else path}")
        text = README.read_text(encoding="utf-8")
        if all_lessons and readme_with_times(text, paths) != text:
            README.write_text(readme_with_times(text, paths), encoding="utf-8")
            print(f"updated {README.relative_to(ROOT)}")
        return 0
    found = [line for path in paths for line in problems(path)]
    found += readme_problems(paths) if all_lessons else []
    if found:
        print(
            "\n".join([*found, "Fix: python -m tools.authoring.lesson_size write"]), file=sys.stderr
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
