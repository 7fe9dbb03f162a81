"""The conventions of tools/conventions.py. A language is its catalogs plus one strings file: a
fake third language, added that way only, gets its notebooks and its site. An exercise section
has its cells in their roles (answer, check, solution) and numbers, and each lesson's
exercises are the checks of its module in utils/exercises."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import shutil
from pathlib import Path

import nbformat
import pytest

import utils.exercises
from tools import conventions
from tools.authoring import i18n
from tools.lessons import TOC, lesson_notebooks
from tools.publishing import build_site

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder of the translations, with ``xx``: the Chinese catalogs and words under a
    new code and name (what a translator starting a language would copy)."""
    strings = tmp_path / "strings"
    shutil.copytree(conventions.STRINGS_DIR, strings)
    words = conventions.strings("zh")
    words["language_name"], words["lesson"]["html_lang"] = "Fakish", "x-fake"
    (strings / "xx.json").write_text(json.dumps(words, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(conventions, "STRINGS_DIR", strings)
    translations = tmp_path / "translations"
    shutil.copytree(ROOT / "translations" / "zh", translations / "zh")
    shutil.copytree(ROOT / "translations" / "zh", translations / "xx")
    for catalog in (translations / "xx").glob("*.json"):
        data = json.loads(catalog.read_text(encoding="utf-8"))
        data["language"] = "xx"
        catalog.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return translations


@pytest.mark.e2e  # builds translations and the site for a new language (about 30 s)
def test_a_third_language_is_a_catalog_and_a_strings_file(
    fake_language: Path, tmp_path: Path
) -> None:
    # Rule: no tool names the languages; they come from the strings files.
    assert conventions.codes() == ["en", "xx", "zh"]
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in lesson_notebooks():
        shutil.copy(path, notebooks / path.name)
    shutil.copy(ROOT / TOC, tmp_path / TOC)
    args = ["--notebooks", str(notebooks), "--translations", str(fake_language), "--lang", "xx"]
    assert i18n.main([*args, "build"]) == 0
    assert sorted(p.name for p in (notebooks / "xx").glob("*.ipynb")) == sorted(
        p.name for p in notebooks.glob("*.ipynb")
    )

    site = tmp_path / "site"
    build_site.build_site(notebooks, site, log=lambda _: None, translations=fake_language)
    page = (site / "xx" / "01_tensors.html").read_text(encoding="utf-8")
    assert 'lang="x-fake"' in page
    assert "Fakish" in (site / "index.html").read_text(encoding="utf-8")  # the switcher
    assert (site / "zh" / "01_tensors.html").is_file()  # the others are still built


# --- the cells of an exercise section (tools/conventions.py, exercise_problems) ----------------


def _exercise_section(count: int = 2) -> list[nbformat.NotebookNode]:
    """A lesson's exercise section as CONTRIBUTING.md ("Exercises that answer back") lays it
    out, with ``count`` exercises."""

    def tagged(cell, *tags, n=None):
        cell.metadata["tags"] = list(tags)
        if n is not None:
            cell.metadata["exercise"] = n
        return cell

    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md("# 01 · A lesson"),
        code("x = 1"),
        tagged(md("## Exercises"), "exercise"),
        tagged(code("from utils.exercises import tensors as ex"), "exercise"),
    ]
    for n in range(1, count + 1):
        cells += [
            tagged(md(f"### Exercise {n}. Title\n\nDefine `a{n}`."), "exercise"),
            tagged(code(f"a{n} = ..."), "exercise", "answer", n=n),
            tagged(code(f"ex.q{n}.check(a{n})"), "exercise", "check", n=n),
        ]
    cells.append(tagged(md("## Solutions"), "solution"))
    for n in range(1, count + 1):
        cells += [
            tagged(md(f"### {n}. Title"), "solution"),
            tagged(code(f"a{n} = {n}"), "solution", n=n),
            tagged(code(f"ex.q{n}.check(a{n})"), "solution", "check", n=n),
        ]
    return cells


def _problems(cells: list[nbformat.NotebookNode]) -> list[str]:
    return conventions.exercise_problems(nbformat.v4.new_notebook(cells=cells))


@pytest.mark.parametrize("path", lesson_notebooks(), ids=lambda p: p.stem)
def test_every_lessons_exercises_follow_the_convention(path: Path) -> None:
    problems = conventions.exercise_problems(nbformat.read(path, as_version=4))
    assert problems == [], f"{path.name}:\n" + "\n".join(problems)


def test_the_exercise_section_as_laid_out_has_no_problem() -> None:
    assert _problems(_exercise_section()) == []
    # A solution may take more than one code cell; its check follows the last one.
    cells = _exercise_section()
    extra = nbformat.v4.new_code_cell("print(a2)", metadata={"tags": ["solution"], "exercise": 2})
    cells.insert(len(cells) - 1, extra)
    assert _problems(cells) == []


def _at(cells, source: str) -> int:
    return next(i for i, c in enumerate(cells) if c.source == source)


def test_a_check_must_directly_follow_its_answer_or_solution() -> None:
    cells = _exercise_section()
    check = cells.pop(_at(cells, "ex.q1.check(a1)"))
    cells.insert(_at(cells, "### Exercise 2. Title\n\nDefine `a2`.") + 1, check)  # under Q2
    assert any(
        "the check of exercise 1 must directly follow its answer cell" in p
        for p in _problems(cells)
    )
    cells = _exercise_section()
    solution = _at(cells, "a2 = 2")
    cells.insert(solution, cells.pop(solution + 1))  # the check before the solution code
    assert any("must directly follow its solution code cell" in p for p in _problems(cells))


def test_each_cell_of_an_exercise_names_its_number() -> None:
    for source in ("a1 = ...", "ex.q1.check(a1)", "a1 = 1"):
        cells = _exercise_section()
        del cells[_at(cells, source)].metadata["exercise"]
        assert any('in its metadata, "exercise": n' in p for p in _problems(cells)), source
    cells = _exercise_section()
    cells[_at(cells, "a2 = ...")].metadata["exercise"] = 1  # copied from the cell above
    found = _problems(cells)
    assert "exercise 1 has 2 answer cells in the exercise part, not one" in found
    assert "exercise 2 has 0 answer cells in the exercise part, not one" in found


def test_every_exercise_has_one_answer_one_check_and_a_checked_solution() -> None:
    cells = _exercise_section()
    del cells[_at(cells, "a2 = 2") + 1]  # the solution's check
    assert _problems(cells) == ["exercise 2 has 0 check cells in the solution part, not one"]
    cells = _exercise_section()
    del cells[_at(cells, "ex.q2.check(a2)")]  # the exercise's check, the first of the two
    assert "exercise 2 has 0 check cells in the exercise part, not one" in _problems(cells)
    cells = _exercise_section(3)
    for source in ("### 3. Title", "a3 = 3", "ex.q3.check(a3)"):
        del cells[_at(cells, source)]
    assert "exercise 3 has no solution code in the solution part" in _problems(cells)


def test_a_check_holds_its_own_exercises_call_and_nothing_else() -> None:
    for wrong in ("ex.q2.check(a1)", "ex.q1.check(a1)\nprint('done')", "print(ex.q1.check(a1))"):
        cells = _exercise_section()
        cells[_at(cells, "ex.q1.check(a1)")].source = wrong
        assert any("holds one call, `ex.q1.check(...)`" in p for p in _problems(cells)), wrong
    cells = _exercise_section()
    cells[_at(cells, "a1 = 1") + 1].source = "ex.q1.check(b1)"  # not the answer cell's names
    assert any("must make the same call as the exercise's check" in p for p in _problems(cells))


def test_an_answer_follows_its_question() -> None:
    cells = _exercise_section()
    cells[_at(cells, "### Exercise 2. Title\n\nDefine `a2`.")].source = "### Exercise 3. Title"
    assert any("must follow its question" in p for p in _problems(cells))
    cells = _exercise_section()
    del cells[_at(cells, "### Exercise 1. Title\n\nDefine `a1`.")]
    assert any("answer cell of exercise 1 must follow its question" in p for p in _problems(cells))


def test_answer_and_check_cells_belong_to_the_exercise_and_solution_parts() -> None:
    cells = _exercise_section()
    stray = nbformat.v4.new_code_cell("ex.q1.check(a1)", metadata={"tags": ["check"]})
    cells.insert(2, stray)  # on the core path
    assert any("tagged check outside the exercise or solution part" in p for p in _problems(cells))
    cells = _exercise_section()
    cells[_at(cells, "a1 = 1")].metadata["tags"] = ["solution", "answer"]
    assert any("tagged answer outside the exercise part" in p for p in _problems(cells))
    cells = _exercise_section()
    cells[_at(cells, "### Exercise 1. Title\n\nDefine `a1`.")].metadata["tags"].append("check")
    assert any("a check cell must be a code cell" in p for p in _problems(cells))


def test_exercises_are_numbered_from_one() -> None:
    cells = _exercise_section()
    for cell in cells:
        if cell.metadata.get("exercise") == 2:
            cell.metadata["exercise"] = 3
            cell.source = cell.source.replace("q2", "q3").replace("Exercise 2", "Exercise 3")
    assert "the exercises are numbered [1, 3], not 1 to 2" in _problems(cells)


def test_a_lesson_whose_exercises_do_not_answer_back_is_named() -> None:
    cells = [
        nbformat.v4.new_markdown_cell(
            "## Exercises\n\n1. **One.** Do it.", metadata={"tags": ["exercise"]}
        ),
        nbformat.v4.new_code_cell("assert True", metadata={"tags": ["solution"]}),
    ]
    assert _problems(cells) == [
        "its exercises have no answer cell: each asks for an answer and checks it"
    ]
    assert _problems(cells[1:]) == []  # a lesson without exercises


# --- each lesson's checks: utils/exercises/<lesson>.py ------------------------------------------

LESSONS = {path.stem.split("_", 1)[1]: path for path in lesson_notebooks()}
# A module whose name starts with "_" holds what several lessons' checks share.
EXERCISE_MODULES = sorted(
    m.name for m in pkgutil.iter_modules(utils.exercises.__path__) if not m.name.startswith("_")
)


def _checks(module) -> dict[int, utils.exercises.Exercise]:
    """The module's exercises by the number in their name, ``q1``, ``q2``, ..."""
    return {
        int(name[1:]): value
        for name, value in vars(module).items()
        if re.fullmatch(r"q\d+", name) and isinstance(value, utils.exercises.Exercise)
    }


@pytest.mark.parametrize("name", EXERCISE_MODULES)
def test_each_lessons_exercises_are_the_checks_of_its_module(name: str) -> None:
    module = importlib.import_module(f"utils.exercises.{name}")
    assert name in LESSONS, (
        f"utils/exercises/{name}.py checks no lesson of {TOC}: {sorted(LESSONS)}"
    )
    checks = _checks(module)
    assert sorted(checks) == list(range(1, len(checks) + 1)), f"{name}: {sorted(checks)}"
    assert all(check.number == n for n, check in checks.items()), "q<n> is @exercise(n)"
    nb = nbformat.read(LESSONS[name], as_version=4)
    numbers = conventions.answer_numbers(nb)
    assert numbers == sorted(checks), (
        f"{LESSONS[name].name} asks for exercises {numbers}; utils/exercises/{name}.py checks "
        f"{sorted(checks)}"
    )
    imports = f"from utils.exercises import {name} as ex"
    exercise_code = [
        c.source
        for c in nb.cells
        if c.cell_type == "code" and conventions.EXERCISE in c.metadata.get("tags", [])
    ]
    assert any(imports in source for source in exercise_code), f"no `{imports}` in its exercises"


@pytest.mark.parametrize("name", sorted(LESSONS))
def test_a_lesson_with_answer_cells_has_its_module_of_checks(name: str) -> None:
    if conventions.answer_numbers(nbformat.read(LESSONS[name], as_version=4)):
        assert name in EXERCISE_MODULES, f"{LESSONS[name].name}: no utils/exercises/{name}.py"
