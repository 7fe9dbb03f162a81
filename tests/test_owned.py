"""tools/owned.py, the one rule every tool that writes or deletes follows: only inside its own
folder, never through a link, never an absolute name or a ``..``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tools import owned


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(the tool's folder, a folder of the user's outside it) with a link between them."""
    folder, outside = tmp_path / "tool", tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "mine.txt").write_text("mine")
    (folder / "sub" / "own.txt").write_text("the tool's")
    (folder / "linked").symlink_to(outside)
    (folder / "link.txt").symlink_to(outside / "mine.txt")
    return folder, outside


def test_a_tool_reaches_only_its_own_folder_never_through_a_link(layout) -> None:
    folder, outside = layout
    assert owned.within(folder, "sub/own.txt") == folder / "sub" / "own.txt"
    assert owned.within(folder, "./sub/not-yet.txt") == folder / "sub" / "not-yet.txt"
    for name in (
        "linked/mine.txt",  # through a linked folder
        "link.txt",  # a link itself
        str(outside / "mine.txt"),  # absolute
        "../outside/mine.txt",  # climbing out
        "sub/../../outside/mine.txt",
        "",
        ".",
        "sub\\..\\..\\outside",
    ):
        assert owned.within(folder, name) is None, name
        assert owned.remove(owned.within(folder, name)) == 0
    assert (outside / "mine.txt").read_text() == "mine"


def test_removing_a_folder_removes_its_links_never_what_they_point_to(layout) -> None:
    folder, outside = layout
    assert [p.name for p in owned.entries(folder)] == ["link.txt", "linked", "own.txt"]
    assert owned.remove(owned.within(folder, "linked")) == 0, "a link is not the tool's"
    assert owned.remove(folder) == 3  # own.txt and the two links, not outside's file
    assert not folder.exists() and (outside / "mine.txt").read_text() == "mine"


def test_pruning_never_removes_a_linked_or_full_folder(layout) -> None:
    folder, outside = layout
    (outside / "empty").mkdir()
    (folder / "sub" / "own.txt").unlink()
    (folder / "sub" / "deep").mkdir()
    owned.prune(folder / "sub", folder)
    assert not (folder / "sub").exists() and folder.is_dir(), "it still holds the links"
    owned.prune(folder / "linked", folder)
    assert (outside / "empty").is_dir()


def test_build_a_link_is_refused_as_build_site_a_link_is(tmp_path: Path, monkeypatch) -> None:
    # Issue 46, case 18: build/ a link to a folder outside: make html wrote the site through
    # it (make clean kept both), while a linked build/site was refused. One rule now.
    from tools.publishing import build_site

    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setattr(build_site, "ROOT", project)
    (project / "build").symlink_to(outside)
    assert owned.linked_on_the_way(project, project / "build" / "site") == project / "build"
    problem = build_site.out_problem(project / "build" / "site")
    assert problem and f"reached through the link {project / 'build'}" in problem
    (project / "build").unlink()
    (project / "build" / "site").parent.mkdir()
    (project / "build" / "site").symlink_to(outside)
    assert "is a symbolic link" in build_site.out_problem(project / "build" / "site")
    (project / "build" / "site").unlink()
    assert build_site.out_problem(project / "build" / "site") is None
    assert owned.linked_on_the_way(project, tmp_path / "elsewhere") is None  # not under root


def test_assignments_write_nothing_through_a_linked_source_folder(tmp_path: Path) -> None:
    # Issue 46, case 3: build/assignments/en/source a link to a folder outside: the lesson was
    # written into it (and with 01_tensors/ there: FileExistsError after release/01_tensors
    # was already deleted). Every path is checked before anything is removed or written.
    from tools.teaching import assignments

    course, outside = tmp_path / "course", tmp_path / "outside"
    (course / "release" / "01_tensors").mkdir(parents=True)
    (course / "release" / "01_tensors" / "01_tensors.ipynb").write_text("{}")
    (outside / "01_tensors").mkdir(parents=True)
    (course / "source").symlink_to(outside)
    lesson = tmp_path / "notebooks" / "01_tensors.ipynb"
    said = f"source/01_tensors is reached through the link {course / 'source'}: nothing written"
    with pytest.raises(assignments.AssignmentError, match=said):
        assignments.write_course(course, "en", [lesson])
    assert (course / "release" / "01_tensors" / "01_tensors.ipynb").read_text() == "{}"
    assert [p.name for p in outside.rglob("*")] == ["01_tensors"]
    assert not (course / "nbgrader_config.py").exists()


def test_a_write_is_refused_in_one_line_naming_the_link(layout) -> None:
    folder, outside = layout
    assert owned.write_refusal(folder, ["sub/own.txt", "new/file.txt", Path("sub/x")]) is None
    said = owned.write_refusal(folder, ["sub/own.txt", "linked/new.txt", "link.txt"])
    linked = folder / "linked"
    assert said == f"{linked}/new.txt is reached through the link {linked}: nothing written"
    said = owned.write_refusal(folder, ["link.txt"])
    assert said == f"{folder / 'link.txt'} is a link: nothing is written through it"
    for name in (str(outside / "mine.txt"), "../outside/mine.txt", ""):
        said = owned.write_refusal(folder, [name])
        assert said and said.endswith(f"is not a path inside {folder}: nothing written"), name
        assert "\n" not in said


def test_assignments_write_nothing_through_a_linked_gradebook(tmp_path: Path) -> None:
    # Issue 46, case 3 (every write of every tool): nbgrader writes its gradebook.db in the
    # course; a link there was written through (its target's time changed on a real run).
    from tools.teaching import assignments

    course, outside = tmp_path / "course", tmp_path / "outside"
    course.mkdir()
    outside.mkdir()
    for name in assignments.GRADEBOOK:
        (course / name).symlink_to(outside / name)
        lesson = tmp_path / "notebooks" / "01_tensors.ipynb"
        with pytest.raises(
            assignments.AssignmentError, match=f"{name} is a link: nothing is written"
        ):
            assignments.write_course(course, "en", [lesson])
        (course / name).unlink()
    assert list(outside.iterdir()) == [] and list(course.iterdir()) == []


def test_assignments_write_no_course_through_a_linked_build(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    # build/ (or build/assignments/) a link to a folder outside: the course would go there.
    from tools.teaching import assignments

    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "build").mkdir(parents=True)
    outside.mkdir()
    (project / "build" / "assignments").symlink_to(outside)
    monkeypatch.setattr(assignments, "ROOT", project)
    monkeypatch.setattr(assignments, "OUT", project / "build" / "assignments")
    assert assignments.main(["02", "--lang", "en"]) == 2
    err = capsys.readouterr().err.strip()
    link = project / "build" / "assignments"
    assert err == f"assignments: {link}/en is reached through the link {link}: nothing written"
    assert list(outside.iterdir()) == []


def test_a_private_folder_is_its_owners_alone_and_narrowing_one_is_said(tmp_path: Path) -> None:
    new = tmp_path / "a" / "new"
    assert owned.private_folder(new) is None
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    assert (
        owned.private_folder(old)
        == f"{old} was open to others (0o755): now its owner's alone (0700)"
    )
    assert [p.stat().st_mode & 0o777 for p in (new, old)] == [0o700, 0o700]


@pytest.mark.e2e  # make assignments and a grading run, read as a student (about 16 s)
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_a_student_reads_neither_the_course_nor_the_grades(monkeypatch, capsys) -> None:
    """Issue 47 item 2, from a student's side: in a checkout every user may read (a hub serves
    it), make assignments' course (solutions, hidden tests, gradebook) and the grader's out
    folder (every student's grades and feedback) open for the teacher alone; the checkout's
    other files stay readable (the check can fail)."""
    from tools.teaching import assignments
    from tools.teaching import grade as grader

    project = Path(tempfile.mkdtemp(prefix="blitz-private-"))  # /tmp's pytest folders are 0700
    try:
        project.chmod(0o755)
        (project / "build").mkdir(mode=0o755)
        (project / "build").chmod(0o755)
        (project / "README.md").write_text("every student reads this")
        monkeypatch.setattr(assignments, "ROOT", project)
        monkeypatch.setattr(assignments, "OUT", project / "build" / "assignments")
        assert assignments.main(["01", "--lang", "en"]) == 0
        course = project / "build" / "assignments" / "en"
        monkeypatch.setattr(grader, "ROOT", project)
        monkeypatch.setattr(grader, "_autograde", lambda *a, **k: "stand-in grade")
        monkeypatch.setattr(grader, "solutions_lost", lambda course, name, note: "")
        submitted = project / "submitted"
        submitted.mkdir()
        shutil.copy(next((course / "release").glob("*/*.ipynb")), submitted / "bob.ipynb")
        out = project / "build" / "grades" / "01"
        grader.grade("01", submitted, out)

        def student_reads(path: Path) -> bool:
            done = subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(path)],
                                  capture_output=True)  # fmt: skip
            return done.returncode == 0

        assert student_reads(project / "README.md")
        for secret in (
            next((course / "source").glob("*/*.ipynb")),
            course / "gradebook.db",
            out / "grades.csv",
            out / "feedback" / "bob.html",
        ):
            assert secret.exists() and not student_reads(secret), secret
    finally:
        shutil.rmtree(project)
