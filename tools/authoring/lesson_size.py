"""How big each lesson is and how long it takes a learner, by one formula.

Every cell belongs to one part of its notebook, by its cell tags: a deep dive (``optional``),
an exercise (``exercise`` or ``solution``) or, with none of those, the core path. A learner's
time for a part is ``words / 200 + code_lines / 10`` minutes: reading technical prose at
about 200 words a minute, and about 6 seconds to read, type and run each non-blank code
line. On the official 60-minute blitz (about 4,500 words, 350 code lines) it gives 58 min.

    python -m tools.authoring.lesson_size          # the table: per notebook and in total
    python -m tools.authoring.lesson_size write    # stamp the times into the headers (en and zh)
    python -m tools.authoring.lesson_size check    # fail when a header's times or a Lab flag
    are stale

``write`` and ``check`` cover README.md's lesson table too (its learner-time column and the
total row), so the README never shows other numbers than the headers. ``write`` also marks
the heading that opens each deep dive as collapsed in JupyterLab (cell metadata
``jp-MarkdownHeadingCollapsed``), so a deep dive opens folded, and folds each solution's
code (``jupyter.source_hidden``), so the answer does not stand under the exercise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tools import conventions
from tools.authoring import i18n
from tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
WORDS_PER_MIN = 200
LINES_PER_MIN = 10
CORE_BUDGET = (5_000, 450)  # words of markdown, non-blank code lines: all five core paths
OPTIONAL, EXERCISE, SOLUTION = conventions.OPTIONAL, conventions.EXERCISE, conventions.SOLUTION
PARTS = ("core", "deep dives", "exercises")
COLLAPSED = "jp-MarkdownHeadingCollapsed"
# The header lines ``write`` keeps current, in each language (tools/conventions.py): the
# learner times, and the run times ``tools/authoring/run_notebooks.py --record-times`` measured
# (notebooks/run_times.json), per data set.
RUN_TIMES = NOTEBOOKS / "run_times.json"


def _line_pattern(lang: str, field: str) -> re.Pattern:
    label = conventions.lesson_words(lang)["header_fields"][field]
    return re.compile(rf"^\*\*{re.escape(label)}.*$", re.M)


def about(seconds: float, lang: str) -> str:
    """A measured duration as a header gives it: 7 s, 45 s, 1.5 min (zh: 7 秒, 1.5 分钟)."""
    words = conventions.lesson_words(lang)
    if seconds < 90:
        n = max(1, round(seconds)) if seconds < 20 else 5 * round(seconds / 5)
        return words["seconds"].format(n)
    return words["minutes"].format(f"{round(seconds / 30) / 2:g}")  # to the half minute


def run_line(stem: str, lang: str) -> str | None:
    """The run-time line for notebook ``stem`` from notebooks/run_times.json, or None when
    no run of it was recorded on the subset."""
    times = json.loads(RUN_TIMES.read_text(encoding="utf-8")) if RUN_TIMES.is_file() else {}
    measured = times.get("notebooks", {}).get(stem, {})
    if "subset" not in measured:
        return None
    words = {k: about(v, lang) for k, v in measured["subset"].items()}
    templates = conventions.lesson_words(lang)
    if "full" not in measured:
        return templates["run_time_line"].format(**words)
    full = {f"{k}_full": about(v, lang) for k, v in measured["full"].items()}
    return templates["run_time_line_full"].format(**words, **full)


# Where a deep dive starts inside a run of optional cells (deep dives may follow each other):
# a heading that opens with the deep-dive word of any language.
DEEP_DIVE = re.compile(
    r"^#{2,4}\s+("
    + "|".join(re.escape(conventions.lesson_words(c)["deep_dive"]) for c in conventions.codes())
    + ")",
    re.I,
)


def minutes(words: int, lines: int) -> int:
    """A learner's minutes for this much prose and code, rounded as a header shows them."""
    exact = words / WORDS_PER_MIN + lines / LINES_PER_MIN
    if exact < 10:
        return max(1, round(exact)) if words or lines else 0
    return 5 * round(exact / 5)


def part_of(cell: nbformat.NotebookNode) -> str:
    tags = set(cell.get("metadata", {}).get("tags", []))
    if OPTIONAL in tags:
        return "deep dives"
    if tags & {EXERCISE, SOLUTION}:
        return "exercises"
    return "core"


def size(cell: nbformat.NotebookNode) -> tuple[int, int]:
    """(markdown words, non-blank code lines) of one cell."""
    if cell.cell_type == "markdown":
        return len(cell.source.split()), 0
    if cell.cell_type == "code":
        return 0, sum(1 for line in cell.source.splitlines() if line.strip())
    return 0, 0


@dataclass
class Size:
    words: int = 0
    lines: int = 0

    def add(self, words: int, lines: int) -> None:
        self.words += words
        self.lines += lines

    @property
    def minutes(self) -> int:
        return minutes(self.words, self.lines)


@dataclass
class DeepDive:
    """Consecutive ``optional`` cells from one ``## Deep dive: ...`` heading to the next deep
    dive or the next cell that is not optional."""

    start: int  # index of its first cell
    size: Size = field(default_factory=Size)


@dataclass
class Lesson:
    path: Path
    parts: dict[str, Size]
    deep_dives: list[DeepDive]


def measure(path: Path, nb: nbformat.NotebookNode | None = None) -> Lesson:
    nb = nb if nb is not None else nbformat.read(path, as_version=4)
    parts = {name: Size() for name in PARTS}
    dives: list[DeepDive] = []
    previous = ""
    for i, cell in enumerate(nb.cells):
        part = part_of(cell)
        parts[part].add(*size(cell))
        if part == "deep dives":
            starts = cell.cell_type == "markdown" and DEEP_DIVE.match(cell.source)
            if previous != "deep dives" or starts:
                dives.append(DeepDive(i))
            dives[-1].size.add(*size(cell))
        previous = part
    return Lesson(path, parts, dives)


def deep_dives(nb: nbformat.NotebookNode) -> list[DeepDive]:
    """The deep-dive sections of a notebook (the site marks each with its minutes)."""
    return measure(Path("-"), nb).deep_dives


def time_line(lesson: Lesson, lang: str) -> str:
    template = conventions.lesson_words(lang)["learner_time_line"]
    return template.format(*(lesson.parts[p].minutes for p in PARTS))


def problems(path: Path) -> list[str]:
    """What ``check`` reports for one English notebook and its Chinese catalog."""
    nb = nbformat.read(path, as_version=4)
    lesson = measure(path, nb)
    found = []
    header = nb.cells[0].source if nb.cells else ""
    want = time_line(lesson, "en")
    if want not in header:
        found.append(f"{path.name}: the header should say '{want}'")
    catalog = i18n.Catalog.load(path)
    entry = catalog.entries.get(nb.cells[0].get("id", "")) if nb.cells else None
    if entry is not None and time_line(lesson, "zh") not in entry.text:
        found.append(f"{path.name}: the Chinese header should say '{time_line(lesson, 'zh')}'")
    if (want_run := run_line(path.stem, "en")) is None:
        found.append(
            f"{path.name}: no run time recorded in {RUN_TIMES.name}: "
            f"python -m tools.authoring.run_notebooks --record-times {path.name}"
        )
    elif want_run not in header:
        found.append(f"{path.name}: the header should say '{want_run}'")
    elif entry is not None and run_line(path.stem, "zh") not in entry.text:
        found.append(f"{path.name}: the Chinese header should say '{run_line(path.stem, 'zh')}'")
    for dive in lesson.deep_dives:
        cell = nb.cells[dive.start]
        if cell.cell_type != "markdown" or not DEEP_DIVE.match(cell.source):
            found.append(
                f"{path.name}: cell {dive.start} opens a deep dive: make it a heading "
                "'## Deep dive: ...'"
            )
        elif not cell.metadata.get(COLLAPSED):
            found.append(f"{path.name}: cell {dive.start}, a deep dive's heading, is not collapsed")
    for i, cell in enumerate(nb.cells):
        if _is_solution_code(cell) and not cell.metadata.get("jupyter", {}).get("source_hidden"):
            found.append(f"{path.name}: cell {i}, a solution's code, is not folded in Lab")
    return found


def _is_solution_code(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and "solution" in cell.metadata.get("tags", [])


def _stamp(header: str, lesson: Lesson, stem: str, lang: str) -> str:
    """``header`` (a first cell's text in ``lang``) with its learner-time and run-time lines
    as measured."""
    learner = time_line(lesson, lang)
    header = _line_pattern(lang, "Learner time").sub(lambda _: learner, header)
    if (run := run_line(stem, lang)) is not None:
        header = _line_pattern(lang, "Run time").sub(lambda _: run, header)
    return header


def write(path: Path) -> bool:
    """Stamp the learner times and the collapsed flags; True when something changed."""
    nb = nbformat.read(path, as_version=4)
    lesson = measure(path, nb)
    before = nbformat.writes(nb)
    header = nb.cells[0]
    old_header = header.source
    header.source = _stamp(header.source, lesson, path.stem, conventions.SOURCE)
    for cell in nb.cells:
        cell.metadata.pop(COLLAPSED, None)
    for dive in lesson.deep_dives:
        cell = nb.cells[dive.start]
        if cell.cell_type == "markdown" and DEEP_DIVE.match(cell.source):
            cell.metadata[COLLAPSED] = True
    for cell in nb.cells:  # a solution's code opens folded: the answer is not under the exercise
        if _is_solution_code(cell):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    changed = nbformat.writes(nb) != before
    if changed:
        nbformat.write(nb, path)
    catalog = i18n.Catalog.load(path)
    entry = catalog.entries.get(header.get("id", ""))
    if entry is not None:
        text = _stamp(entry.text, lesson, path.stem, "zh")
        # A translation that was current stays current: only the numbers changed.
        fresh = entry.en_hash == i18n.source_hash(old_header)
        new_hash = i18n.source_hash(header.source) if fresh else entry.en_hash
        if text != entry.text or new_hash != entry.en_hash:
            catalog.entries[header.id] = i18n.Entry(text, new_hash)
            catalog.save([c.id for c in nb.cells])
            changed = True
    return changed


README = ROOT / "README.md"
# The README's lesson table: each lesson's row ends in "| C / D / E min |", the total row in
# "| **C** / D / E min |" (core / deep dives / exercises).
_README_ROW = re.compile(r"^(\| (\d\d) \| .*\| )\d+ / \d+ / \d+ min \|$", re.M)
_README_TOTAL = re.compile(r"^(\| \| all \w+ \| .*\| )\*\*\d+\*\* / \d+ / \d+ min \|$", re.M)


def readme_with_times(text: str, paths: list[Path]) -> str:
    """``text`` (README.md) with its lesson table's learner times measured from ``paths``."""
    lessons = {path.stem[:2]: measure(path).parts for path in paths}
    total = {name: Size() for name in PARTS}
    for parts in lessons.values():
        for name in PARTS:
            total[name].add(parts[name].words, parts[name].lines)

    def row(match: re.Match) -> str:
        parts = lessons.get(match.group(2))
        if parts is None:  # a row for a notebook that is gone: check reports it
            return match.group(0)
        return f"{match.group(1)}{' / '.join(str(parts[p].minutes) for p in PARTS)} min |"

    text = _README_ROW.sub(row, text)
    core, dives, exercises = (total[p].minutes for p in PARTS)
    return _README_TOTAL.sub(
        lambda m: f"{m.group(1)}**{core}** / {dives} / {exercises} min |", text
    )


def readme_problems(paths: list[Path], readme: Path = README) -> list[str]:
    """What ``check`` reports for the README's lesson table."""
    text = readme.read_text(encoding="utf-8")
    numbers = sorted(m.group(2) for m in _README_ROW.finditer(text))
    found = []
    if numbers != sorted(path.stem[:2] for path in paths) or not _README_TOTAL.search(text):
        found.append(f"{readme.name}: the lesson table needs one row per notebook and a total row")
    if readme_with_times(text, paths) != text:
        found.append(f"{readme.name}: the lesson table's learner times are stale")
    return found


def table(paths: list[Path]) -> str:
    rows = [
        "| notebook | core words | core code lines | core | deep dives | exercises | total |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total = {name: Size() for name in PARTS}
    for path in paths:
        lesson = measure(path)
        for name in PARTS:
            total[name].add(lesson.parts[name].words, lesson.parts[name].lines)
        rows.append(_row(path.stem, lesson.parts))
    rows.append(_row("all five", total))
    words, lines = CORE_BUDGET
    rows.append(f"\nBudget of the core path: {words:,} words, {lines} code lines.")
    return "\n".join(rows)


def _row(name: str, parts: dict[str, Size]) -> str:
    core = parts["core"]
    every = Size(sum(p.words for p in parts.values()), sum(p.lines for p in parts.values()))
    times = " | ".join(f"{parts[p].minutes} min" for p in PARTS)
    return f"| {name} | {core.words:,} | {core.lines} | {times} | {every.minutes} min |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="table", choices=("table", "write", "check"))
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or lesson_notebooks(NOTEBOOKS)
    if args.command == "table":
        print(table(paths))
    elif args.command == "write":
        for path in paths:
            if write(path):
                print(f"updated {path.relative_to(ROOT) if path.is_absolute() else path}")
        if not args.notebooks:  # the README's table lists every lesson, its total all of them
            text = README.read_text(encoding="utf-8")
            if readme_with_times(text, paths) != text:
                README.write_text(readme_with_times(text, paths), encoding="utf-8")
                print(f"updated {README.relative_to(ROOT)}")
    else:
        found = [p for path in paths for p in problems(path)]
        found += readme_problems(paths) if not args.notebooks else []
        for line in found:
            print(line, file=sys.stderr)
        if found:
            print("Fix: python -m tools.authoring.lesson_size write", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
