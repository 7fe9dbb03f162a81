"""Code comments and docstrings in the Chinese notebooks: translated from the catalogs like
the markdown.

A code cell's catalog entry is its whole source with the ``#`` comments and the docstrings
translated, plus the hash of the English source (tools/authoring/i18n.py). What must hold:
the code without its comments and docstrings, and every output, stay the English notebook's;
a ``#`` inside a string is no comment, a string that is no docstring is code; an English
edit makes the entry stale; the glossary's settled terms hold in comments and docstrings.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tests.test_translations import differences
from tests.toc import list_lessons
from tools.authoring import i18n

CODE = (
    "import torch\n"
    "\n"
    "# Normalize the inputs first.\n"
    'label = "# not a comment"  # a string with a hash\n'
    "x = torch.ones(3)  # three ones\n"
    "print(label, x.sum().item())"
)
CODE_ZH = (
    "import torch\n"
    "\n"
    "# 先把输入标准化。\n"
    'label = "# not a comment"  # 含井号的字符串\n'
    "x = torch.ones(3)  # 三个 1\n"
    "print(label, x.sum().item())"
)
WRITEFILE = '%%writefile job.py\nimport os  # the environment\n\nprint(os.getpid())  # "#" quoted'
WRITEFILE_ZH = '%%writefile job.py\nimport os  # 环境变量\n\nprint(os.getpid())  # 引号里的 "#"'
HEAD, HEAD_ZH = "# 01 · Tiny\n\nUse `torch.ones`.", "# 01 · 小例子\n\n使用 `torch.ones`。"
GLOSSARY = """# 术语表

## 统一写法

| English | 写作 | 每课首次出现 | 不要写 |
|---|---|---|---|
| normalize | 标准化 | — | 归一化 |
"""


def _notebook(tmp_path: Path, code: str = CODE) -> Path:
    """notebooks/01_tiny.ipynb: a heading, a code cell with comments and an output, a code
    cell without comments, a %%writefile cell; translations/zh/glossary.md beside it."""
    nb = new_notebook(
        cells=[
            new_markdown_cell(HEAD, id="head"),
            new_code_cell(
                code,
                id="code",
                execution_count=1,
                outputs=[new_output("stream", name="stdout", text="# not a comment 3.0\n")],
            ),
            new_code_cell("print(2)", id="bare", execution_count=2),
            new_code_cell(WRITEFILE, id="file", execution_count=3),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    folder = tmp_path / "notebooks"
    folder.mkdir(exist_ok=True)
    path = folder / "01_tiny.ipynb"
    nbformat.write(nb, path)
    list_lessons(folder)
    (tmp_path / "translations" / "zh").mkdir(parents=True, exist_ok=True)
    (tmp_path / "translations" / "zh" / "glossary.md").write_text(GLOSSARY, encoding="utf-8")
    return path


def _record_all(english: Path, root: Path, code_zh: str = CODE_ZH) -> None:
    batch = {"head": HEAD_ZH, "code": code_zh, "file": WRITEFILE_ZH}
    i18n.record(english, batch, "zh", root, allow_identical=False)


def _edit_catalog(root: Path, cell_id: str, text: str) -> None:
    """Change one entry's text by hand, past `import` (what `check` must still catch)."""
    catalog = root / "zh" / "01_tiny.json"
    data = json.loads(catalog.read_text(encoding="utf-8"))
    data["cells"][cell_id]["text"] = text.splitlines(True)
    catalog.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


# --- finding comments ---------------------------------------------------------------------


def test_a_hash_inside_a_string_is_no_comment() -> None:
    source = (
        's = "# no"  # yes\n'
        't = f"{s}#no"  # f-string\n'
        'u = """\n# inside a docstring\n"""  # after it\n'
        "v = '#' + \"it's\"  # 'quotes' in a comment"
    )
    found = [(c.line, c.text) for c in i18n.comments(source)]
    assert found == [
        (0, "# yes"),
        (1, "# f-string"),
        (4, "# after it"),
        (5, "# 'quotes' in a comment"),
    ]
    assert i18n.code_parts(source)[0] == [
        's = "# no"',
        't = f"{s}#no"',
        'u = """',
        "# inside a docstring",
        '"""',
        "v = '#' + \"it's\"",
    ]


def test_ipython_magics_and_shell_lines() -> None:
    """A %%writefile x.py body is Python (its comments are translated); !cmd and %magic
    lines are read as shell; another cell magic's body is all code."""
    assert [c.text for c in i18n.comments(WRITEFILE)] == ["# the environment", '# "#" quoted']
    shell = 'for f in []:\n    !echo "#1" a#b  # list\n    %timeit f()  # time it\n!ls'
    assert [(c.line, c.text) for c in i18n.comments(shell)] == [(1, "# list"), (2, "# time it")]
    assert i18n.code_parts(shell)[0][1:3] == ['    !echo "#1" a#b', "    %timeit f()"]
    assert i18n.comments("%%bash\necho hi  # greet\necho a#b") == [i18n.Comment(1, 9, "# greet")]
    assert i18n.comments("%%html\n<b># a heading?</b>") == []
    assert i18n.comments("%%writefile notes.md\n# Title") == []
    assert [c.text for c in i18n.comments("%%time\nx = 1  # one")] == ["# one"]


def test_python_that_tokenize_rejects_is_scanned() -> None:
    """An unclosed bracket (tokenize: EOF in multi-line statement) or IPython's ``x?``."""
    source = 'f(1,  # open\n  "#no" '
    assert [(c.line, c.column, c.text) for c in i18n.comments(source)] == [(0, 6, "# open")]
    assert [c.text for c in i18n.comments("torch.ones?\ny = 2  # two")] == ["# two"]


def test_only_comments_with_words_need_a_translation(tmp_path: Path) -> None:
    assert i18n.has_words(CODE)
    assert not i18n.has_words("print(2)")
    assert not i18n.has_words("import x  # noqa: F401")  # a directive only
    assert not i18n.has_words("y = x.view(-1, 6)  # -1 -> 12 / 6 = 2")
    nb = nbformat.read(_notebook(tmp_path), as_version=4)
    assert list(i18n.translatable_cells(nb)) == ["head", "code", "file"]


# --- build and check ----------------------------------------------------------------------


def _built(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny notebook, every cell translated and the Chinese notebook built: (English
    notebook, catalogs' folder)."""
    english = _notebook(tmp_path)
    root = tmp_path / "translations"
    _record_all(english, root)
    i18n.build(english.parent, "zh", root)
    return english, root


def test_build_writes_translated_comments_and_keeps_code_and_outputs(tmp_path: Path) -> None:
    english, root = _built(tmp_path)
    en = nbformat.read(english, as_version=4)
    zh = nbformat.read(i18n.translated_path(english, "zh"), as_version=4)
    assert [c.source for c in zh.cells] == [HEAD_ZH, CODE_ZH, "print(2)", WRITEFILE_ZH]
    assert zh.cells[1].outputs == en.cells[1].outputs
    assert differences(en, zh) == []
    assert i18n.check(english.parent, "zh", root) == []

    zh.cells[1].source = CODE_ZH.replace("torch.ones(3)", "torch.ones(4)")  # in the notebook
    assert differences(en, zh) == [
        "cell 1 (id code, code): source differs from the English notebook"
    ]


def test_a_catalog_that_changes_a_code_token_is_rejected(tmp_path: Path, capsys) -> None:
    english = _notebook(tmp_path)
    root = tmp_path / "translations"
    bad = CODE_ZH.replace("torch.ones(3)", "torch.ones(4)")
    with pytest.raises(i18n.I18nError, match=r"code: the code changed .*torch\.ones\(4\)"):
        _record_all(english, root, bad)
    assert not (root / "zh" / "01_tiny.json").exists(), "nothing may be recorded"

    _record_all(english, root)
    i18n.build(english.parent, "zh", root)
    _edit_catalog(root, "code", bad)  # by hand, past `import`
    problems = i18n.check(english.parent, "zh", root)
    assert any("cell code: the code changed" in p and "torch.ones(4)" in p for p in problems)
    # The build never writes the changed code: it refuses the catalog, as `check` does.
    with pytest.raises(i18n.I18nError, match=r"cell code: the code changed .*torch\.ones\(4\)"):
        i18n.translate(nbformat.read(english, as_version=4), i18n.Catalog.load(english, "zh", root))
    assert i18n.main(["--notebooks", str(english.parent), "--translations", str(root), "check"])
    assert "the code changed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad",
    [
        CODE_ZH.replace('"# not a comment"', '"# 不是注释"'),  # a string is code
        CODE_ZH.replace("import torch\n", "import torch  # 导入\nimport os\n"),
        CODE_ZH.replace("print(label, x.sum().item())", "print(label,  x.sum().item())"),
    ],
    ids=["hash-in-string", "line-added", "spacing"],
)
def test_only_comments_may_change(tmp_path: Path, bad: str) -> None:
    english = _notebook(tmp_path)
    problems = i18n.code_damage(CODE, bad)
    assert any(p.startswith("the code changed") for p in problems), problems
    with pytest.raises(i18n.I18nError, match="the code changed"):
        _record_all(english, tmp_path / "translations", bad)


def test_comments_may_be_dropped_split_or_joined() -> None:
    assert i18n.code_damage(CODE, CODE_ZH.replace("  # 三个 1", "")) == []
    assert (
        i18n.code_damage(CODE, CODE_ZH.replace("# 先把输入标准化。", "# 先把输入\n# 标准化。"))
        == []
    )
    assert i18n.code_damage("# one long\n# thought\nx = 1", "# 一个想法\nx = 1") == []
    assert i18n.code_damage(CODE, CODE_ZH.replace("# 三个 1", "# 三个 1，即 `x # 1`")) == []


def test_a_hash_in_a_string_is_left_as_it_is_by_the_translation(tmp_path: Path) -> None:
    english = _notebook(tmp_path)
    root = tmp_path / "translations"
    _record_all(english, root)
    i18n.build(english.parent, "zh", root)
    zh = nbformat.read(i18n.translated_path(english, "zh"), as_version=4)
    assert 'label = "# not a comment"  # 含井号的字符串' in zh.cells[1].source.splitlines()
    assert [c.text for c in i18n.comments(zh.cells[1].source)] == [
        "# 先把输入标准化。",
        "# 含井号的字符串",
        "# 三个 1",
    ]


def test_an_english_comment_change_makes_the_translation_stale(tmp_path: Path) -> None:
    english, root = _built(tmp_path)
    nb = nbformat.read(english, as_version=4)
    nb.cells[1].source = CODE.replace("# three ones", "# a vector of three ones")
    nbformat.write(nb, english)

    problems = i18n.check(english.parent, "zh", root)
    assert "01_tiny: 1 stale (English changed since translated): code" in problems
    assert any("is not what `make translations` writes now" in p for p in problems)
    # Until it is retranslated, the cell shows the current English, never the old comments.
    catalog = i18n.Catalog.load(english, "zh", root)
    built = i18n.translate(nb, catalog)
    assert built.cells[1].source == nb.cells[1].source
    state, sources = i18n.status(nb, catalog), i18n.translatable_cells(nb)  # what `todo` shows
    assert state.stale == ["code"] and "a vector of three ones" in sources["code"]


def test_a_glossary_term_violated_in_a_comment_is_reported(tmp_path: Path) -> None:
    english = _notebook(tmp_path)
    root = tmp_path / "translations"
    _record_all(english, root, CODE_ZH.replace("标准化", "归一化"))
    problems = i18n.check(english.parent, "zh", root)
    assert problems == [
        "01_tiny: cell code: '归一化': the glossary writes 'normalize' as '标准化'"
    ], problems
    # Code is not prose: an identifier is no use of a term.
    nb = nbformat.read(english, as_version=4)
    prose = i18n.lesson_prose(nb, i18n.Catalog.load(english, "zh", root))
    assert prose["code"] == "先把输入归一化。\n含井号的字符串\n三个 1"


def test_comment_style_width_and_directives(tmp_path: Path) -> None:
    english = "x = 1  # why\nimport os  # noqa: F401 -- kept for later"
    good = "x = 1  # 原因\nimport os  # noqa: F401 -- 留待后用"
    assert i18n.code_damage(english, good) == []
    assert any(
        "directives ['# noqa: F401'] must stay" in p
        for p in i18n.code_damage(english, good.replace("noqa: F401 -- ", ""))
    )
    wide = "x = 1  # " + "很长的注释" * 19
    assert i18n.width(wide) == 9 + 190
    assert any("columns wide (at most 100" in p for p in i18n.code_damage(english, wide))
    long_url = "# " + "https://example.org/" * 6  # a line the English has: not the translator's
    assert i18n.code_damage(f"x = 1  # why\n{long_url}", f"x = 1  # 原因\n{long_url}") == []
    assert any(
        "half-width punctuation" in p
        for p in i18n.code_damage(english, good.replace("原因", "GPU: 原因"))
    )


def test_translator_round_trip_for_code_cells(tmp_path: Path, capsys) -> None:
    english = _notebook(tmp_path)
    args = ["--notebooks", str(english.parent), "--translations", str(tmp_path / "translations")]
    assert i18n.main([*args, "todo", "01", "--json"]) == 0
    wanted = json.loads(capsys.readouterr().out)
    assert wanted == {"head": HEAD, "code": CODE, "file": WRITEFILE}  # not "bare": no comments
    batch = tmp_path / "t.json"
    batch.write_text(
        json.dumps({"head": HEAD_ZH, "code": CODE_ZH, "file": WRITEFILE_ZH}, ensure_ascii=False)
    )
    assert i18n.main([*args, "import", "01", str(batch)]) == 0
    assert (
        "1/1 markdown cells, 2/2 code cells' comments and docstrings translated"
        in capsys.readouterr().out
    )
    assert i18n.main([*args, "check"]) == 0
    with pytest.raises(i18n.I18nError, match="bare: is a code cell without comments"):
        i18n.record(english, {"bare": "print(2)  # 二"}, "zh", tmp_path / "translations", False)

    nb = nbformat.read(english, as_version=4)  # the English loses its comments: an orphan
    nb.cells[3].source = "%%writefile job.py\nimport os"
    nbformat.write(nb, english)
    assert i18n.prune(english, "zh", tmp_path / "translations") == ["file"]


# --- docstrings: translated like comments, found by Python's parser ------------------------

DOCS = (
    '"""A tiny module."""\n'
    "import torch\n"
    "\n"
    "\n"
    "class Scale(torch.nn.Module):\n"
    '    """Multiply by a constant."""\n'
    "\n"
    "    def forward(self, x):\n"
    '        """Return ``x`` scaled."""\n'
    '        note = "kept in English"  # a string, not a docstring\n'
    '        "nor this one"\n'
    "        return 2 * x"
)
DOCS_ZH = (
    '"""一个很小的模块。"""\n'
    "import torch\n"
    "\n"
    "\n"
    "class Scale(torch.nn.Module):\n"
    '    """乘以一个常数。\n'
    "\n"
    '    译文可以比英文多几行。"""\n'
    "\n"
    "    def forward(self, x):\n"
    '        """返回缩放后的 ``x``。"""\n'
    '        note = "kept in English"  # 字符串，不是文档字符串\n'
    '        "nor this one"\n'
    "        return 2 * x"
)


def test_docstrings_are_what_pythons_parser_calls_docstrings() -> None:
    found = [(d.start, d.end, d.text) for d in i18n.docstrings(DOCS)]
    assert found == [
        ((0, 0), (0, 20), "A tiny module."),
        ((5, 4), (5, 33), "Multiply by a constant."),
        ((8, 8), (8, 34), "Return ``x`` scaled."),
    ]
    # Columns count characters, not UTF-8 bytes; a one-line def keeps its code around it.
    assert [(d.start, d.end) for d in i18n.docstrings('def f(ü=1): """é"""; return ü')] == [
        ((0, 12), (0, 19))
    ]
    assert i18n.without_docstrings('def f(ü=1): """é"""; return ü') == (
        'def f(ü=1): """docstring"""; return ü'
    )
    assert i18n.docstrings('x = 1\n"""not first: no docstring"""') == []
    assert i18n.docstrings('def f():\n    f"""{1} an f-string is none"""') == []
    # IPython's syntax around Python: lines stay where they were.
    shell = 'import sys\nlog = !ls\n\n\ndef f():\n    """Run."""'
    assert [(d.start, d.text) for d in i18n.docstrings(shell)] == [((5, 4), "Run.")]
    assert [d.text for d in i18n.docstrings('%%time\ndef f():\n    """Timed."""')] == ["Timed."]
    assert i18n.docstrings('%%bash\necho """no python here"""') == []
    assert i18n.docstrings('f(1,\n"""unclosed"""') == []  # no parse: all of it is code


def test_a_translated_docstring_passes_and_is_built(tmp_path: Path) -> None:
    assert i18n.code_damage(DOCS, DOCS_ZH) == []
    assert i18n.has_words('def f():\n    """Only a docstring."""\n    return 1')
    english = _notebook(tmp_path, DOCS)
    root = tmp_path / "translations"
    i18n.record(english, {"head": HEAD_ZH, "code": DOCS_ZH}, "zh", root, allow_identical=False)
    i18n.build(english.parent, "zh", root)
    en = nbformat.read(english, as_version=4)
    zh = nbformat.read(i18n.translated_path(english, "zh"), as_version=4)
    assert zh.cells[1].source == DOCS_ZH
    assert differences(en, zh) == []
    prose = i18n.lesson_prose(en, i18n.Catalog.load(english, "zh", root))
    assert prose["code"] == (
        "字符串，不是文档字符串\n一个很小的模块。\n乘以一个常数。\n\n译文可以比英文多几行。\n"
        "返回缩放后的 ``x``。"
    )


@pytest.mark.parametrize(
    "bad",
    [
        DOCS_ZH.replace('"kept in English"', '"保留英文"'),  # a string that is no docstring
        DOCS_ZH.replace('"nor this one"', '"也不是这个"'),  # an expression after the first
        DOCS_ZH.replace("return 2 * x", "return 3 * x"),  # code beside a docstring
        DOCS_ZH.replace('        """返回缩放后的 ``x``。"""\n', ""),  # a docstring dropped
        DOCS_ZH.replace('"""一个很小的模块。"""', 'print("一个很小的模块。")'),  # made code
    ],
    ids=["string", "later-expression", "code", "dropped", "docstring-made-code"],
)
def test_only_docstrings_and_comments_may_change(tmp_path: Path, bad: str) -> None:
    problems = i18n.code_damage(DOCS, bad)
    assert any(p.startswith("the code changed") for p in problems), problems
    english = _notebook(tmp_path, DOCS)
    with pytest.raises(i18n.I18nError, match="the code changed"):
        i18n.record(english, {"code": bad}, "zh", tmp_path / "translations", False)
    # Had a catalog held it anyway, the build refuses it (issue 46 case 1: as `check` does).
    nb = nbformat.read(english, as_version=4)
    catalog = i18n.Catalog.load(english, "zh", tmp_path / "translations")
    catalog.entries["code"] = i18n.Entry(bad, i18n.source_hash(DOCS))
    with pytest.raises(i18n.I18nError, match="the code changed"):
        i18n.translate(nb, catalog)


def test_docstrings_follow_the_glossary_and_the_punctuation_rules(tmp_path: Path) -> None:
    english = _notebook(tmp_path, 'def f():\n    """Normalize the inputs."""')
    root = tmp_path / "translations"
    zh = 'def f():\n    """把输入归一化。"""'
    i18n.record(english, {"head": HEAD_ZH, "code": zh}, "zh", root, allow_identical=False)
    assert "01_tiny: cell code: '归一化': the glossary writes 'normalize' as '标准化'" in (
        i18n.check(english.parent, "zh", root)
    )
    assert any(
        "half-width punctuation" in p
        for p in i18n.code_damage('def f():\n    """Why."""', 'def f():\n    """GPU: 原因。"""')
    )


def test_english_left_in_a_comment_is_found(tmp_path: Path) -> None:
    # Issue 45 item 12: 04's catalog kept two English comments and `check` passed.
    left = CODE_ZH.replace("# 三个 1", "# shuffling and augmentation draw from it")
    assert any("is still English" in p for p in i18n.code_damage(CODE, left))
    english = _notebook(tmp_path)
    root = tmp_path / "translations"
    with pytest.raises(i18n.I18nError, match="'shuffling and augmentation draw from it' is still"):
        _record_all(english, root, left)
    _record_all(english, root)
    _edit_catalog(root, "code", left)  # by hand, past `import`
    assert any(
        "cell code: 'shuffling and augmentation draw from it' is still English" in p
        for p in i18n.check(english.parent, "zh", root)
    )
    # A shape, a path, a name, a term beside Chinese, or a markdown block's Chinese comment pass.
    for kept in ("# N x 16 x 5 x 5", "# scripts/train_ddp.py", "# `torch.backends.cudnn` 的开关"):
        assert not i18n.english_left(kept.lstrip("# ")), kept
    block = "```python\nx = 1  # one more time for luck\n```"
    assert any("is still English" in p for p in i18n.damage(block, block))
    assert not any(
        "is still English" in p for p in i18n.damage(block, "```python\nx = 1  # 再来一次\n```")
    )
