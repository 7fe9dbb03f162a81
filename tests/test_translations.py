"""The Chinese notebooks (notebooks/zh) are never stale: tools/i18n.py's checks, enforced.

The Chinese notebooks get no nbval run of their own, on purpose: their code cells, stored
outputs and metadata are checked here to be exactly the English notebooks' (which nbval
re-executes and compares), so a second run would execute the same code against the same
outputs. What can differ, the markdown, is checked to be translated from the current
English text. nbval is kept away from notebooks/zh (pyproject.toml, norecursedirs; checked in
tests/test_notebooks_guard.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import i18n

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
FIX = "translate with `python tools/i18n.py todo {stem}` + `import` (translations/zh/glossary.md)"


# --- the real notebooks --------------------------------------------------------------------


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_every_markdown_cell_has_a_current_translation(english: Path) -> None:
    nb = nbformat.read(english, as_version=4)
    state = i18n.status(nb, i18n.Catalog.load(english))
    assert not state.missing, (
        f"{english.name}: {len(state.missing)} markdown cells have no Chinese translation "
        f"({' '.join(state.missing)}): " + FIX.format(stem=english.stem)
    )
    assert not state.stale, (
        f"{english.name}: the English text of cells {' '.join(state.stale)} changed since they "
        "were translated: " + FIX.format(stem=english.stem)
    )
    assert not state.damaged, (
        f"{english.name}: translations lost code, math or links: {state.damaged}"
    )
    assert not state.orphans, (
        f"{english.name}: catalog entries for cells that no longer exist: {state.orphans} "
        f"(`python tools/i18n.py prune {english.stem}`)"
    )


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_chinese_notebook_has_the_english_code_and_outputs(english: Path) -> None:
    chinese = i18n.translated_path(english)
    assert chinese.exists(), f"{chinese} is missing: run `make translations`"
    en = nbformat.read(english, as_version=4)
    zh = nbformat.read(chinese, as_version=4)
    found = i18n.differences(en, zh)
    assert not found, f"{chinese} differs from {english} ({found[:5]}): run `make translations`"
    expected = i18n.notebook_text(i18n.translate(en, i18n.Catalog.load(english)))
    assert chinese.read_text(encoding="utf-8") == expected, (
        f"{chinese} is not what `make translations` writes now (edited by hand, or the English "
        "notebook or its catalog changed since): run `make translations`"
    )


def test_no_chinese_notebook_without_an_english_one() -> None:
    names = {p.name for p in NOTEBOOKS}
    extra = [p.name for p in (ROOT / "notebooks" / "zh").glob("*.ipynb") if p.name not in names]
    assert not extra, f"notebooks/zh has notebooks with no English source: {extra}"


# --- the mechanism, on a tiny notebook -----------------------------------------------------


def _tiny(tmp_path: Path) -> Path:
    """notebooks/01_tiny.ipynb: two markdown cells around one code cell with an output."""
    nb = new_notebook(
        cells=[
            new_markdown_cell("# 01 · Tiny\n\nUse `torch.ones` and $x^2$.", id="head"),
            new_code_cell(
                "print(1)",
                id="code",
                execution_count=1,
                outputs=[new_output("stream", name="stdout", text="1\n")],
            ),
            new_markdown_cell("## Summary\n\nSee [docs](https://pytorch.org).", id="tail"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    folder = tmp_path / "notebooks"
    folder.mkdir()
    path = folder / "01_tiny.ipynb"
    nbformat.write(nb, path)
    return path


GOOD = {
    "head": "# 01 · 小例子\n\n使用 `torch.ones` 和 $x^2$。",
    "tail": "## 小结\n\n参见[文档](https://pytorch.org)。",
}


@pytest.fixture
def cli(tmp_path: Path, capsys):
    """``python tools/i18n.py ARGS`` on tmp_path's notebooks and catalogs, run in-process:
    (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        folders = ["--notebooks", str(tmp_path / "notebooks")]
        code = i18n.main([*folders, "--translations", str(tmp_path / "translations"), *args])
        return (code, *capsys.readouterr())

    return run


def test_missing_and_stale_cells_are_named(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    root = tmp_path / "translations"
    i18n.record(english, {"head": GOOD["head"]}, "zh", root, allow_identical=False)
    assert i18n.check(english.parent, "zh", root) == [
        "01_tiny: 1 untranslated: tail",
    ], "the missing cell is named (and the written notebook is current)"

    nb = nbformat.read(english, as_version=4)
    nb.cells[0].source += " Then `torch.zeros`."
    nbformat.write(nb, english)
    problems = i18n.check(english.parent, "zh", root)
    assert "01_tiny: 1 stale (English changed since translated): head" in problems
    assert any("is not what `make translations` writes now" in p for p in problems)
    # Until it is retranslated, the stale cell shows the current English, never the old text.
    built = i18n.translate(nb, i18n.Catalog.load(english, "zh", root))
    assert built.cells[0].source == nb.cells[0].source


def test_build_copies_code_and_outputs_and_check_names_a_changed_code_cell(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    root = tmp_path / "translations"
    i18n.record(english, GOOD, "zh", root, allow_identical=False)
    i18n.build(english.parent, "zh", root)
    chinese = i18n.translated_path(english, "zh")
    en, zh = (nbformat.read(p, as_version=4) for p in (english, chinese))
    assert [c.source for c in zh.cells] == [GOOD["head"], "print(1)", GOOD["tail"]]
    assert i18n.differences(en, zh) == []
    assert i18n.check(english.parent, "zh", root) == []

    zh.cells[1].outputs[0].text = "2\n"  # an output edited in the Chinese notebook
    zh.cells[1].source = "print(2)"
    nbformat.write(zh, chinese)
    assert i18n.differences(en, zh) == [
        "cell 1 (id code, code): outputs differs from the English notebook",
        "cell 1 (id code, code): source differs from the English notebook",
    ]
    assert any("01_tiny.ipynb is not what" in p for p in i18n.check(english.parent, "zh", root))


def test_a_translation_that_loses_code_math_or_links_is_refused(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    root = tmp_path / "translations"
    bad = {"head": "# 01 · 小例子\n\n使用 torch.ones 和 x 的平方。", "tail": "小结：参见文档。"}
    with pytest.raises(i18n.I18nError) as err:
        i18n.record(english, bad, "zh", root, allow_identical=False)
    message = str(err.value)
    for lost in ("code span `torch.ones`", "formula $x^2$", "https://pytorch.org", "heading"):
        assert lost in message, f"{lost!r} not named in: {message}"
    assert not (root / "zh" / "01_tiny.json").exists(), "nothing may be recorded"


def test_an_untranslated_or_unknown_cell_is_refused(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    nb = nbformat.read(english, as_version=4)
    with pytest.raises(i18n.I18nError, match="head: the text is the English text"):
        i18n.record(english, {"head": nb.cells[0].source}, "zh", tmp_path, allow_identical=False)
    with pytest.raises(i18n.I18nError, match="code: is not a markdown cell"):
        i18n.record(english, {"code": "打印"}, "zh", tmp_path, allow_identical=False)
    with pytest.raises(i18n.I18nError, match="nope: no cell"):
        i18n.record(english, {"nope": "不存在"}, "zh", tmp_path, allow_identical=False)


def test_orphan_entries_are_named_and_pruned(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    root = tmp_path / "translations"
    i18n.record(english, GOOD, "zh", root, allow_identical=False)
    nb = nbformat.read(english, as_version=4)
    nb.cells[2].id = "renamed"
    nbformat.write(nb, english)
    state = i18n.status(nb, i18n.Catalog.load(english, "zh", root))
    assert (state.missing, state.orphans) == (["renamed"], ["tail"])
    assert i18n.prune(english, "zh", root) == ["tail"]
    assert "tail" not in i18n.Catalog.load(english, "zh", root).entries


def test_translator_round_trip_through_the_command_line(tmp_path: Path, cli) -> None:
    """todo --json -> fill in -> import -> check passes: what a translator session does."""
    english = _tiny(tmp_path)
    code, out, err = cli("todo", "01", "--json")
    assert code == 0, err
    wanted = json.loads(out)
    assert set(wanted) == {"head", "tail"} and wanted["head"].startswith("# 01 · Tiny")
    code, out, _ = cli("check")
    assert code == 1 and "01_tiny: 2 untranslated: head tail" in out

    batch = tmp_path / "t.json"
    batch.write_text(json.dumps(GOOD, ensure_ascii=False), encoding="utf-8")
    code, out, err = cli("import", "01_tiny", str(batch))
    assert code == 0, err
    assert "2/2 markdown cells translated" in out
    code, out, err = cli("check")
    assert code == 0, out + err
    zh = nbformat.read(i18n.translated_path(english, "zh"), as_version=4)
    assert zh.cells[0].source == GOOD["head"]

    (tmp_path / "one.md").write_text("## 总结\n\n参见[文档](https://pytorch.org)。\n", "utf-8")
    assert cli("set", "01", "tail", str(tmp_path / "one.md"))[0] == 0
    assert cli("todo", "01")[1].startswith("01_tiny: 2/2 markdown cells")
    code, _, err = cli("todo", "09")
    assert code == 1 and "matches none" in err


def test_a_line_break_inside_chinese_text_is_named() -> None:
    """Browsers show a line break between two Chinese characters as a stray space."""
    assert i18n.damage("One\nsentence.", "第一行，\n第二行。") == [
        "line break in '，⏎第' shows as a space in the browser: "
        "write each Chinese paragraph or list item on one line"
    ]
    assert i18n.damage("Use NumPy\nhere.", "与 NumPy\n共享数据：\n- 列表项") == []
