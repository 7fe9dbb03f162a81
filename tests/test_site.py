"""The teaching site: `make html`'s builder, and the real site in headless Chromium.

The real site, both languages, is built once per session (conftest's ``site``, in a temporary
folder), and every page of each language is opened as ``file://`` and from
``python -m http.server``'s handler in one session-wide Chromium. What only the Chinese site
has (language switch, search inside a sentence, CJK font) is in tests/test_site_zh.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests import browser as browser_helpers
from tests.toc import list_lessons
from tools import conventions
from tools.authoring import i18n
from tools.lessons import LessonError, lesson_notebooks
from tools.publishing import guides
from tools.publishing.build_site import build_site, building, lock_path, main
from tools.publishing.pages import SiteError, parse_header, render_widgets_statically

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists
LESSON_STEMS = [p.stem for p in NOTEBOOKS]
GUIDE = Path(guides.PAGE).stem  # the teacher's guide's page: TEACHING.md, TEACHING.zh.md
# Each language's folder in the site and its <html lang>.
LANGS = {"en": ("", "en"), "zh": ("zh/", "zh-CN")}
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# TeX in markdown: $...$ or $$...$$ (a lone dollar sign in prose does not count).
MATH_RE = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*?\$", re.S)
GOOD_HEADER = """# 07 · Sample lesson

A lesson that exists only inside this test.

**Objectives**
- check the parser

**Prerequisites:** none.

**Hardware**: any CPU. A GPU is optional.

**Learner time**: core path about 5 min; deep dives about 2 min; exercises about 1 min.

**Run time**: about 1 s on the 2-core CPU (measured with nbval).
"""
ZH_HEADER = """# 07 · 示例课程

只在这个测试里存在的一课。

**目标**
- 检查解析器

**先修：** 无。

**硬件**：任何 CPU 都可以。GPU 可有可无。

**学习时间**：核心路径约 5 分钟；深入部分约 2 分钟；练习约 1 分钟。

**运行时间：** 在 2 核 CPU 上约 1 秒（用 nbval 测得）；另有说明。
"""


def _lesson(path: Path, lang: str) -> nbformat.NotebookNode:
    """A lesson as the site renders it in ``lang``: the English notebook, or translated."""
    nb = nbformat.read(path, as_version=4)
    return nb if lang == "en" else i18n.translate(nb, i18n.Catalog.load(path))


# --- the builder, without a browser -------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (
            GOOD_HEADER,
            (
                "07 · Sample lesson",
                "A lesson that exists only inside this test.",
                "none.",
                "any CPU.",
                "about 1 s on the 2-core CPU (measured with nbval)",
                "core path about 5 min; deep dives about 2 min; exercises about 1 min",
            ),
        ),
        (
            ZH_HEADER,
            (
                "07 · 示例课程",
                "只在这个测试里存在的一课。",
                "无。",
                "任何 CPU 都可以。",
                "在 2 核 CPU 上约 1 秒（用 nbval 测得）；另有说明",
                "核心路径约 5 分钟；深入部分约 2 分钟；练习约 1 分钟",
            ),
        ),
    ],
    ids=LANGS,
)
def test_parse_header_reads_the_first_cell(tmp_path: Path, header: str, expected: tuple) -> None:
    lesson = parse_header(
        tmp_path / "07_sample.ipynb", new_notebook(cells=[new_markdown_cell(header)])
    )
    found = (
        lesson.title,
        lesson.summary,
        lesson.fields["Prerequisites"],
        lesson.hardware,
        lesson.run_time,
        lesson.learner_time,
    )
    assert found == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("# Sample lesson\n\nNo number.", "must start with '# NN · Title'"),
        (GOOD_HEADER.replace("**Hardware**: any CPU. A GPU is optional.", ""), "**Hardware**"),
        (GOOD_HEADER.replace("**Run time**", "Run time"), "**Run time**"),
        (GOOD_HEADER.replace("# 07", "# 08"), "does not match the file name"),
    ],
    ids=["no-number", "no-hardware", "no-run-time", "wrong-number"],
)
def test_parse_header_explains_a_bad_first_cell(tmp_path: Path, source: str, message: str) -> None:
    nb = new_notebook(cells=[new_markdown_cell(source)])
    with pytest.raises(SiteError, match=re.escape(message)) as err:
        parse_header(tmp_path / "07_sample.ipynb", nb)
    assert "07_sample.ipynb" in str(err.value)


def test_saved_widget_state_renders_without_scripts() -> None:
    state = {
        "box": {
            "model_name": "HBoxModel",
            "state": {"children": ["IPY_MODEL_l", "IPY_MODEL_b"]},
        },
        "l": {"model_name": "HTMLModel", "state": {"value": "100%"}},
        "b": {"model_name": "FloatProgressModel", "state": {"value": 3.0, "max": 3.0}},
    }
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "box"}, "text/plain": "x"}
    orphan = {"application/vnd.jupyter.widget-view+json": {"model_id": "gone"}, "text/plain": "y"}
    cell = new_code_cell(
        "", outputs=[nbformat.v4.new_output("display_data", data=d) for d in (view, orphan)]
    )
    nb = new_notebook(cells=[cell])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    assert render_widgets_statically(nb) == 1
    rendered, fallback = (out["data"] for out in nb.cells[0].outputs)
    assert '<progress class="blitz-progress " value="3.0" max="3.0">' in rendered["text/html"]
    assert "100%" in rendered["text/html"]
    assert fallback == {"text/plain": "y"}, "a view without saved state keeps its text"
    assert "widgets" not in nb.metadata


def test_a_new_notebook_is_picked_up(tmp_path: Path) -> None:
    """A lesson listed in _toc.yml gets a page, a card and neighbours."""
    src = tmp_path / "notebooks"
    src.mkdir()
    for number, name in (("07", "07_sample"), ("08", "08_more")):
        header = GOOD_HEADER.replace("07", number).replace("Sample lesson", f"Lesson {number}")
        nb = new_notebook(cells=[new_markdown_cell(header), new_markdown_cell("## Part\n\nText")])
        nbformat.write(nb, src / f"{name}.ipynb")
    list_lessons(src)
    lessons = build_site(src, tmp_path / "site", log=lambda _msg: None)
    assert [lesson.stem for lesson in lessons] == ["07_sample", "08_more"]
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="08_more.html"' in index and "Lesson 08" in index
    first = (tmp_path / "site" / "07_sample.html").read_text()
    assert re.search(r'<a [^>]*href="08_more.html"[^>]*rel="next"', first), "no next link"
    assert 'href="#Part"' in first, "the table of contents links the ## heading"


def test_no_table_of_contents_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LessonError, match=r"_toc.yml: missing; it lists the lessons"):
        build_site(tmp_path, tmp_path / "site", log=lambda _msg: None)


def test_build_never_wipes_a_foreign_folder(tmp_path: Path) -> None:
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    list_lessons(src)
    with pytest.raises(SiteError, match="has no _static/built-files.sha256, so this tool did not"):
        build_site(src, precious, log=lambda _msg: None)
    assert (precious / "thesis.tex").exists()


def _tiny_lessons(tmp_path: Path) -> Path:
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    list_lessons(src)
    return src


def test_a_second_build_of_the_same_site_waits_for_the_first(tmp_path: Path) -> None:
    # Item 14: two `make html` at once; the second waits (one line), then builds whole.
    src, out = _tiny_lessons(tmp_path), tmp_path / "build" / "site"
    argv = [sys.executable, "-m", "tools.publishing.build_site", "--english-only"]
    argv += ["--notebooks", str(src), "--out", str(out)]
    with building(out):  # the first build, holding the folder
        second = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        said = ""
        while "waiting for it" not in said and (line := second.stdout.readline()):
            said = line  # each line as the second build prints it
        if "waiting for it" not in said:
            pytest.fail(f"the second build ended while the first ran: {second.stderr.read()}")
        assert str(os.getpid()) in said, said
        assert not out.exists(), "the second build wrote while the first held the folder"
    rest, err = second.communicate(timeout=300)
    assert second.returncode == 0 and err == "", err
    assert (out / "index.html").is_file() and "Built 1 lesson" in rest


def test_a_build_that_may_not_wait_says_so_in_one_line(tmp_path: Path, capsys) -> None:
    src, out = _tiny_lessons(tmp_path), tmp_path / "build" / "site"
    with building(out):
        code = main(["--english-only", "--notebooks", str(src), "--out", str(out), "--wait", "0"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert f"another build (process {os.getpid()}) is still writing" in err and not out.exists()
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(SystemExit):
            main(["--out", str(out), "--wait", bad])


def test_the_build_lock_is_never_written_through_a_link(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("mine")
    out = tmp_path / "build" / "site"
    out.parent.mkdir()
    lock_path(out).symlink_to(mine)
    with pytest.raises(SiteError, match="cannot open the build lock"):
        build_site(_tiny_lessons(tmp_path), out, log=lambda _msg: None)
    assert mine.read_text() == "mine" and not out.exists()

    lock_path(out).unlink()
    out.symlink_to(mine.parent)  # the site itself a link: replacing it would go through it
    with pytest.raises(SiteError, match="is a symbolic link"):
        build_site(tmp_path / "notebooks", out, log=lambda _msg: None)
    assert mine.read_text() == "mine"


def test_a_rebuild_keeps_what_a_user_put_in_the_site(tmp_path: Path, capsys) -> None:
    """A site is rebuilt only while it holds just the files its build wrote, unchanged."""
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    out = tmp_path / "site"
    out.mkdir()  # an empty folder is fine
    list_lessons(src)
    build_site(src, out, log=lambda _msg: None)
    build_site(src, out, log=lambda _msg: None)  # and so is an earlier build, untouched
    (out / "MY_NOTES.txt").write_text("mine")
    (out / "photos").mkdir()
    (out / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    argv = ["--notebooks", str(src), "--out", str(out), "--english-only"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "files this tool did not write" in err, err
    assert "(MY_NOTES.txt, photos/cat.jpg)" in err and "which a rebuild would lose" in err, err
    assert (out / "MY_NOTES.txt").read_text() == "mine" and (out / "photos" / "cat.jpg").exists()

    (out / "MY_NOTES.txt").unlink()
    shutil.rmtree(out / "photos")
    (out / "index.html").write_text("edited by hand")
    with pytest.raises(SiteError, match=r"files changed since the build \(index.html\)"):
        build_site(src, out, log=lambda _msg: None)
    assert (out / "index.html").read_text() == "edited by hand"


def test_a_failed_build_leaves_no_half_site(tmp_path: Path, monkeypatch) -> None:
    """What a failed build wrote is removed, so the next build is not refused."""
    from tools.publishing import pages

    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    out = tmp_path / "site"

    def broken(*args, **kwargs) -> None:
        raise RuntimeError("nbconvert failed")

    monkeypatch.setattr(pages, "render_language", broken)
    list_lessons(src)
    with pytest.raises(RuntimeError, match="nbconvert failed"):
        build_site(src, out, log=lambda _msg: None)
    assert not out.exists()
    monkeypatch.undo()
    build_site(src, out, log=lambda _msg: None)
    assert (out / "07_x.html").is_file()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"cells": [,', "not valid notebook JSON (line 1: Expecting value)"),
        ("[]", "not a notebook ("),
        ("{}", "not a notebook ("),
        (b"\xff\xfe".decode("latin-1"), "can't decode byte 0xff in position 0"),
    ],
    ids=["broken-json", "a-list", "no-cells", "not-utf8"],
)
def test_a_broken_notebook_is_named_in_one_line(
    tmp_path: Path, capsys, text: str, reason: str
) -> None:
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    broken = src / "08_broken.ipynb"
    broken.write_text(text, encoding="latin-1")
    out = tmp_path / "site"
    list_lessons(src)
    assert main(["--notebooks", str(src), "--out", str(out), "--english-only"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: {broken}: "), err
    assert reason in err and "fix it, or restore it with git" in err, err
    assert not out.exists(), "nothing is written before every notebook has been read"


@pytest.mark.parametrize(("required", "outcome"), [("1", "fail"), ("", "skip")])
def test_a_missing_browser_skips_or_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, required: str, outcome: str
) -> None:
    """Learners without chromium get a skip; CI (BLITZ_REQUIRE_BROWSER=1) gets a failure."""
    monkeypatch.setenv(browser_helpers.CHROMIUM_ENV, str(tmp_path / "no-such-chromium"))
    monkeypatch.setenv(browser_helpers.REQUIRE_ENV, required)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="no Chromium found"):
        browser_helpers.chromium_path()


def test_build_writes_both_languages_with_switches(tmp_path: Path) -> None:
    src = tmp_path / "notebooks"
    src.mkdir()
    nb = new_notebook(
        cells=[
            new_markdown_cell(GOOD_HEADER, id="head"),
            new_code_cell("x = 1", id="code"),
            new_markdown_cell("## Part\n\nText that nobody translated.", id="part"),
        ]
    )
    nbformat.write(nb, src / "07_sample.ipynb")
    catalogs = tmp_path / "translations"
    i18n.record(src / "07_sample.ipynb", {"head": ZH_HEADER}, "zh", catalogs, allow_identical=False)
    out = tmp_path / "site"
    list_lessons(src)
    build_site(src, out, log=lambda _msg: None, translations=catalogs)

    index, page = ((out / "zh" / name).read_text() for name in ("index.html", "07_sample.html"))
    assert '<html lang="zh-CN">' in index and '<html lang="zh-CN">' in page
    assert "07 · 示例课程" in index and "运行时间" in index
    assert 'class="blitz-lang" href="../index.html" hreflang="en"' in index
    assert re.search(r'class="blitz-lang" href="\.\./07_sample\.html" hreflang="en"', page)
    english = (out / "07_sample.html").read_text()
    assert re.search(r'class="blitz-lang" href="zh/07_sample\.html" hreflang="zh-CN"', english)
    assert "Text that nobody translated." in page, "an untranslated cell shows the English"
    assert "示例课程" in (out / "_static" / "search-index-zh.js").read_text()
    assert (out / "zh" / "07_sample.ipynb").read_text() == i18n.notebook_text(
        i18n.translate(nb, i18n.Catalog.load(src / "07_sample.ipynb", "zh", catalogs))
    )


def test_deep_dives_are_marked_and_the_switch_hides_them(tmp_path: Path, browser) -> None:
    """Each deep dive carries "deep dive · optional · about N min" (N by tools/lesson_size's
    formula, in both languages); "Core path only" hides deep dives and exercises."""
    src = tmp_path / "notebooks"
    src.mkdir()
    optional = {"tags": ["optional"]}
    nb = new_notebook(
        cells=[
            new_markdown_cell(GOOD_HEADER, id="head"),
            new_markdown_cell("## Core part\n\nEveryone reads this.", id="core"),
            new_markdown_cell(
                "## Deep dive: More\n\n" + "word " * 400, id="dive", metadata=optional
            ),
            new_code_cell("y = 2", id="divecode", metadata=optional),
            new_markdown_cell("## Exercises\n\nTry it.", id="ex", metadata={"tags": ["exercise"]}),
        ]
    )
    nbformat.write(nb, src / "07_sample.ipynb")
    catalogs = tmp_path / "translations"
    zh = {"head": ZH_HEADER, "dive": "## 深入（选读）：更多\n\n" + "一句中文。" * 80}
    i18n.record(src / "07_sample.ipynb", zh, "zh", catalogs, allow_identical=False)
    out = tmp_path / "site"
    list_lessons(src)
    build_site(src, out, log=lambda _msg: None, translations=catalogs)
    english, chinese = (out / "07_sample.html").read_text(), (out / "zh/07_sample.html").read_text()
    # 404 words, 1 code line, 1 code cell: 404 / 110 + 0.15 + 0.25 = 4.1 minutes, shown as 4
    assert '<p class="blitz-deep-dive-badge">deep dive · optional · about 4 min</p>' in english
    assert '<p class="blitz-deep-dive-badge">深入 · 选读 · 约 4 分钟</p>' in chinese
    assert "Core path only" in english and "只看核心路径" in chinese

    page = browser.new_page()
    try:
        page.goto((out / "07_sample.html").as_uri())
        page.wait_for_selector(".blitz-optional", state="attached")
        assert page.is_visible("text=Everyone reads this.") and page.is_visible("text=Try it.")
        assert page.is_visible(".blitz-deep-dive-badge")
        page.check("#blitz-core-only")
        assert page.is_visible("text=Everyone reads this.")
        assert not page.is_visible(".blitz-deep-dive-badge"), "the deep dive is still shown"
        assert not page.is_visible("text=Try it."), "the exercise is still shown"
        page.uncheck("#blitz-core-only")
        assert page.is_visible(".blitz-deep-dive-badge")
    finally:
        page.close()


def test_out_pointing_at_a_file_is_a_clear_error(tmp_path: Path, capsys) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("keep me")
    with pytest.raises(SystemExit) as exited:
        main(["--out", str(readme)])  # what `python -m tools.publishing.build_site --out ...` runs
    assert exited.value.code == 2, "a usage error"
    assert f"--out {readme} is a file, not a folder" in capsys.readouterr().err
    assert readme.read_text() == "keep me"


def _unblock(fifo: Path) -> None:
    """Let a reader stuck opening ``fifo`` go on (it reads an empty file)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # no reader waiting
        pass


def test_a_special_file_in_the_sites_static_never_hangs_a_rebuild(tmp_path: Path) -> None:
    # Rule: a rebuild reads only regular files; anything else it did not write is named.
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    out = tmp_path / "site"
    list_lessons(src)
    build_site(src, out, log=lambda _msg: None)
    fifo = out / "_static" / "site.css"  # a name the first build recorded
    fifo.unlink()
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def rebuild() -> None:
        try:
            build_site(src, out, log=lambda _msg: None)
            outcome.append(None)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=rebuild, daemon=True)
    worker.start()
    worker.join(60)
    hung = worker.is_alive()
    _unblock(fifo)
    worker.join(60)
    assert not hung, "the rebuild hung on a FIFO in _static"
    assert isinstance(outcome[0], SiteError), outcome
    assert "files this tool did not write (_static/site.css)" in str(outcome[0])
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO is not the build's to remove"


def test_special_files_among_the_sites_assets_are_skipped_and_named(
    tmp_path: Path, monkeypatch
) -> None:
    # Rule: the build copies only regular files and folders, and names what it skipped.
    from tools.publishing import build_site as builder

    templates = tmp_path / "templates"
    shutil.copytree(builder.TEMPLATES, templates)
    os.mkfifo(templates / "static" / "pipe.css")
    monkeypatch.setattr(builder, "TEMPLATES", templates)
    src = tmp_path / "notebooks"
    src.mkdir()
    nbformat.write(new_notebook(cells=[new_markdown_cell(GOOD_HEADER)]), src / "07_x.ipynb")
    lines: list[str] = []
    list_lessons(src)
    build_site(src, tmp_path / "site", log=lines.append)
    named = [line for line in lines if "pipe.css" in line]
    assert len(named) == 1 and "skipped" in named[0] and "not a regular file" in named[0], lines
    assert (tmp_path / "site" / "_static" / "site.css").is_file()
    assert not (tmp_path / "site" / "_static" / "pipe.css").exists()


# --- the real site, in each language --------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_index_lists_every_lesson(site: Path, lang: str) -> None:
    folder, html_lang = site / LANGS[lang][0], f'<html lang="{LANGS[lang][1]}">'
    index = (folder / "index.html").read_text()
    assert html_lang in index
    for path in NOTEBOOKS:
        nb = _lesson(path, lang)
        assert f'href="{path.stem}.html"' in index, f"index does not link {path.stem}.html"
        assert parse_header(path, nb).short_title in index
        download = path.read_text() if lang == "en" else i18n.notebook_text(nb)
        assert (folder / path.name).read_text() == download, f"{lang}: {path.name} differs"
        page = (folder / f"{path.stem}.html").read_text()
        assert html_lang in page, f"{lang}/{path.stem}.html: not marked as {html_lang}"
        assert re.search(f'<a [^>]*download[^>]*href="{path.name}"', page), "no download link"
        assert 'class="blitz-toc-list"' in page, f"{lang}/{path.stem}.html: no contents"
    assert index.count('class="blitz-card"') == len(NOTEBOOKS)
    # The teacher's guide (issue 47 item 10): linked from the index, in the page's language,
    # and found by the search.
    assert f'href="{guides.PAGE}"' in index, "the index does not link the teacher's guide"
    guide = (folder / guides.PAGE).read_text()
    assert html_lang in guide and 'id="hand-out-and-grade-homework"' in guide or lang != "en"
    assert "make grade LESSON=01" in guide, f"{lang}/{guides.PAGE} lacks the guide's commands"
    prefix = "" if lang == "en" else "-zh"
    assert f'"page": "{guides.PAGE}"' in (site / f"_static/search-index{prefix}.js").read_text()


# An element or style that loads from a URL (the static check; the browser sees requests).
LOADS_FROM_A_URL = re.compile(
    r"<(?:script|img|link|iframe|source|video|audio)\b[^>]*?(?:src|href)=[\"']?(?:https?:|//)"
    r"|url\(\s*[\"']?(?:https?:|//)|@import\s+[\"'](?:https?:|//)"
)


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_pages_reference_no_other_host(site: Path, lang: str) -> None:
    """Static check that complements the browser's: no src/href loads from a URL, on the
    index, the lesson pages and the slide decks."""
    pages = sorted((site / LANGS[lang][0]).glob("*.html"))
    assert len(pages) == 2 * len(NOTEBOOKS) + 2, pages  # lessons, decks, index, guide
    for page in pages:
        found = LOADS_FROM_A_URL.search(page.read_text())
        assert not found, f"{page.name} loads from another host: {found and found.group(0)}"


@dataclass
class Findings:
    """Everything the browser saw across pages, reported together at the end."""

    problems: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    ids: dict[str, set[str]] = field(default_factory=dict)
    requests: int = 0


def _expected_math(stem: str) -> int:
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    return sum(len(MATH_RE.findall(c.source)) for c in nb.cells if c.cell_type == "markdown")


# What could run script the site did not write (markup from a notebook or a translation):
# a <script> outside <head> other than MathJax's formulas, a script file from elsewhere, an
# event-handler attribute, a javascript: URL, an embedded frame or object.
FOREIGN_SCRIPT_JS = """(base) => {
  const found = [];
  for (const s of document.scripts) {
    const src = s.getAttribute('src');
    if (s.type.startsWith('math/tex')) continue;
    if (src ? !s.src.startsWith(base) : s.closest('body')) {
      found.push(`<script${src ? ' src=' + src : ''}>${s.textContent.trim().slice(0, 60)}`);
    }
  }
  for (const e of document.querySelectorAll('body, body *')) {
    for (const a of e.attributes) {
      if (/^on/i.test(a.name) || /^\\s*javascript:/i.test(a.value)) {
        found.push(`<${e.localName} ${a.name}="${a.value.slice(0, 60)}">`);
      }
    }
    if (/^(iframe|frame|object|embed)$/.test(e.localName)) found.push(`<${e.localName}>`);
  }
  return found;
}"""


def _open(context, url: str, seen: Findings):
    """A new page that starts loading ``url`` and records problems: (page, its requests)."""
    page, problems, requests = context.new_page(), seen.problems, []
    page.on("request", lambda req: requests.append(req.url))
    page.on(
        "console",
        lambda msg: (
            problems.append(f"{url}: console {msg.type}: {msg.text}")
            if msg.type == "error"
            else None
        ),
    )
    page.on("pageerror", lambda exc: problems.append(f"{url}: script error: {exc}"))
    page.on("requestfailed", lambda req: problems.append(f"{url}: failed {req.url}: {req.failure}"))
    page.on(
        "response",
        lambda res: (
            problems.append(f"{url}: HTTP {res.status} for {res.url}")
            if res.status >= 400
            else None
        ),
    )
    page.goto(url, wait_until="commit")  # the next page starts loading meanwhile
    return page, requests


def _inspect(page, requests: list[str], base: str, stem: str, seen: Findings) -> None:
    """Once ``page`` (``stem``: its lesson, or "index") has loaded: what the browser saw."""
    url, problems = page.url, seen.problems
    page.wait_for_load_state("load")
    # site.js marks <html data-mathjax="done"> once MathJax has typeset ("none" without it).
    page.wait_for_function("document.documentElement.dataset.mathjax", timeout=60_000)
    page.wait_for_load_state("networkidle")

    seen.requests += len(requests)
    for req in requests:
        if not (req.startswith(base) or req.startswith("data:")):
            problems.append(f"{url}: request leaves the origin: {req[:120]}")

    foreign = page.evaluate(FOREIGN_SCRIPT_JS, base)
    problems.extend(f"{url}: script the site did not write: {what}" for what in foreign)

    images = page.evaluate(
        "Array.from(document.images).map(i => [i.currentSrc.slice(0, 80), i.naturalWidth])"
    )
    problems.extend(f"{url}: image not loaded: {src}" for src, width in images if width <= 0)

    if stem in LESSON_STEMS:
        expected = _expected_math(stem)
        math = page.evaluate(
            """() => ({
              sources: document.querySelectorAll('script[type^="math/tex"]').length,
              rendered: document.querySelectorAll('span.MathJax[id$="-Frame"]').length,
              errors: document.querySelectorAll('.merror, merror, .MathJax_Error').length,
              state: document.documentElement.dataset.mathjax})"""
        )
        if math["state"] != "done":
            problems.append(f"{url}: MathJax did not finish ({math['state']})")
        if math["errors"]:
            problems.append(f"{url}: {math['errors']} formulas failed to typeset")
        if math["rendered"] != math["sources"] or math["sources"] < min(expected, 1):
            problems.append(f"{url}: math not rendered ({math}, {expected} formulas in markdown)")

    seen.ids[url] = set(page.evaluate("Array.from(document.querySelectorAll('[id]'), e => e.id)"))
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]'), a => a.href)")
    seen.links.extend((url, href) for href in hrefs)


def _solutions_fold(page) -> str | None:
    """A lesson's solutions start hidden behind a button that shows them; else what is wrong."""
    buttons = page.locator(".blitz-solution-toggle")
    first_code = page.locator(".jp-Cell:has(.celltag_solution) + .jp-CodeCell").first
    if not buttons.count():
        return "no folded solution"
    if not first_code.is_hidden():
        return "a solution is visible from the start"
    buttons.first.click()
    return None if first_code.is_visible() else "the button does not show the solution"


def _check_links(seen: Findings, base: str, site: Path) -> int:
    """Every link inside the site points at a file that exists and an id that exists."""
    checked = 0
    for source, href in seen.links:
        target, fragment = urldefrag(href)
        if urlparse(href).scheme in {"http", "https"} and not href.startswith(base):
            continue  # a link out of the site (docs, papers): fine to follow, never loaded
        checked += 1
        if not target.startswith(base):
            seen.problems.append(f"{source}: link outside the site folder: {href}")
            continue
        rel = unquote(target[len(base) :].split("?", 1)[0]) or "index.html"
        if not (site / rel).is_file():
            seen.problems.append(f"{source}: broken link {href}")
        elif fragment and target in seen.ids:
            if fragment not in seen.ids[target] and unquote(fragment) not in seen.ids[target]:
                seen.problems.append(f"{source}: no #{fragment} in {rel}")
    return checked


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["file", "http"])
@pytest.mark.parametrize("lang", LANGS)
def test_site_in_chromium(browser, site: Path, lang: str, mode: str, request, tmp_path) -> None:
    """No console error, failed or off-origin request, script the site did not write, broken
    image or link, page wider than a phone; math typeset; solutions folded. Served, the index
    and first lesson are screenshot (their paths printed)."""
    base = site.as_uri() + "/" if mode == "file" else request.getfixturevalue("served_site")
    stems = ["index", *LESSON_STEMS, GUIDE]
    if mode == "http":  # the same pages as from files; served, two show what a server changes
        stems = stems[:2]
    seen = Findings()
    context = browser.new_context(viewport=DESKTOP, locale=LANGS[lang][1])
    try:
        opened = [_open(context, f"{base}{LANGS[lang][0]}{stem}.html", seen) for stem in stems]
        for stem, (page, requests) in zip(stems, opened, strict=True):
            _inspect(page, requests, base, stem, seen)
            if mode == "http" and stem in stems[:2]:
                shot = tmp_path / f"{lang}-{stem}.png"
                page.screenshot(path=str(shot))
                print(f"screenshot: {shot}")
                assert shot.stat().st_size > 20_000, f"{shot}: an (almost) empty page"
            # Phone width: the page itself must not scroll sideways (code scrolls in its box).
            page.set_viewport_size(PHONE)
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if overflow > 1:
                seen.problems.append(f"{page.url}: {overflow}px wider than a phone screen")
            if stem in LESSON_STEMS and (wrong := _solutions_fold(page)):
                seen.problems.append(f"{page.url}: {wrong}")
            page.close()
    finally:
        context.close()
    assert _check_links(seen, base, site) > len(stems), "suspiciously few links checked"
    assert seen.requests > len(stems), "the browser saw suspiciously few requests"
    assert not seen.problems, "\n".join(seen.problems)


PLANTED = '译文<script>window.PWN_ZH=1</script><img src="http://203.0.113.9/x.png">'


@pytest.mark.e2e
def test_the_browser_check_catches_markup_planted_in_a_translation(browser, tmp_path) -> None:
    """Markup planted in a built Chinese page (the build itself now refuses it in a catalog:
    tools/authoring/i18n.py ``refused``): the check test_site_in_chromium runs reports both the
    script and the off-site image there, and nothing on the English page of the same build."""
    english = NOTEBOOKS[0]
    src = tmp_path / "notebooks"
    src.mkdir()
    shutil.copy(english, src / english.name)
    out = tmp_path / "site"
    list_lessons(src)
    build_site(src, out, log=lambda _msg: None, translations=i18n.TRANSLATIONS_DIR)
    zh_page = out / "zh" / english.with_suffix(".html").name
    text = zh_page.read_text(encoding="utf-8")
    at = text.rindex("</body>")  # a paragraph of its own, which no script of the site rewrites
    zh_page.write_text(text[:at] + f"<p>{PLANTED}</p>" + text[at:], encoding="utf-8")

    base = out.as_uri() + "/"
    found = {}
    context = browser.new_context(viewport=DESKTOP)
    # Nothing leaves the machine, and no page waits on an unreachable host.
    context.route(lambda url: not url.startswith((base, "data:")), lambda route: route.abort())
    try:
        for lang in LANGS:
            seen = Findings()
            page, requests = _open(context, f"{base}{LANGS[lang][0]}{english.stem}.html", seen)
            _inspect(page, requests, base, english.stem, seen)
            page.close()
            found[lang] = seen.problems
    finally:
        context.close()
    assert found["en"] == [], "\n".join(found["en"])
    zh = "\n".join(found["zh"])
    assert "request leaves the origin: http://203.0.113.9/x.png" in zh, zh
    assert "script the site did not write: <script>window.PWN_ZH=1" in zh, zh
    static = LOADS_FROM_A_URL.search((out / "zh" / english.with_suffix(".html").name).read_text())
    assert static and "203.0.113.9" not in (out / english.with_suffix(".html").name).read_text()


@pytest.mark.e2e
def test_search_finds_a_section(browser, site: Path, served_site: str) -> None:
    """The offline search on the index finds a section heading of the first lesson."""
    first = (site / f"{NOTEBOOKS[0].stem}.html").read_text()
    heading = re.search(r'<h2 id="([^"]+)">([^<]+)<a class="anchor-link"', first)
    assert heading, f"{NOTEBOOKS[0].stem}.html has no ## heading to search for"
    anchor, text = heading.groups()
    page = browser.new_page()
    try:
        page.goto(served_site + "index.html")
        page.fill("#blitz-search-input", text)
        hits = page.eval_on_selector_all(
            "#blitz-search-results a", "links => links.map(a => a.getAttribute('href'))"
        )
    finally:
        page.close()
    assert f"{NOTEBOOKS[0].stem}.html#{anchor}" in hits, f"searching {text!r} gave {hits}"


# --- seams a teacher walks into: one run-time source, solutions, search, the core switch ----

UI = {code: conventions.strings(code) for code in ("en", "zh")}
# The first cell's run-time line: "**Run time**: ..." (CONTRIBUTING.md), zh "**运行时间：** ...".
RUN_TIME_LINE = re.compile(r"^\*\*\s*(?:Run time|运行时间)\s*[:：]?\s*\*\*\s*[:：]?\s*(.+)$", re.M)


def _search_index(site: Path, lang: str) -> list[dict[str, str]]:
    name = "search-index.js" if lang == "en" else f"search-index-{lang}.js"
    text = (site / "_static" / name).read_text(encoding="utf-8")
    return json.loads(text.removeprefix("window.BLITZ_SEARCH_INDEX = ").rstrip().rstrip(";"))


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_a_solution_is_folded_whole(browser, site: Path, lang: str) -> None:
    """Under a solution's heading, nothing but the button shows until it is pressed: the
    explanation (which states the answer) folds with the code; pressed, both show."""
    problems, folded, explained = [], 0, 0
    context = browser.new_context(viewport=DESKTOP)
    try:
        for path in NOTEBOOKS:
            page = context.new_page()
            page.goto(f"{site.as_uri()}/{LANGS[lang][0]}{path.stem}.html")
            cells = page.locator(".jp-Cell:has(.jp-MarkdownOutput.celltag_solution h3)")
            for i in range(cells.count()):
                cell = cells.nth(i)
                heading = cell.locator("h3").inner_text().strip()
                button = cell.locator(".blitz-solution-toggle")
                shown = " ".join(cell.inner_text().split())
                expected = " ".join(f"{heading} {UI[lang]['show_solution']}".split())
                if button.count() != 1 or shown != expected:
                    problems.append(f"{lang}/{path.stem} {heading!r}: shows {shown[:120]!r}")
                    continue
                code = cell.locator("xpath=following-sibling::div[contains(@class, 'jp-Cell')][1]")
                button.click()
                opened = " ".join(cell.inner_text().split())
                if not code.is_visible():
                    problems.append(f"{lang}/{path.stem} {heading!r}: the button shows no code")
                explained += opened != " ".join(f"{heading} {UI[lang]['hide_solution']}".split())
                folded += 1
            page.close()
    finally:
        context.close()
    assert not problems, "\n".join(problems)
    assert folded >= len(NOTEBOOKS), f"only {folded} folded solutions found"
    assert explained, "no solution has an explanation: the check of its fold checked nothing"


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_a_search_hit_in_a_deep_dive_turns_core_only_off(
    browser, site: Path, served_site: str, lang: str
) -> None:
    """The search labels hits in a deep dive or an exercise (the parts "Core path only"
    hides), and following one with the switch on turns it off, says so and shows the part.
    Every entry's label agrees with the page it points into."""
    entries = _search_index(site, lang)
    folder, words = LANGS[lang][0], UI[lang]
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        wrong = []
        for path in NOTEBOOKS:
            page.goto(f"{served_site}{folder}{path.stem}.html")
            anchors = [e for e in entries if e["page"] == f"{path.stem}.html" and e["anchor"]]
            parts = page.evaluate(
                """anchors => anchors.map(id => {
                     const cell = document.getElementById(id).closest('.jp-Cell');
                     return cell.classList.contains('blitz-optional') ? 'deep_dive'
                       : cell.classList.contains('blitz-exercise') ? 'exercise' : ''; })""",
                [e["anchor"] for e in anchors],
            )
            for entry, part in zip(anchors, parts, strict=True):
                if entry["part"] != part:
                    wrong.append(
                        f"{path.stem}#{entry['anchor']}: {entry['part']!r}, page: {part!r}"
                    )
        assert not wrong, "\n".join(wrong)

        dive = next(e for e in entries if e["part"] == "deep_dive" and e["anchor"])
        page.goto(f"{served_site}{folder}{dive['page']}")
        page.check("#blitz-core-only")  # remembered for the site (localStorage)
        page.goto(f"{served_site}{folder}index.html")
        page.fill("#blitz-search-input", dive["section"])
        hit = page.locator(
            f"#blitz-search-results li:has(a[href='{dive['page']}#{dive['anchor']}'])"
        )
        assert hit.locator(".blitz-search-part").inner_text() == words["search_deep_dive"]
        hit.locator("a").click()
        page.wait_for_load_state("load")
        target = page.locator(f"[id='{dive['anchor']}']")
        assert target.is_visible(), f"{dive['section']!r} is still hidden by the switch"
        assert not page.is_checked("#blitz-core-only"), "the switch is still on"
        assert page.inner_text("#blitz-core-notice") == words["core_only_off"]
        # On screen, and below the sticky header (which the notice made taller).
        top, header, height = target.evaluate(
            "e => [e.getBoundingClientRect().top,"
            " document.querySelector('.blitz-header').getBoundingClientRect().bottom, innerHeight]"
        )
        assert header <= top < height, f"the heading is at {top}px, the header ends at {header}px"

        # A link inside the page (the contents, the prose) into a hidden part does the same.
        page.check("#blitz-core-only")
        assert not target.is_visible() and page.inner_text("#blitz-core-notice") == ""
        page.evaluate("location.hash = ''")
        page.evaluate(f"location.hash = {json.dumps(dive['anchor'])}")
        page.wait_for_function("!document.getElementById('blitz-core-only').checked")
        assert target.is_visible()
    finally:
        context.close()


# The site's own words around the lessons: header, navigation, pager, footer, the index.
SITE_TEXT = ".blitz-header, .blitz-sidebar, .blitz-pager, .blitz-footer, .blitz-index"
# A word written twice in a row ("download Download all lessons"), in either language
# (Chinese has no spaces: a word repeated straight after itself).
DOUBLED = re.compile(r"\b(\w+)\s+\1\b|([\u3400-\u9fff]{2,})\2", re.I)


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_the_sites_own_words_read_once(browser, site: Path, lang: str) -> None:
    """No word is doubled in what the site itself says on any page (the lesson pages' download
    note once ended "to run it, download" before the link "Download all lessons")."""
    doubled = []
    page = browser.new_page()
    try:
        for stem in ["index", *LESSON_STEMS, GUIDE]:
            page.goto(f"{site.as_uri()}/{LANGS[lang][0]}{stem}.html")
            for text in page.eval_on_selector_all(SITE_TEXT, "es => es.map(e => e.innerText)"):
                # Line by line: a heading followed by a sentence that starts with the same
                # word ("Tensors" / "Tensors are ...") is two blocks, not a doubled word.
                for line in text.splitlines():
                    doubled += [f"{stem}: {line.strip()}" for _ in DOUBLED.finditer(line)]
    finally:
        page.close()
    assert not doubled, "\n".join(doubled)


@pytest.mark.e2e
@pytest.mark.parametrize("lang", LANGS)
def test_the_index_shows_each_run_time_as_the_header_says(browser, site: Path, lang: str) -> None:
    """The notebook's own header is the one source of its run time: the index shows the whole
    line (04's once lost its subset times), in each language."""
    page = browser.new_page()
    try:
        page.goto(f"{site.as_uri()}/{LANGS[lang][0]}index.html")
        shown = page.eval_on_selector_all(
            ".blitz-card",
            """(cards, label) => cards.map(card => [...card.querySelectorAll('.blitz-facts div')]
                 .find(d => d.querySelector('dt').innerText.trim() === label)
                 .querySelector('dd').innerText)""",
            UI[lang]["run_time"],
        )
    finally:
        page.close()
    expected = []
    for path in NOTEBOOKS:
        line = RUN_TIME_LINE.search(_lesson(path, lang).cells[0].source)
        assert line, f"{lang}/{path.name}: no run-time line in the first cell"
        expected.append(" ".join(re.sub(r"[`*_]", "", line.group(1)).split()).rstrip(".。"))
    assert [" ".join(s.split()) for s in shown] == expected


def test_the_readme_repeats_no_run_time_and_its_learner_times_are_measured() -> None:
    """README.md keeps no copy of the run times (the headers have them, the index shows
    them) and its learner-time column is what tools/authoring/lesson_size.py measures (its ``write``
    keeps the table current, ``check`` fails on a stale one)."""
    from tools.authoring import lesson_size

    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if line.startswith("| # | notebook |"))
    assert "run time" not in header.lower(), header
    found = lesson_size.readme_problems(NOTEBOOKS)
    assert not found, "\n".join(found + ["Fix: python -m tools.authoring.lesson_size write"])


def test_lesson_size_writes_the_readmes_learner_times(tmp_path: Path) -> None:
    """The README's rows get each lesson's minutes (core / deep dives / exercises) and the
    total row the minutes of all lessons' words and lines together."""
    from tools.authoring import lesson_size

    def lesson(number: str, core: int, dive: int, exercise: int) -> Path:
        tagged = [("", core), ("optional", dive), ("exercise", exercise)]
        nb = new_notebook(
            cells=[
                new_markdown_cell("word " * words, metadata={"tags": [tag] if tag else []})
                for tag, words in tagged
            ]
        )
        path = tmp_path / f"{number}_x.ipynb"
        nbformat.write(nb, path)
        return path

    # 110 words a minute (no code, no run time recorded): 2 / 5 / 1 min and 3 / 1 / 1 min;
    # together 550 / 660 / 220 words.
    n = lesson_size.WORDS_PER_MIN
    paths = [lesson("07", 2 * n, 5 * n, n), lesson("08", 3 * n, n, n)]
    readme = tmp_path / "README.md"
    stale = (
        "| # | notebook | topic | learner time |\n|---|---|---|---|\n"
        "| 07 | x | a, b | 9 / 9 / 9 min |\n| 08 | y | c | 1 / 1 / 1 min |\n"
        "| | all two | | **9** / 9 / 9 min |\n"
        "\n## 中文\n| 07 | x | 甲 | 9 / 9 / 9 分钟 |\n| 08 | y | 乙 | 1 / 1 / 1 分钟 |\n"
        "| | 全部两课 | | **9** / 9 / 9 分钟 |\n"
    )
    readme.write_text(stale)
    assert lesson_size.readme_problems(paths, readme) == [
        "README.md: the lesson table's learner times are stale"
    ]
    fresh = lesson_size.readme_with_times(stale, paths)
    assert fresh.splitlines()[2:] == [
        "| 07 | x | a, b | 2 / 5 / 1 min |",
        "| 08 | y | c | 3 / 1 / 1 min |",
        "| | all two | | **5** / 6 / 2 min |",
        "",
        "## 中文",
        "| 07 | x | 甲 | 2 / 5 / 1 分钟 |",  # the Chinese table is written from the same times
        "| 08 | y | 乙 | 3 / 1 / 1 分钟 |",
        "| | 全部两课 | | **5** / 6 / 2 分钟 |",
    ]
    readme.write_text(fresh)
    assert lesson_size.readme_problems(paths, readme) == []
    readme.write_text(fresh.replace("| 08 | y | c | 3 / 1 / 1 min |\n", ""))
    assert "one row per notebook" in lesson_size.readme_problems(paths, readme)[0]
    readme.write_text(fresh.replace("| 08 | y | 乙 | 3 / 1 / 1 分钟 |\n", ""))  # Chinese
    assert "'分钟' needs one row per notebook" in lesson_size.readme_problems(paths, readme)[0]


# Rule: an --out that cannot be the site's own folder is refused in one line, nothing touched.
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["inside-a-file", "symlink"])
def test_build_site_refuses_an_out_that_cannot_be_its_folder(tmp_path: Path, case: str) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    if case == "inside-a-file":
        out = notes / "site"
    else:  # a link to a folder of one's own (shutil.rmtree would raise on it)
        (tmp_path / "mine").mkdir()
        (tmp_path / "mine" / "notes.txt").write_text("mine")
        out = tmp_path / "site"
        out.symlink_to(tmp_path / "mine", target_is_directory=True)
    before = sorted(tmp_path.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "tools.publishing.build_site", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"build_site.py: error: --out {out} ")
    assert sorted(tmp_path.rglob("*")) == before and notes.read_text() == "mine"  # untouched


# --- the teacher's guide (TEACHING.md, TEACHING.zh.md) as a page of the site -----------------


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("One link per student (`make hub`)", "one-link-per-student-make-hub"),
        ("Past one machine: Kubernetes", "past-one-machine-kubernetes"),
        ("安全：保证什么，不保证什么", "安全保证什么不保证什么"),
        ("一台服务器，每个学生一个链接（`make hub`）", "一台服务器每个学生一个链接make-hub"),
    ],
)
def test_a_guides_headings_get_githubs_ids(tmp_path: Path, heading: str, anchor: str) -> None:
    """The guides' contents lists link their sections as GitHub names them; the site's page
    gives each heading the same id, a repeated heading GitHub's numbered one."""
    (tmp_path / "TEACHING.md").write_text(f"# Guide\n\n## {heading}\n\n## {heading}\n")
    body = guides.render("en", ["en"], root=tmp_path).body_html
    assert f'id="{anchor}"' in body and f'id="{anchor}-1"' in body, body


def test_each_guide_links_its_own_sections_and_the_sites_pages() -> None:
    """Both real guides: every link to a section lands on one of its headings; README.md
    becomes the index, the other language's guide its page (a file the site does not carry
    would stop the build); the contents list names every section."""
    for code, other in (("en", "zh/teaching.html"), ("zh", "../teaching.html")):
        guide = guides.render(code, ["en", "zh"])
        assert guide is not None, code
        ids = set(re.findall(r'<h[1-6] id="([^"]+)"', guide.body_html))
        links = [unquote(h) for h in re.findall(r'<a href="([^"]+)"', guide.body_html)]
        sections = [h for h in links if h.startswith("#")]
        assert sections, f"{guide.source.name} has no contents list"
        assert not [h for h in sections if h[1:] not in ids], (guide.source.name, ids)
        h2 = re.findall(r'<h2 id="([^"]+)"', guide.body_html)
        assert [h for h in sections if h[1:] in h2] == [f"#{i}" for i in h2], "contents list"
        assert other in links and "index.html" in links, links
        assert not [h for h in links if h.endswith(".md") or ".md#" in h], links


def test_a_guide_link_the_site_does_not_carry_stops_the_build(tmp_path: Path) -> None:
    (tmp_path / "TEACHING.md").write_text("# Guide\n\nSee [the data](DATA.md).\n")
    with pytest.raises(guides.GuideError, match=r"TEACHING\.md links DATA\.md, which the site"):
        guides.render("en", ["en"], root=tmp_path)


def test_a_guides_markup_is_shown_not_run_and_a_language_left_out_is_plain_text(
    tmp_path: Path,
) -> None:
    (tmp_path / "TEACHING.md").write_text(
        "# Guide\n\n<script>alert(1)</script>\n\nSee [中文](TEACHING.zh.md).\n\n"
        "| a |\n|---|\n| 1 |\n"
    )
    (tmp_path / "TEACHING.zh.md").write_text("# 指南\n")
    body = guides.render("en", ["en"], root=tmp_path).body_html  # an --english-only build
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert "中文" in body and "TEACHING.zh.md" not in body and "<a " not in body
    assert '<div class="blitz-table" tabindex="0"><table>' in body  # scrolls in its box
    with_zh = guides.render("en", ["en", "zh"], root=tmp_path).body_html
    assert '<a href="zh/teaching.html">中文</a>' in with_zh
    assert guides.render("xx", ["en", "xx"], root=tmp_path) is None  # no TEACHING.xx.md
