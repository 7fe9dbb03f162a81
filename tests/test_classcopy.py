"""A graded course's class copy (tools/teaching/classcopy.py): what the hub's link hands out
holds no solution, and each teacher's commit arrives as one more commit. The hub pulling it, as
students do: tests/test_hub.py (make test-e2e)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest

from tools.teaching import classcopy, classroom

ROOT = Path(__file__).resolve().parents[1]
GIT = ["-c", "user.name=T", "-c", "user.email=t@example.org"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *GIT, *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def lessons(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A teacher's clone of the committed lessons, on its branch main."""
    clone = tmp_path_factory.mktemp("teacher") / "pytorch-blitz"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    _git(clone, "checkout", "--quiet", "-B", "main")
    return clone


def _solution_lines(lessons: list[Path]) -> set[str]:
    """The lines of the lessons' solution cells that no other cell of theirs has (a line one
    lesson teaches may be another's solution)."""
    solutions, taught = set(), []
    for lesson in lessons:
        for cell in nbformat.read(lesson, as_version=4).cells:
            if "solution" in cell.metadata.get("tags", []):
                solutions |= {x.strip() for x in cell.source.splitlines() if len(x.strip()) > 30}
            else:
                taught.append(cell.source)
    text = "\n".join(taught)
    return {line for line in solutions if line not in text}


def _files(tree: Path) -> dict[str, str]:
    return {
        str(p.relative_to(tree)): p.read_text(encoding="utf-8", errors="replace")
        for p in tree.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(tree).parts
    }


def test_the_class_copy_holds_no_solution_and_grows_by_one_commit_a_change(
    lessons: Path, tmp_path: Path
) -> None:
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    lines = classcopy.build(lessons, "main", class_dir)
    copy = class_dir / lessons.name
    assert "without its" in lines[0] and str(copy) in lines[0]
    files = _files(copy)
    assert not any(name.startswith(("tests/", "translations/", ".ci/")) for name in files)
    notebooks = sorted(n for n in files if n.endswith(".ipynb"))
    assert (
        "notebooks/01_tensors.ipynb" in notebooks and "notebooks/zh/01_tensors.ipynb" in notebooks
    )
    for name in notebooks:
        nb = json.loads(files[name])
        tags = [t for c in nb["cells"] for t in c.get("metadata", {}).get("tags", [])]
        assert "solution" not in tags, name
        assert "exercise" in tags and "check" in tags, name  # the exercises stay
        first = next(c for c in nb["cells"] if "exercise" in c["metadata"].get("tags", []))
        intro = "".join(first["source"])
        assert "olution" not in intro and "参考答案" not in intro, (name, intro)
    # no solution line anywhere in the copy but in the checks (utils/exercises: TEACHING.md)
    solutions = _solution_lines(sorted((lessons / "notebooks").rglob("*.ipynb")))
    assert len(solutions) > 50
    for line in solutions:
        holders = [n for n, text in files.items() if line in text]
        assert all(n.startswith("utils/exercises/") for n in holders), (line, holders)
    # students read and pull it; one commit
    assert stat.S_IMODE(copy.stat().st_mode) == 0o755
    assert stat.S_IMODE((copy / "notebooks" / "01_tensors.ipynb").stat().st_mode) == 0o644
    assert _git(copy, "rev-list", "--count", "main").strip() == "1"
    # a link of the lessons within the copy stays a link (the Chinese decks' style)
    assert os.readlink(copy / "notebooks" / "zh" / "rise.css") == "../rise.css"

    # again, nothing new: no commit; a teacher's commit: one more, on top
    assert "up to date" in classcopy.build(lessons, "main", class_dir)[0]
    assert _git(copy, "rev-list", "--count", "main").strip() == "1"
    readme = lessons / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\nFixed by the teacher.\n")
    _git(lessons, "commit", "--quiet", "-am", "A fix")
    classcopy.build(lessons, "main", class_dir)
    assert _git(copy, "rev-list", "--count", "main").strip() == "2"
    assert (copy / "README.md").read_text(encoding="utf-8").endswith("Fixed by the teacher.\n")
    assert _git(copy, "status", "--porcelain") == ""
    assert not any(p.name.startswith(".") and p.name != ".git" for p in class_dir.iterdir())


def test_a_linked_class_copy_or_a_missing_branch_is_refused(lessons: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    (class_dir / lessons.name).symlink_to(elsewhere)
    with pytest.raises(classcopy.CopyError, match="through a link"):
        classcopy.build(lessons, "main", class_dir)
    assert list(elsewhere.iterdir()) == []
    (class_dir / lessons.name).unlink()
    with pytest.raises(classcopy.CopyError, match="git rev-parse"):
        classcopy.build(lessons, "no-such-branch", class_dir)
    assert list(class_dir.iterdir()) == []


def test_the_teachers_copies_are_closed_but_what_students_run(tmp_path: Path) -> None:
    checkout, lessons, outside = tmp_path / "checkout", tmp_path / "lessons", tmp_path / "out"
    for folder in (checkout, lessons, outside):
        folder.mkdir(mode=0o755)
    for name in (*classcopy.STUDENTS_RUN, "notebooks", "tests", ".git", "build"):
        (checkout / name).mkdir(mode=0o755)
    (checkout / "README.md").write_text("read me\n")
    os.chmod(checkout / "README.md", 0o644)
    (checkout / "shared").symlink_to(outside)
    lines = classcopy.close_course(checkout, lessons)
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in checkout.iterdir()
             if not p.is_symlink()}  # fmt: skip
    assert {n for n, m in modes.items() if m & 0o077} == set(classcopy.STUDENTS_RUN)
    assert modes["README.md"] == 0o600 and modes["notebooks"] == 0o700
    assert stat.S_IMODE(lessons.stat().st_mode) == 0o700
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755  # a link is never followed
    assert any("notebooks" in x and str(lessons) in x for x in lines)
    assert any("shared" in x and "links" in x for x in lines)
    assert classcopy.close_course(checkout, lessons) == [lines[1]]  # nothing more to close


def test_hub_course_is_practice_or_graded_and_graded_links_the_class_copy(tmp_path: Path) -> None:
    clone = tmp_path / "pytorch-blitz"
    env = {"HUB_LESSONS": str(clone), "HUB_SRV": str(tmp_path / "srv")}
    assert classroom.settings(env).pulled == clone
    graded = classroom.settings(env | {"HUB_COURSE": "graded"})
    copy = tmp_path / "srv" / "class" / "pytorch-blitz"
    assert graded.pulled == copy
    assert parse_qs(urlsplit(graded.link()).query)["repo"] == [copy.as_uri()]
    assert f"directory = {copy}" in classroom.gitconfig_text(graded)
    with pytest.raises(classroom.SettingError, match="HUB_COURSE='exam'.*practice.*graded"):
        classroom.settings(env | {"HUB_COURSE": "exam"})
