"""The Chinese notebooks (notebooks/zh) are never stale: tools/authoring/i18n.py's checks, enforced.

The Chinese notebooks get no nbval run of their own, on purpose: their code (with the
comments taken out), stored outputs and metadata are checked here to be exactly the English
notebooks' (which nbval re-executes and compares), so a second run would execute the same
code against the same outputs. What can differ, the markdown and the code comments, is
checked to be translated from the current English text (tests/test_i18n_comments.py tests
the comments' mechanism). nbval is kept away from notebooks/zh (pyproject.toml,
norecursedirs; checked in tests/test_notebooks_guard.py).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests.toc import list_lessons
from tools.authoring import i18n
from tools.lessons import lesson_notebooks
from tools.publishing import build_site

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
IDS = [p.stem for p in NOTEBOOKS]
FIX = (
    "translate with `python -m tools.authoring.i18n todo {stem}` + `import` "
    "(translations/zh/glossary.md)"
)


def differences(english: nbformat.NotebookNode, translated: nbformat.NotebookNode) -> list[str]:
    """How ``translated`` differs from ``english`` besides markdown text and code comments
    (tests/test_i18n_comments.py uses it too)."""
    found = [
        f"notebook {key} differs"
        for key in ("nbformat", "nbformat_minor", "metadata")
        if english.get(key) != translated.get(key)
    ]
    if len(english.cells) != len(translated.cells):
        return found + [f"{len(translated.cells)} cells instead of {len(english.cells)}"]
    for n, (en, tr) in enumerate(zip(english.cells, translated.cells, strict=True)):
        keys = set(en) | set(tr)
        if en.cell_type == tr.cell_type and (
            en.cell_type == "markdown"
            or (en.cell_type == "code" and i18n.code_parts(en.source) == i18n.code_parts(tr.source))
        ):
            keys.discard("source")
        found += [
            f"cell {n} (id {en.get('id')}, {en.cell_type}): {key} differs from the English notebook"
            for key in sorted(keys)
            if en.get(key) != tr.get(key)
        ]
    return found


# --- the real notebooks --------------------------------------------------------------------


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_every_markdown_cell_and_code_comment_has_a_current_translation(english: Path) -> None:
    nb = nbformat.read(english, as_version=4)
    state = i18n.status(nb, i18n.Catalog.load(english))
    assert state.code_cells, f"{english.name}: no code cell with comments to translate"
    assert not state.missing, (
        f"{english.name}: {len(state.missing)} cells have no Chinese translation "
        f"({' '.join(state.missing)}): " + FIX.format(stem=english.stem)
    )
    assert not state.stale, (
        f"{english.name}: the English text of cells {' '.join(state.stale)} changed since they "
        "were translated: " + FIX.format(stem=english.stem)
    )
    assert not state.damaged, (
        f"{english.name}: translations lost or changed code, math or links: {state.damaged}"
    )
    assert not state.orphans, (
        f"{english.name}: catalog entries for cells that no longer exist: {state.orphans} "
        f"(`python -m tools.authoring.i18n prune {english.stem}`)"
    )


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_chinese_notebook_has_the_english_code_and_outputs(english: Path) -> None:
    chinese = i18n.translated_path(english)
    assert chinese.exists(), f"{chinese} is missing: run `make translations`"
    en = i18n.check_lines(nbformat.read(english, as_version=4), "zh")
    zh = nbformat.read(chinese, as_version=4)
    found = differences(en, zh)
    assert not found, f"{chinese} differs from {english} ({found[:5]}): run `make translations`"
    # Outputs as stored, byte for byte (nbval checks the English ones only), but for the
    # exercise checks' lines, which speak Chinese (test below).
    en_raw = json.loads(nbformat.writes(en))["cells"]
    zh_raw = json.loads(chinese.read_text(encoding="utf-8"))["cells"]
    for en_cell, zh_cell in zip(en_raw, zh_raw, strict=True):
        assert json.dumps(en_cell.get("outputs")) == json.dumps(zh_cell.get("outputs")), (
            f"{chinese}: cell {en_cell.get('id')}: outputs differ from the English notebook"
        )
    # Whether it is exactly what `make translations` writes now: tests/test_generate.py.


CHECK_LINE = re.compile(r"^([✓✗…]) (\S+) (\d+)(.*)$", re.M)  # an exercise check's stored line


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_the_chinese_notebooks_check_lines_are_chinese(
    english: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 45 item 11: a Chinese learner reads what the checks print in Chinese, before
    # running them: each stored line is the one the check prints with BLITZ_LANG=zh.
    from utils import exercises

    monkeypatch.setenv("BLITZ_LANG", "zh")
    stored = {
        lang: [
            m.groups()
            for cell in nbformat.read(path, as_version=4).cells
            for out in cell.get("outputs", [])
            if out.get("output_type") == "stream"
            for m in CHECK_LINE.finditer(out.text)
        ]
        for lang, path in (("en", english), ("zh", i18n.translated_path(english)))
    }
    assert [(m, n) for m, _, n, _ in stored["zh"]] == [(m, n) for m, _, n, _ in stored["en"]]
    for mark, word, n, rest in stored["zh"]:
        answer = ... if mark == "…" else None
        said = exercises.Exercise(int(n), lambda *a: None).outcome(answer)[1]
        assert f"{mark} {word} {n}{rest}" == said, "run `make translations`"


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
    list_lessons(folder)
    return path


GOOD = {
    "head": "# 01 · 小例子\n\n使用 `torch.ones` 和 $x^2$。",
    "tail": "## 小结\n\n参见[文档](https://pytorch.org)。",
}


@pytest.fixture
def cli(tmp_path: Path, capsys):
    """``python -m tools.authoring.i18n ARGS`` on tmp_path's notebooks and catalogs, run in-process:
    (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        folders = ["--notebooks", str(tmp_path / "notebooks")]
        code = i18n.main([*folders, "--translations", str(tmp_path / "translations"), *args])
        return (code, *capsys.readouterr())

    return run


def test_translations_keep_a_notebook_they_did_not_write(tmp_path: Path, cli) -> None:
    # Rule: build deletes or overwrites only the notebooks it wrote, and names what it kept.
    english = _tiny(tmp_path)
    old = english.with_name("02_old.ipynb")
    nbformat.write(new_notebook(cells=[new_markdown_cell("# 02 · Old", id="old")]), old)
    i18n.record(old, {"old": "# 02 · 旧课"}, "zh", tmp_path / "translations", False)
    list_lessons(old.parent)
    assert cli("build")[0] == 0
    zh = english.parent / "zh"
    mine = {"Untitled.ipynb": '{"cells": []}\n', "my_copy.ipynb": '{"mine": true}\n'}
    for name, text in mine.items():
        (zh / name).write_text(text, encoding="utf-8")
    old.unlink()
    list_lessons(old.parent)  # the lesson and its line in _toc.yml are gone
    code, out, err = cli("build")
    assert code == 0, err
    assert not (zh / "02_old.ipynb").exists(), "a lesson's translation, its English gone, stays"
    for name, text in mine.items():
        assert (zh / name).read_text(encoding="utf-8") == text, f"{name} was lost"
    kept = [line for line in (out + err).splitlines() if line.startswith("kept ")]
    assert len(kept) == 1 and all(name in kept[0] for name in mine), out + err

    # `--lang PATH` names any folder: a notebook of the lesson's name there is not the tool's.
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "01_tiny.ipynb").write_text("my own work", encoding="utf-8")
    (other / "notes.ipynb").write_text("more of my work", encoding="utf-8")
    code, out, err = cli("--lang", str(other), "build")
    assert (other / "01_tiny.ipynb").read_text(encoding="utf-8") == "my own work"
    assert (other / "notes.ipynb").read_text(encoding="utf-8") == "more of my work"
    kept = [line for line in (out + err).splitlines() if line.startswith("kept ")]
    assert len(kept) == 1 and "01_tiny.ipynb" in kept[0] and "notes.ipynb" in kept[0], out + err


def test_translations_delete_only_a_gone_lessons_translation_whatever_a_record_says(
    tmp_path: Path, cli
) -> None:
    # Item 5: the old record (notebooks/zh/.i18n-built.json) named what `build` deleted, and
    # anyone could add names to it. A translation is the tool's by its lesson and catalog,
    # never a link, never through one.
    english = _tiny(tmp_path)
    assert cli("build")[0] == 0
    zh, elsewhere = english.parent / "zh", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "03_gone.ipynb").write_text("mine, behind a link", encoding="utf-8")
    mine = {"my_copy.ipynb": "{}", "rise.css": "/* slides */", "01_tiny-Copy1.ipynb": "{}"}
    for name, text in mine.items():
        (zh / name).write_text(text, encoding="utf-8")
    (zh / "data").symlink_to(elsewhere)
    (zh / "03_gone.ipynb").symlink_to(elsewhere / "03_gone.ipynb")
    catalogs = tmp_path / "translations" / "zh"
    catalogs.mkdir(parents=True, exist_ok=True)
    (catalogs / "03_gone.json").write_text('{"cells": {}}', encoding="utf-8")
    record = {"notebooks": [*mine, "data", "03_gone.ipynb", "01_tiny.ipynb"]}
    (zh / ".i18n-built.json").write_text(json.dumps(record), encoding="utf-8")
    code, out, err = cli("build")
    assert code == 0, err
    assert {n: (zh / n).read_text(encoding="utf-8") for n in mine} == mine
    assert (zh / "data").is_symlink() and (zh / "03_gone.ipynb").is_symlink()
    assert (elsewhere / "03_gone.ipynb").read_text(encoding="utf-8") == "mine, behind a link"

    # The Chinese folder linked elsewhere: nothing is written or deleted through it.
    shutil.rmtree(zh)
    zh.symlink_to(elsewhere)
    code, out, err = cli("build")
    assert code == 0 and "kept" in out + err and "01_tiny.ipynb" in out + err, out + err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["03_gone.ipynb"]

    # A language that names a place outside notebooks/: nothing is written there.
    for lang in ("../elsewhere", str(elsewhere)):
        code, out, err = cli("--lang", lang, "build")
        assert code == 0 and "kept" in out + err, out + err
        assert sorted(p.name for p in elsewhere.iterdir()) == ["03_gone.ipynb"], lang


def test_the_project_ships_no_record_of_built_translations() -> None:
    # Item 5: the record is gone from the checkout and from the zip.
    from tools.publishing import archive

    assert not (ROOT / "notebooks" / "zh" / ".i18n-built.json").exists()
    assert not [n for n in archive.members() if n.endswith(".i18n-built.json")]


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
    assert differences(en, zh) == []
    assert i18n.check(english.parent, "zh", root) == []

    zh.cells[1].outputs[0].text = "2\n"  # an output edited in the Chinese notebook
    zh.cells[1].source = "print(2)"
    nbformat.write(zh, chinese)
    assert differences(en, zh) == [
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
    with pytest.raises(i18n.I18nError, match=r"code: is a code cell without comments"):
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
    """Markdown joins the lines of a paragraph with a space: between Chinese characters, and
    beside them, the reader sees a stray space."""
    message = (
        "line break in '{}' shows as a space in the browser: "
        "write each Chinese paragraph or list item on one line"
    )
    assert i18n.damage("One\nsentence.", "第一行，\n第二行。") == [
        message.format("第一行，⏎第二行。")
    ]
    assert i18n.damage("Use NumPy\nhere.", "与 NumPy\n共享数据。") == [
        message.format("与 NumPy⏎共享数据。")
    ]
    # New blocks and hard breaks are not soft breaks; English text is not checked.
    assert (
        i18n.soft_breaks("共享数据：\n- 列表项\n  1. 子项\n\n## 标题\n| 表 |\n第一行\\\n第二行")
        == []
    )
    assert i18n.soft_breaks("$$\nx\n= 1\n$$\n```python\nx = 1\ny = 2\n```") == []
    assert i18n.soft_breaks("Plain English\ncontinues here.") == []


def test_sentences_count_code_math_and_links_as_one_character() -> None:
    text = (
        "**目标**：使用 `torch.ones` 和 $x^2$，见[文档](https://pytorch.org)。第二句！\n- 第三句\n"
    )
    assert i18n.sentences(text) == ["目标：使用 □ 和 □，见□", "第二句", "第三句"]
    assert i18n.sentences("| 层 | 输出 |\n|---|---|\n```python\nx = 1  # 注释\n```") == [
        "层",
        "输出",
        "---",
        "---",
    ]


def test_long_sentences_stacked_colons_and_nested_brackets_are_refused(tmp_path: Path) -> None:
    english = _tiny(tmp_path)
    long = "# 01 · 小例子\n\n使用 `torch.ones` 和 $x^2$，" + "这句话很长" * 16 + "。"
    with pytest.raises(i18n.I18nError, match=r"sentence of 8\d characters \(at most 80\)"):
        i18n.record(english, {"head": long}, "zh", tmp_path, allow_identical=False)
    assert len(i18n.sentences("这句话很长" * 16)[0]) == 80 and not i18n.style("这句话很长" * 16)
    assert i18n.style("硬件：CPU：GPU。") == ["two colons in one sentence: split '硬件：CPU：GPU…'"]
    assert i18n.style("见（第 02 课（选读））。") == [
        "brackets inside brackets: rephrase '见（第 02 课（选读））…'"
    ]
    assert i18n.style("见（第 02 课）和（第 03 课）。硬件：CPU。") == []


def test_comments_in_a_code_block_may_be_translated_the_code_may_not() -> None:
    english = "Run:\n\n```python\nx = 1  # the answer\ns = '# not a comment'\n```"
    good = "运行：\n\n```python\nx = 1  # 答案\ns = '# not a comment'\n```"
    assert i18n.damage(english, good) == []
    for bad in (
        good.replace("x = 1", "x = 2"),
        good.replace("'# not a comment'", "'# 不是注释'"),
        "运行：\n\n```python\nx = 1  # 答案\n```",
        "运行：`x = 1`",
    ):
        assert any("a code block changed" in p for p in i18n.damage(english, bad)), bad


def test_markup_or_addresses_a_translation_adds_are_refused(tmp_path: Path, cli) -> None:
    """A catalog entry is rendered as it is on the site: it may not add script or off-site loads."""
    english = _tiny(tmp_path)
    planted = '译文<script>window.PWN_ZH=1</script><img src="http://203.0.113.9/x.png">'
    entry = tmp_path / "cell.md"
    entry.write_text("## 小结\n\n参见[文档](https://pytorch.org)。" + planted, "utf-8")
    code, _, err = cli("set", "01", "tail", str(entry))
    assert code == 1 and "nothing recorded" in err
    for named in ("markup <script>", "markup <img>", "address http://203.0.113.9/x.png"):
        assert named in err, err

    # Written into the catalog by hand, past `set`: `check` still refuses it.
    problems = _checked_by_hand(english, tmp_path, GOOD["tail"] + planted)
    assert any("tail: markup <script>" in p for p in problems), problems
    # Markup the English has is kept; `code` that shows a tag is fine.
    assert i18n.damage("A <br> B `<b>`", "甲 <br> 乙 `<b>` `<i>`") == []


def _checked_by_hand(english: Path, tmp_path: Path, tail: str) -> list[str]:
    """What `check` says of a catalog whose "tail" entry was written by hand, past `set`."""
    root = tmp_path / "translations"
    i18n.record(english, GOOD, "zh", root, allow_identical=False)
    catalog = root / "zh" / "01_tiny.json"
    data = json.loads(catalog.read_text(encoding="utf-8"))
    data["cells"]["tail"]["text"] = [tail]
    catalog.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return i18n.check(english.parent, "zh", root)


# Ways past a check of the markdown's text: each reaches the page as script or an off-site load.
PAGE_ATTACKS = {
    "backticked-img": "``<img src=x onerror=alert(1)>`",
    "lone-backtick-block": "`\n\n<script>window.PWN_ZH=1</script>\n\n`",
    "reference-image": "![图][r]\n\n[r]: //203.0.113.9/x.png",
    "entity-encoded-url": "[点我][r]\n\n[r]: jav&#x61;script:alert(1)",
    # Item 1: markup Python's html.parser reads as a comment, and a browser does not.
    "comment-closed-at-once": "\n\n<!--> <script>window.PWN_ZH=1</script> -->",
    "comment-closed-by-bang": "\n\n<!-- --!> <img src=x onerror=alert(1)> -->",
    "cdata-in-html": "\n\n<![CDATA[ x > <img src=x onerror=alert(1)> ]]>",
    "comment-of-three-dashes": "\n\n<!---> <img src=x onerror=alert(1)> -->",
    "noscript-attribute": '<noscript><p title="</noscript><img src=x onerror=alert(1)>">',
}


@pytest.mark.parametrize("attack", PAGE_ATTACKS.values(), ids=PAGE_ATTACKS)
def test_a_translation_puts_nothing_on_the_page_the_english_does_not(
    tmp_path: Path, cli, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, attack: str
) -> None:
    # Rule: a translation is checked as rendered: no element, attribute or address the
    # English cell's rendering lacks (beyond plain Markdown).
    english = _tiny(tmp_path)
    entry = tmp_path / "cell.md"
    entry.write_text(GOOD["tail"] + attack, "utf-8")
    code, _, err = cli("set", "01", "tail", str(entry))
    assert code == 1 and "nothing recorded" in err and "on the page" in err, err

    problems = _checked_by_hand(english, tmp_path, GOOD["tail"] + attack)
    assert any("tail:" in p and "on the page" in p for p in problems), problems

    # Issue 46 case 1: the build refuses what `check` refuses, by the same function:
    # `make translations` (i18n build) and `make html` (build_site calls i18n.translate).
    built = i18n.translated_path(english)
    before = built.read_bytes()  # what `record` wrote while the catalog was sound
    code, _, err = cli("build")
    assert code == 1 and "refused" in err and "tail:" in err and "on the page" in err, err
    assert built.read_bytes() == before
    nb, catalog = (
        i18n.read_notebook(english),
        i18n.Catalog.load(english, "zh", tmp_path / "translations"),
    )
    with pytest.raises(i18n.I18nError, match="on the page"):
        i18n.translate(nb, catalog)
    site = tmp_path / "site"  # the tiny lesson has no real header: that is not what is tested
    monkeypatch.setattr(build_site, "parse_header", lambda path, nb: None)
    folders = ["--notebooks", str(english.parent), "--translations", str(tmp_path / "translations")]
    assert build_site.main([*folders, "--out", str(site)]) == 1
    assert "refused" in capsys.readouterr().err and not site.exists()
    assert i18n.refused(nb, catalog) == [
        p.removeprefix("01_tiny: ") for p in problems if "tail:" in p
    ]


def test_a_benign_translation_passes_the_rendered_check(tmp_path: Path, cli) -> None:
    # Rule: plain Markdown (emphasis, code, lists, in-page links) is what a translator may add.
    _tiny(tmp_path)
    entry = tmp_path / "cell.md"
    extra = "\n\n- **重点**：用 `torch.ones`。\n- 见[上文](#01-·-小例子)和 *说明*。<!-- 注释 -->"
    entry.write_text(GOOD["tail"] + extra, "utf-8")
    code, out, err = cli("set", "01", "tail", str(entry))
    assert code == 0, err
    assert i18n.rendered_markup("See [docs](https://pytorch.org).", GOOD["tail"] + extra) == []


def test_a_translation_is_judged_as_a_browser_parses_it() -> None:
    # Item 1: what a browser builds from the rendered cell, element by element (html5lib).
    english = "See [docs](https://pytorch.org)."
    for attack, named in (
        (PAGE_ATTACKS["comment-closed-at-once"], "markup <script>"),
        (PAGE_ATTACKS["comment-closed-by-bang"], 'markup <img onerror="alert(1)">'),
        (PAGE_ATTACKS["cdata-in-html"], 'markup <img onerror="alert(1)">'),
        (PAGE_ATTACKS["comment-of-three-dashes"], 'markup <img onerror="alert(1)">'),
    ):
        problems = i18n.rendered_markup(english, GOOD["tail"] + attack)
        assert any(p.startswith(named) for p in problems), (attack, problems)
    assert i18n.rendered_markup(english, GOOD["tail"] + "<!-- 一条注释 --> 文字 `<!-->`") == []


def test_a_translation_carries_no_html_output_of_its_own(tmp_path: Path) -> None:
    # Rule: outputs come from the English notebook only; HTML that differs is refused by name.
    english = _tiny(tmp_path)
    root = tmp_path / "translations"
    i18n.record(english, GOOD, "zh", root, allow_identical=False)
    script = {"text/html": "<script>window.PWN_ZH=1</script>", "text/plain": "x"}

    # In the translated notebook: an HTML output the English cell does not have.
    target = i18n.translated_path(english)
    nb = nbformat.read(target, as_version=4)
    nb.cells[1].outputs.append(new_output("display_data", data=script))
    nbformat.write(nb, target)
    problems = i18n.check(english.parent, "zh", root)
    assert any("cell code: a text/html output differs from the English" in p for p in problems), (
        problems
    )

    # In the catalog: an entry holds its text and hash, never outputs.
    i18n.build(english.parent, "zh", root)
    catalog = root / "zh" / "01_tiny.json"
    data = json.loads(catalog.read_text(encoding="utf-8"))
    data["cells"]["tail"]["outputs"] = [{"output_type": "display_data", "data": script}]
    catalog.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(
        i18n.I18nError, match="cell tail: fields outputs: an entry holds en_sha256 and text only"
    ):
        i18n.check(english.parent, "zh", root)


GLOSSARY = """# 术语表

## 统一写法

| English | 写作 | 每课首次出现 | 不要写 |
|---|---|---|---|
| rank | rank | 进程编号（rank） | 秩 |
| normalize | 标准化 | 标准化（常称归一化） | 归一化 |
| lesson | 第 NN 课 | — | 笔记本 0 |

## 其他
| x | y | z | w |
"""


def test_settled_terms_are_checked_lesson_by_lesson(tmp_path: Path) -> None:
    (tmp_path / "glossary.md").write_text(GLOSSARY, encoding="utf-8")
    terms = i18n.load_terms(tmp_path / "glossary.md")
    assert [t.written for t in terms] == ["rank", "标准化", "第 NN 课"]
    good = {
        "a": "每个进程编号（rank）各有一份；标准化（常称归一化）。",
        "b": "rank 0 保存；再标准化。",
    }
    assert i18n.term_problems(good, terms) == []
    bad = {"a": "秩 0 保存；见笔记本 04。", "b": "先标准化，再归一化。`rank` 是代码。"}
    assert i18n.term_problems(bad, terms) == [
        "cell a: '秩': the glossary writes 'rank' as 'rank' "
        "(first use in a lesson: '进程编号（rank）')",
        "cell b: '归一化': the glossary writes 'normalize' as '标准化' (first use in a lesson: "
        "'标准化（常称归一化）')",
        "cell b: first use of '标准化' in this lesson must read '标准化（常称归一化）'",
        "cell a: '笔记本 0': the glossary writes 'lesson' as '第 NN 课'",
    ]
    # An English word counts only as a whole word, outside code: `ranks` is not `rank`.
    assert i18n.term_problems({"a": "frankly `rank` ranks"}, terms) == []
    (tmp_path / "bad.md").write_text(GLOSSARY.replace("进程编号（rank）", "进程编号"), "utf-8")
    with pytest.raises(i18n.I18nError, match="must contain the written form 'rank'"):
        i18n.load_terms(tmp_path / "bad.md")


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_the_glossary_terms_are_used_as_settled(english: Path) -> None:
    terms = i18n.load_terms(ROOT / "translations" / "zh" / "glossary.md")
    assert len(terms) >= 10, "the glossary's 统一写法 table went missing"
    nb = nbformat.read(english, as_version=4)
    # The markdown and the code cells' comments, in the lesson's order (not the code).
    found = i18n.term_problems(i18n.lesson_prose(nb, i18n.Catalog.load(english)), terms)
    assert not found, f"{english.name}: " + "\n".join(found[:10])


def test_broken_inputs_are_one_line_naming_the_file(tmp_path: Path, cli) -> None:
    english = _tiny(tmp_path)
    catalog = tmp_path / "translations" / "zh" / "01_tiny.json"
    catalog.parent.mkdir(parents=True)
    catalog.write_text('{"notebook": "01_tiny.ipynb", "language": "zh", "cells": []}', "utf-8")
    code, out, err = cli("check")
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {catalog} is not a valid catalog ('cells' is a list")
    assert len(err.strip().splitlines()) == 1, err

    catalog.unlink()
    nb = nbformat.read(english, as_version=4)
    nb.nbformat_minor = 4
    for cell in nb.cells:
        del cell["id"]
    english.write_text(json.dumps(nb), encoding="utf-8")
    code, _, err = cli("todo", "01")
    assert code == 1 and "has cells without ids (nbformat 4.4)" in err and str(english) in err

    english.write_text('{"cells": [', encoding="utf-8")
    for args in (("check",), ("build",), ("todo", "01")):
        code, out, err = cli(*args)
        assert code == 1 and err.startswith(f"error: {english}: not valid notebook JSON"), err
        assert len(err.strip().splitlines()) == 1, err


def test_the_readme_has_a_chinese_section_that_stands_on_its_own() -> None:
    """Linked from the top; prerequisites, the two commands, offline data, a mirror, the font;
    written to the same standard as the notebooks (short sentences, no soft line breaks)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = "## 中文快速开始"
    assert heading in readme, "the README's Chinese section is gone"
    top, section = readme.split("\n## ")[0], readme.split(heading, 1)[1].split("\n## ")[0]
    assert "(#中文快速开始)" in top, "the top of the README must link to the Chinese section"
    for needed in (
        "Python 3.11",
        "make lab",
        "make test",
        "BLITZ_CIFAR10_SUBSET",
        "PIP_INDEX_URL",
        "fonts-wqy-microhei",
        "LAB_TOKEN=",
        ".venv/bin/python -m tools.authoring.i18n",
    ):
        assert needed in section, f"the Chinese section does not mention {needed}"
    assert i18n.style(section) == [], i18n.style(section)
    assert (
        i18n.term_problems(
            {"readme": section}, i18n.load_terms(ROOT / "translations" / "zh" / "glossary.md")
        )
        == []
    )


def test_the_sites_chinese_interface_words_follow_the_same_rules() -> None:
    """The site's own Chinese words (strings/zh.json): short sentences, the settled terms."""
    import re

    from tools import conventions

    en, zh = conventions.strings("en"), conventions.strings("zh")
    assert set(zh) == set(en), "strings/zh.json and strings/en.json differ in keys"
    assert set(zh["lesson"]) == set(en["lesson"]), "their lesson words differ in keys"
    terms = i18n.load_terms(ROOT / "translations" / "zh" / "glossary.md")
    for key, text in zh.items():
        if key == "lesson":  # the header's labels and lines, checked in the notebooks
            continue
        plain = re.sub(r"<[^>]+>", "", text)
        assert i18n.style(plain) == [], f"strings/zh.json {key}: {i18n.style(plain)}"
        assert i18n.term_problems({key: plain}, terms) == [], f"strings/zh.json {key}"


def test_the_readme_shows_no_token_anyone_could_guess() -> None:
    """Every ``LAB_TOKEN=`` the README shows (English and Chinese) is ``...`` or one that
    Python's ``secrets`` generates: a word such as ``class2026`` is guessed by the next class."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    generated = '$(python3 -c "import secrets; print(secrets.token_urlsafe(16))")'
    english, chinese = readme.split("## 中文快速开始", 1)
    for name, text in (("English", english), ("Chinese", chinese)):
        shown = text.split("LAB_TOKEN=")[1:]
        guessable = [s[:20] for s in shown if not s.startswith(("...", generated))]
        assert not guessable, f"{name}: LAB_TOKEN={guessable}"
        assert any(s.startswith(generated) for s in shown), f"{name}: show how to generate one"


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_the_chinese_assignment_keeps_no_word_about_the_answers_it_lacks(english: Path) -> None:
    # Issue 45 item 13: the assignment cuts each sentence naming the solutions (参考答案); a
    # sentence after it ("请先自己做每道题，再打开答案。") was left, about answers it lacks.
    from tools.teaching import assignments

    for cell in nbformat.read(i18n.translated_path(english), as_version=4).cells:
        if cell.cell_type == "markdown" and "exercise" in cell.metadata.get("tags", []):
            kept = assignments._without_solution_sentences(cell.source, "zh")
            left = re.sub("写答案|答案单元格|你的答案", "", i18n._FENCE.sub("", kept))
            assert "答案" not in left and "先自己做" not in left, (cell.id, kept)


@pytest.mark.parametrize("english", NOTEBOOKS, ids=IDS)
def test_the_chinese_headers_put_the_colon_in_one_place(english: Path) -> None:
    # Issue 45 (low): "**先修：**" against "**学习时间**：": the colon follows the bold label.
    header = nbformat.read(i18n.translated_path(english), as_version=4).cells[0].source
    labels = re.findall(r"^\*\*[^*\n]+\*\*[：:]?", header, re.M)
    assert labels and all(label.endswith("**：") for label in labels if label != "**目标**"), labels


def _lesson_rows(section: str, unit: str) -> dict[str, str]:
    """A README lesson table's rows: lesson number (or the total) -> its learner times."""
    row = rf"^\|(?: (\d\d))? \|.*\| (\**\d+\**(?: / \d+){{2}}) {unit} \|$"
    rows = re.findall(row, section, re.M)
    return {number or "all": times for number, times in rows}


def test_the_chinese_quick_start_has_the_lesson_table_and_a_chinese_data_guide() -> None:
    # Issue 45 item 14: the Chinese section had no lesson table and pointed to DATA.md only.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    english, chinese = readme.split("\n## 中文快速开始", 1)
    chinese = chinese.split("\n## ")[0]
    en_rows, zh_rows = _lesson_rows(english, "min"), _lesson_rows(chinese, "分钟")
    assert len(en_rows) == len(NOTEBOOKS) + 1, en_rows
    assert zh_rows == en_rows, "copy the English table's learner times into the Chinese table"
    for path in NOTEBOOKS:
        assert f"(notebooks/zh/{path.name})" in chinese, f"the Chinese table lacks {path.name}"
    assert "(DATA.zh.md)" in chinese
    # DATA.zh.md says what DATA.md says: every code block, code span, link and heading level
    # (a code span DATA.md breaks over two lines is one line in Chinese), in the rules' style.
    en, zh = ((ROOT / name).read_text(encoding="utf-8") for name in ("DATA.md", "DATA.zh.md"))
    en = re.sub(r"`([^`\n]*)\n([^`\n]*)`", r"`\1 \2`", en)
    assert i18n.damage(en, zh) == []


def _guide_commands(text: str) -> set[str]:
    """The commands a guide shows: lines of its fenced and indented code blocks that start a
    command (make, sudo, docker, helm, git, cd, a module run), whitespace normalised."""
    starts = ("make ", "sudo ", "docker ", "helm ", "git ", "cd ", ".venv/bin/python ")
    found, fenced = set(), False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        code = line.strip() if fenced or line.startswith("    ") else ""
        code = code.split("  #", 1)[0].strip()
        if code.startswith(starts):
            found.add(" ".join(code.split()))
    return found


def test_the_chinese_teachers_guide_keeps_up_with_the_english_one() -> None:
    """TEACHING.zh.md (issue 47 item 10): the same sections as TEACHING.md, and every command
    the English guide shows, so a Chinese teacher never misses a step the English one has."""
    en = (ROOT / "TEACHING.md").read_text(encoding="utf-8")
    zh = (ROOT / "TEACHING.zh.md").read_text(encoding="utf-8")

    def sections(text: str) -> int:
        return sum(1 for line in text.splitlines() if line.startswith("## "))

    assert sections(zh) == sections(en), "TEACHING.zh.md has other sections than TEACHING.md"
    missing = _guide_commands(en) - _guide_commands(zh)
    assert not missing, f"TEACHING.zh.md lacks these commands of TEACHING.md: {sorted(missing)}"
    # Every code block, code span (a command in the text too: `make hub-disk`), link and
    # heading level, as DATA.zh.md keeps DATA.md's, in the rules' style (one line a paragraph:
    # a line break shows as a space on the site's page); the guides link their counterparts,
    # and a code span the English breaks over two lines is one line in Chinese.
    en = re.sub(r"`([^`\n]*)\n[ \t]*([^`\n]*)`", r"`\1 \2`", en)
    en = en.replace("](README.md)", "](README.md#中文快速开始)")
    en = en.replace("](TEACHING.zh.md)", "](TEACHING.md)")
    assert i18n.damage(en, zh) == []
    assert (
        "TEACHING.zh.md"
        in (ROOT / "README.md").read_text(encoding="utf-8").split("## 中文快速开始", 1)[1]
    ), "the Chinese quick start must point to the Chinese guide"
