"""bench/classroom.py's inputs: what each simulated student runs and reads (no hub started
here; the benchmark itself is run by hand: TEACHING.md), and its options' ranges."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from bench import classroom
from tools import conventions
from tools.authoring import lesson_size

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("lesson", ["01", "04"])
def test_a_student_runs_the_planned_cells_after_reading_the_prose_before_them(lesson) -> None:
    name, cells = classroom.plan(lesson)
    lesson_ = lesson_size.measure(ROOT / "notebooks" / name)
    parts = ("core",) if classroom.PLANS[lesson] == "core" else lesson_size.PARTS
    # every code cell of the part(s), once, in order; the formula gives an exercise's answer
    # and check cells no time of their own (its minutes per exercise cover them)
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    unpriced = [
        c
        for c in nb.cells
        if {conventions.ANSWER} <= (tags := set(c.metadata.get("tags", [])))
        or {conventions.CHECK, conventions.EXERCISE} <= tags
    ]
    unpriced_count = len(unpriced) if "exercises" in parts else 0
    assert len(cells) == sum(lesson_.parts[p].cells for p in parts) + unpriced_count
    # reading before the cells = the formula's words and formulas of those parts' markdown
    prose = sum((lesson_.parts[p] for p in parts), lesson_size.Size())
    expected = lesson_size.Size(words=prose.words, formulas=prose.formulas).exact_minutes * 60
    after_last = cells and sum(c.pause_s for c in cells)
    assert 0 < after_last <= expected + 1e-6  # prose after the last code cell is not waited for
    assert all(c.pause_s >= 0 for c in cells)


@pytest.mark.e2e  # each case the benchmark started as typed, a fresh Python
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--students", "0"], "--students: must be an integer from 1 to 200 (not 0)"),
        (["--students", "1,x"], "--students: must be an integer from 1 to 200 (not x)"),
        (["--pace", "-1"], "--pace: must be a number from 0 to 10 (not -1)"),
        (["--lessons", "05"], "--lessons: must be one of 01, 02, 03, 04 (not '05')"),
        (["--cell-timeout", "0"], "--cell-timeout: must be a number above 0 (not 0)"),
    ],
)
def test_an_option_out_of_its_range_is_one_line(bad: list[str], message: str) -> None:
    argv = [sys.executable, "-m", "bench.classroom", *bad]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=100, cwd=ROOT)
    assert proc.returncode == 2 and f"error: argument {message}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def _main(monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["bench/classroom.py", *argv])
    with pytest.raises(SystemExit) as info:
        classroom.main()
    out, err = capsys.readouterr()
    return info.value.code, out + err


def test_an_existing_hub_log_is_refused_not_overwritten(tmp_path, monkeypatch, capsys) -> None:
    # Issue 46, case 9: --hub-log FILE overwrote an existing file without a word.
    log = tmp_path / "hub.log"
    log.write_text("a teacher's notes\n")
    code, said = _main(monkeypatch, capsys, "--lessons", "01", "--hub-log", str(log))
    assert code == 2 and f"--hub-log {log}: already exists" in said, said
    assert "Traceback" not in said and log.read_text() == "a teacher's notes\n"


def test_a_hub_log_in_a_missing_folder_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    # Issue 46, case 14: a FileNotFoundError traceback.
    log = tmp_path / "nonexistent" / "hub.log"
    code, said = _main(monkeypatch, capsys, "--lessons", "01", "--hub-log", str(log))
    assert code == 2 and f"no folder {log.parent}" in said and "Traceback" not in said, said


def test_a_lesson_the_table_of_contents_lacks_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    # Issue 46, case 14: a bare StopIteration (04 not listed), a LessonError traceback (broken)
    monkeypatch.setattr(classroom, "lesson_notebooks", lambda folder: [])
    code, said = _main(monkeypatch, capsys, "--lessons", "04")
    assert code == 2 and "no lesson 04 in _toc.yml" in said and "Traceback" not in said, said
    from tools.lessons import LessonError

    def broken(folder):
        raise LessonError("_toc.yml: not valid YAML (line 2: ...)")

    monkeypatch.setattr(classroom, "lesson_notebooks", broken)
    code, said = _main(monkeypatch, capsys, "--lessons", "04")
    assert code == 2 and "--lessons: _toc.yml: not valid YAML" in said, said


def test_only_the_accounts_this_run_recorded_are_removed(tmp_path, monkeypatch) -> None:
    # Issue 46, case 8: every bench* account made during a run went, a concurrent bench's
    # (benchadvq, made by another process 6 s into the run) with its home.
    from types import SimpleNamespace

    from tools.teaching import classroom as settings_mod

    present = ["root", "benchxyz1x0", "benchxyzt"]
    removed: list[str] = []
    monkeypatch.setattr(classroom, "accounts", lambda: list(present))
    monkeypatch.setattr(
        settings_mod, "settings", lambda env=None: SimpleNamespace(state_dir=tmp_path, port=1)
    )
    monkeypatch.setattr(classroom.subprocess, "run", lambda argv, **kw: removed.append(argv[-1]))
    hub = classroom.Hub.__new__(classroom.Hub)
    hub.process, hub.env, hub.tag, hub.made = None, {}, "xyz", set()
    hub.made.update(["benchxyzt", "benchxyz1x0"])  # what claim recorded as the hub made them
    present.append("benchadvq")  # another run's account, made while this one ran
    hub.stop()
    assert removed == ["benchxyz1x0", "benchxyzt"]
    with pytest.raises(classroom.BenchError, match="benchadvq already exists and is not this run"):
        hub.claim(["benchadvq"])


def test_a_refused_student_fails_the_goal_even_when_the_others_were_fast() -> None:
    """Issue 47 item 10: 9 of 30 got HTTP 429 and never worked, yet the line said "within 3x"."""
    worked = classroom.Student("s0", 1.0)
    refused = classroom.Student("s1", 1.0, error="start: BenchError: HTTP 429 Active user limit")
    r = classroom.Round(2, [worked, refused], 1.0, (0, 0, 0), (0, 0, 0), 0, [])
    line = classroom.goal_line(r, ["01"], 1.04)
    assert "1 of 2 students finished" in line and "NOT met" in line
    r.students = [worked, classroom.Student("s1", 1.0)]
    assert "goal met" in classroom.goal_line(r, ["01"], 1.04)
    assert "NOT met" in classroom.goal_line(r, ["01"], 3.5)
