"""Slides: the metadata tools/authoring/slides.py derives from the headings, the reveal.js decks of
the site (tools/publishing/decks.py) and the downloadable archive (tools/publishing/archive.py)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.browser import Deadline, settled_math
from tools.authoring import slides
from tools.lessons import lesson_notebooks
from tools.publishing import archive

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = lesson_notebooks()  # the lessons _toc.yml lists


def _cell(cell, *tags: str):
    cell.metadata["tags"] = list(tags)
    return cell


def test_a_slide_per_section_code_as_fragments_and_the_rest_skipped() -> None:
    nb = new_notebook(
        cells=[
            new_markdown_cell("# 01 · Title\n\nSummary."),
            new_code_cell("import torch"),
            new_markdown_cell("## Section\n\nProse."),
            new_markdown_cell("More prose, before any code: same slide."),
            new_code_cell("x = torch.ones(2)"),
            new_code_cell("x + 1"),
            new_markdown_cell("Prose about that output: a new slide."),
            new_markdown_cell("### A subsection"),
            _cell(new_markdown_cell("## Deep dive: more"), "optional"),
            _cell(new_code_cell("x * 2"), "optional"),
            new_markdown_cell("## Summary"),
            _cell(new_markdown_cell("## Exercises"), "exercise"),
            _cell(new_code_cell("assert True"), "solution"),
        ]
    )
    assert slides.slide_types(nb) == [
        "slide", "fragment", "slide", "-", "fragment", "fragment", "slide", "slide",
        "skip", "skip", "slide", "skip", "skip",
    ]  # fmt: skip
    assert slides.stale(nb) == ["rise", *range(len(nb.cells))]
    assert slides.stamp(nb) is True and slides.stale(nb) == []
    assert nb.metadata["rise"]["theme"] == "white", "RISE's default theme loads Google fonts"
    assert slides.stamp(nb) is False, "stamping twice changes nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_is_a_slideshow_that_arrow_keys_walk(path: Path) -> None:
    # Whether the metadata is current: tests/test_generate.py (make generate).
    nb = nbformat.read(path, as_version=4)
    kinds = slides.slide_types(nb)
    assert kinds.count("slide") >= 3 and "fragment" in kinds, f"{path.name}: too few slides"
    assert "subslide" not in kinds, "→ in RISE jumps over stacked subslides"


def test_the_archive_holds_what_runs_the_lessons_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / archive.NAME
    size = archive.write_archive(target)
    assert 0 < size < 20e6
    names = set(zipfile.ZipFile(target).namelist())
    top = archive.FOLDER
    for needed in (
        "README.md",
        "DATA.md",
        "LICENSE",
        ".ci/run",
        "Makefile",
        "requirements.txt",
        "pyproject.toml",
        "utils/__init__.py",
        "scripts/train_ddp.py",
        "tools/publishing/lab.py",
        "notebooks/01_tensors.ipynb",
        "notebooks/zh/01_tensors.ipynb",
        "tools/publishing/templates/vendor/reveal.js/LICENSE",
    ):
        assert f"{top}/{needed}" in names, f"the archive lacks {needed}"
    for name in names:
        parts = Path(name).parts
        assert parts[0] == top, name
        assert not {".git", ".venv", "build", "data", "__pycache__"} & set(parts), name
        assert not name.endswith((".npz", ".pt", ".pyc")), name


@pytest.mark.parametrize("command", ["write", "check"])
def test_slides_name_a_missing_notebook_in_one_line(tmp_path: Path, command: str, capsys) -> None:
    # Rule: a missing input is one line naming it and exit code 2, never a traceback.
    missing = tmp_path / "09_missing.ipynb"
    assert slides.main([command, str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and str(missing) in err, err


def test_the_archive_names_a_missing_file_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    # Rule: a missing input (or an output it cannot write) is one line and exit code 2.
    (tmp_path / "a-file").write_text("not a folder")
    assert archive.main([str(tmp_path / "a-file" / archive.NAME)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "a-file" in err, err

    # A file listed for the zip that is gone when it is read (deleted meanwhile).
    monkeypatch.setattr(archive, "members", lambda root: ["README.md", "gone.md"])
    target = tmp_path / archive.NAME
    assert archive.main([str(target)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "gone.md" in err, err
    assert not list(tmp_path.glob("*.zip*")), "a half-written zip was left behind"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _checkout_with_strays(tmp_path: Path) -> Path:
    """A git checkout whose tracked files include a link to a secret outside it and a name
    with a backslash, beside untracked personal files, secrets and run output."""
    outside = tmp_path / "home" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("TOP-SECRET")
    root = tmp_path / "project"
    (root / "notebooks" / "zh").mkdir(parents=True)
    (root / "README.md").write_text("# project")
    (root / "notebooks" / "rise.css").write_text("/* slides */")
    (root / "notebooks" / "zh" / "rise.css").symlink_to("../rise.css")  # in the project
    (root / "leak.txt").symlink_to(outside)
    (root / "a\\b.txt").write_text("unpacks as a/b.txt on Windows")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    (root / ".env").write_text("API_KEY=TOP-SECRET")
    (root / ".runs" / "05").mkdir(parents=True)
    (root / ".runs" / "05" / "metrics.json").write_text("{}")
    (root / "my-notes.txt").write_text("TOP-SECRET")
    return root


@pytest.mark.skipif(shutil.which("git") is None, reason="no git on this machine")
def test_the_zip_ships_only_the_projects_files_never_a_links_outside_target(
    tmp_path: Path, capsys
) -> None:
    # Rule: nothing injected: only the project's own files, never what a link points at.
    root = _checkout_with_strays(tmp_path)
    target = tmp_path / "out" / archive.NAME
    archive.write_archive(target, root)
    with zipfile.ZipFile(target) as made:
        names = {n.removeprefix(f"{archive.FOLDER}/") for n in made.namelist()}
        assert names == {
            "README.md",
            "notebooks/rise.css",
            "notebooks/zh/rise.css",
            archive.MANIFEST,
        }
        assert made.read(f"{archive.FOLDER}/notebooks/zh/rise.css") == b"/* slides */"
        assert not [n for n in made.namelist() if b"TOP-SECRET" in made.read(n)]
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 2 and "leak.txt" in said[1] and "b.txt" in said[0], said

    # An unpacked copy (no .git) with the same strays added makes the same zip.
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(target).extractall(unpacked)
    copy = unpacked / archive.FOLDER
    (copy / ".env").write_text("API_KEY=TOP-SECRET")
    (copy / ".runs" / "05").mkdir(parents=True)
    (copy / ".runs" / "05" / "metrics.json").write_text("{}")
    (copy / "my-notes.txt").write_text("TOP-SECRET")
    again = tmp_path / "again" / archive.NAME
    archive.write_archive(again, copy)
    assert set(zipfile.ZipFile(again).namelist()) == set(zipfile.ZipFile(target).namelist())


@pytest.mark.skipif(shutil.which("git") is None, reason="no git on this machine")
def test_the_zip_never_reads_through_a_linked_folder(tmp_path: Path, capsys) -> None:
    # Item 4: translations/ replaced by a link to a folder outside the project, where a
    # personal note sits under a name the project tracks.
    root = _checkout_with_strays(tmp_path)
    (root / "translations" / "zh").mkdir(parents=True)
    (root / "translations" / "zh" / "01_tensors.json").write_text("{}")
    _git(root, "add", "-A")
    mine = tmp_path / "home" / "translations"
    (mine / "zh").mkdir(parents=True)
    (mine / "zh" / "01_tensors.json").write_text("PERSONAL NOTE")
    shutil.rmtree(root / "translations")
    (root / "translations").symlink_to(mine)
    target = tmp_path / "out" / archive.NAME
    archive.write_archive(target, root)
    _shipped_nothing_through(target, capsys.readouterr().err)

    # The same in an unpacked zip, whose list names the file.
    zipfile.ZipFile(target).extractall(tmp_path / "unpacked")
    copy = tmp_path / "unpacked" / archive.FOLDER
    (copy / archive.MANIFEST).write_text("README.md\ntranslations/zh/01_tensors.json\n")
    (copy / "translations").symlink_to(mine)
    archive.write_archive(target, copy)
    _shipped_nothing_through(target, capsys.readouterr().err)


def _shipped_nothing_through(target: Path, said: str) -> None:
    with zipfile.ZipFile(target) as made:
        assert not [n for n in made.namelist() if b"PERSONAL NOTE" in made.read(n)]
        assert not [n for n in made.namelist() if "translations" in n]
    assert "left out translations/zh/01_tensors.json: it is reached through a link" in said


def test_a_folder_that_is_no_project_is_refused_in_one_line(tmp_path: Path) -> None:
    # Rule: nothing injected: without git or the zip's own list, no file is known as the project's.
    (tmp_path / "README.md").write_text("# mine")
    with pytest.raises(archive.ArchiveError) as refused:
        archive.write_archive(tmp_path / "out" / archive.NAME, tmp_path)
    assert "\n" not in str(refused.value) and archive.MANIFEST in str(refused.value)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


DECK_LANGS = {"en": "", "zh": "zh/"}
SHOTS = ROOT / "build" / "screenshots"


@pytest.mark.e2e
@pytest.mark.parametrize("lang", DECK_LANGS)
def test_every_deck_presents_offline(browser, site: Path, lang: str) -> None:
    """Each lesson page links its deck; each deck, opened from file://, loads nothing from
    another host, logs no error, moves with the arrow keys, typesets its math and (zh) draws
    Chinese with a system CJK font. The first slides of 01 are saved under build/screenshots."""
    from tools.publishing import decks

    problems: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        for path in NOTEBOOKS:
            lesson = site / DECK_LANGS[lang] / f"{path.stem}.html"
            deck = lesson.with_name(decks.deck_name(path.stem))
            assert f'href="{deck.name}"' in lesson.read_text(encoding="utf-8"), (
                f"{lesson.name} ({lang}) does not link its deck"
            )
            page, requests = context.new_page(), []
            page.on("request", lambda req, r=requests: r.append(req.url))
            where = f"{lang}/{deck.name}"
            page.on("console", lambda m, w=where, p=problems: m.type == "error" and p.append(
                f"{w}: console error: {m.text[:200]}"))  # fmt: skip
            page.on("pageerror", lambda e, w=where, p=problems: p.append(f"{w}: {e}"))
            deadline = Deadline(300)  # this deck's waits, all together
            page.goto(deck.as_uri(), timeout=deadline.ms())
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=deadline.ms())
            page.wait_for_function("window.MathJax && MathJax.isReady", timeout=deadline.ms())
            total = page.evaluate("Reveal.getTotalSlides()")
            assert total >= 3, f"{lang}/{deck.name}: {total} slides"
            if path.stem == "01_tensors":
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / f"deck-{lang}-01-title.png"))
            seen, code_seen = set(), set()
            code_total = page.evaluate(_CODE_SHOWN.replace("shown(c)", "true"))
            for _ in range(total * 4):  # every slide, fragments included
                page.keyboard.press("ArrowRight")
                seen.add(
                    page.evaluate("JSON.stringify([Reveal.getIndices().h, Reveal.getIndices().v])")
                )
                code_seen.update(page.evaluate(_CODE_SHOWN))
                if page.evaluate("Reveal.isLastSlide() && !Reveal.availableFragments().next"):
                    break
            assert len(seen) >= total - 1, (
                f"{lang}/{deck.name}: the arrow key showed {len(seen)} of {total} slides"
            )
            assert code_seen == set(code_total), (
                f"{lang}/{deck.name}: → showed {len(code_seen)} of {len(code_total)} code cells"
            )
            if path.stem == "01_tensors":
                page.keyboard.press("Home")
                for _ in range(3):
                    page.keyboard.press("ArrowRight")
                page.screenshot(path=str(SHOTS / f"deck-{lang}-01-slide.png"))
            # After the first typesetting and the re-rendering each slide change queued.
            math = settled_math(page, deadline.ms())
            if math[0] != math[1] or math[2]:
                problems.append(f"{lang}/{deck.name}: math sources/typeset/errors {math}")
            problems += [
                f"{lang}/{deck.name}: request leaves the site: {url[:100]}"
                for url in requests
                if not url.startswith(("file:", "data:"))
            ]
            if lang == "zh":
                problems += _cjk_font_problems(page, f"{lang}/{deck.name}")
            page.close()
    finally:
        context.close()
    assert not problems, "\n".join(problems)


# The deck's code cells (their indices) that are on screen now: on the present slide and not
# in a fragment still hidden. With "true" for shown(c): all of them.
_CODE_SHOWN = """(() => {
  const cells = [...document.querySelectorAll('.reveal .slides .jp-CodeCell')];
  const shown = c => c.closest('section.present') && !c.closest('.fragment:not(.visible)');
  return cells.map((c, i) => shown(c) ? i : -1).filter(i => i >= 0);
})()"""

# What a projector would not show of the present slide: an element of it (text, code, output,
# figure) that ends outside the slide area (the scaled `.slides` box, within the window), a
# box that clips what it holds (scrolled or cut code lines; text clipped on purpose for screen
# readers aside), the way back to the lesson or the line of keys over the slide area; and the
# scale the deck's script gave the slide (1 when it fit as it is).
_SLIDE_PROBLEMS = """(() => {
  const box = document.querySelector('.reveal .slides').getBoundingClientRect();
  const area = {left: Math.max(box.left, 0), top: Math.max(box.top, 0),
                right: Math.min(box.right, innerWidth), bottom: Math.min(box.bottom, innerHeight)};
  const slide = Reveal.getCurrentSlide(), problems = [];
  const name = el => el.tagName.toLowerCase() + ' "' +
    (el.innerText || el.getAttribute('alt') || '').trim().slice(0, 40).replace(/\\s+/g, ' ') + '"';
  for (const el of slide.querySelectorAll('*')) {
    const r = el.getBoundingClientRect(), style = getComputedStyle(el);
    if (!r.width || !r.height || style.display === 'contents') continue;
    if (style.clip !== 'auto' && style.clip) continue;  // read aloud only (MathJax's MathML)
    if (r.left < area.left - 1 || r.right > area.right + 1 || r.top < area.top - 1 ||
        r.bottom > area.bottom + 1) {
      problems.push(`${name(el)} ends outside the slide ` +
        `(${[r.left, r.top, r.right, r.bottom].map(Math.round)} vs ` +
        `${[area.left, area.top, area.right, area.bottom].map(Math.round)})`);
    }
    if ((el.scrollWidth > el.clientWidth + 1 && style.overflowX !== 'visible') ||
        (el.scrollHeight > el.clientHeight + 1 && style.overflowY !== 'visible')) {
      problems.push(`${name(el)} clips its content (${el.scrollWidth}×${el.scrollHeight} ` +
        `in ${el.clientWidth}×${el.clientHeight})`);
    }
  }
  for (const [selector, what] of [['.blitz-deck-back', 'the way back to the lesson'],
                                  ['.blitz-deck-keys', 'the line of keys']]) {
    const el = document.querySelector(selector), b = el ? el.getBoundingClientRect() : null;
    if (!b || !b.width) problems.push(`no ${what}`);
    else if (b.bottom > area.top && b.top < area.bottom && b.right > area.left &&
             b.left < area.right) problems.push(`${what} lies over the slide`);
  }
  const fit = slide.querySelector(':scope > .blitz-fit');
  return {problems, scale: fit && fit.dataset.scale ? Number(fit.dataset.scale) : 1};
})()"""

# Every fragment of the present slide has faded in (reveal.css: opacity over 0.2 s).
_FRAGMENTS_IN = """[...document.querySelectorAll('.reveal .slides section.present .fragment')]
  .every(f => getComputedStyle(f).opacity === '1')"""

# Below this the deck's script would be shrinking a slide to fit it: tools/publishing/decks.py
# paginates
# so that it never has to go further (measured: 0.908 was the smallest, on 04).
MIN_SCALE = 0.85
PROJECTORS = {"1280x720": (1280, 720), "1024x768": (1024, 768)}


def _every_slide(page, site: Path, lang: str) -> Iterator[str]:
    """Show every slide of every deck of ``lang`` in ``page`` in turn, all its fragments in
    view and its math typeset; yields where it is (``zh/01_tensors.slides.html slide 3``)."""
    for path in NOTEBOOKS:
        deck = site / DECK_LANGS[lang] / f"{path.stem}.slides.html"
        deadline = Deadline(600)  # this deck's waits, all together
        page.goto(deck.as_uri(), timeout=deadline.ms())
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=deadline.ms())
        for i in range(page.evaluate("Reveal.getTotalSlides()")):
            page.evaluate(f"Reveal.slide({i}, 0, Number.MAX_VALUE)")  # all fragments
            # MathJax re-renders the slide's math, then the deck refits it (one queued call)
            settled_math(page, deadline.ms())
            page.wait_for_function(_FRAGMENTS_IN, timeout=deadline.ms())
            yield f"{lang}/{deck.name} slide {i + 1}"


@pytest.mark.e2e
@pytest.mark.parametrize("size", PROJECTORS)
@pytest.mark.parametrize("lang", DECK_LANGS)
def test_every_slide_fits_a_projector(browser, site: Path, lang: str, size: str) -> None:
    """Every slide of every deck, each fragment shown, is wholly on screen at a classroom
    projector's size: nothing ends outside the slide, no code line is cut or scrolled, the
    link back to the lesson covers nothing, and no slide is shrunk below MIN_SCALE to fit.
    The check itself is shown to catch a cut line and an element below the slide."""
    width, height = PROJECTORS[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    problems, views, scaled = [], 0, []
    try:
        page = context.new_page()
        for where in _every_slide(page, site, lang):
            found = page.evaluate(_SLIDE_PROBLEMS)
            views += 1
            where += f" at {size}"
            problems += [f"{where}: {p}" for p in found["problems"]]
            if found["scale"] < 1:
                scaled.append(found["scale"])
            if found["scale"] < MIN_SCALE:
                problems.append(f"{where}: shrunk to {found['scale']} to fit")
        # the check can fail: a code line that cannot wrap, a block below the slide
        page.evaluate("""Reveal.getCurrentSlide().insertAdjacentHTML('beforeend',
            '<pre style="white-space: pre; overflow: auto">' + 'x'.repeat(400) + '</pre>' +
            '<p style="position: relative; top: 2000px">below</p>')""")
        planted = page.evaluate(_SLIDE_PROBLEMS)["problems"]
        assert any("clips its content" in p for p in planted), planted
        assert any('"below" ends outside' in p for p in planted), planted
    finally:
        context.close()
    smallest = min(scaled, default=1)
    print(f"{lang} at {size}: {views} slides, {len(scaled)} scaled (smallest {smallest})")
    assert views > 5 * 10 and not problems, "\n".join(problems)


@pytest.mark.e2e
@pytest.mark.parametrize("lang", DECK_LANGS)
def test_every_deck_meets_wcag_aa(browser, site: Path, lang: str) -> None:
    """Every slide of every deck, each fragment shown, has no critical or serious violation
    of axe-core's WCAG 2.0/2.1 A and AA rules (tests/browser.py), and every figure on it says
    what it shows (the lesson pages' alt text, tools/publishing/accessibility.py)."""
    from tests.browser import axe_violations
    from tools.publishing.accessibility import NBCONVERT_ALT

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    problems, views = [], 0
    try:
        page = context.new_page()
        for where in _every_slide(page, site, lang):
            views += 1
            problems += [f"{where}: {v}" for v in axe_violations(page)]
            alts = page.evaluate(
                "[...Reveal.getCurrentSlide().querySelectorAll('img')].map(i => i.alt)"
            )
            problems += [f"{where}: a figure without alt text" for a in alts if not a]
            problems += [
                f"{where}: nbconvert's placeholder alt" for a in alts if a == NBCONVERT_ALT
            ]
    finally:
        context.close()
    assert views > 5 * 10 and not problems, "\n".join(problems)


def _cjk_font_problems(page, where: str) -> list[str]:
    """Chromium's record of the fonts that drew the first slide's heading (``01 · 张量``):
    every glyph drawn, the Chinese ones by a system font (the theme's web font has Latin
    glyphs only; without a CJK font they would be boxes)."""
    import re

    page.keyboard.press("Home")
    text = page.evaluate("document.querySelector('.reveal section h1').innerText")
    chinese = len(re.findall(r"[\u3400-\u9fff]", text))
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": ".reveal section h1"})
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})["fonts"]
    system = sum(f["glyphCount"] for f in fonts if not f["isCustomFont"])
    if not chinese or system < chinese or sum(f["glyphCount"] for f in fonts) < len(text.strip()):
        return [f"{where}: {text!r} ({chinese} Chinese characters) drawn with {fonts}"]
    return []


# Where the README and DATA.md point at things a run makes, not files the project ships.
_MADE_BY_A_RUN = (
    ".venv",
    "build/",
    "notebooks/data",
    "notebooks/zh/data",
    "data/",
    "../shared/",
    "tools/teaching/proxy/node_modules",  # npm ci, by make hub
)


def test_every_file_the_zips_readmes_name_is_in_the_zip() -> None:
    """A reader of the unpacked zip finds what README.md and DATA.md name (once they named
    .ci/run and shared/data/README.md, which were not in it)."""
    import re

    shipped = set(archive.members())
    folders = {str(Path(name).parent) for name in shipped} | {
        str(p) for name in shipped for p in Path(name).parents
    }
    missing = []
    for doc in ("README.md", "DATA.md", "DATA.zh.md", "TEACHING.md", "TEACHING.zh.md"):
        assert doc in shipped, doc
        text = (ROOT / doc).read_text(encoding="utf-8")
        named = re.findall(r"`([\w.][\w./-]*)`", text) + re.findall(r"\]\(([\w.][\w./-]*)\)", text)
        for name in named:
            a_path = "/" in name or re.fullmatch(r"[A-Z][A-Za-z]*\.md|LICENSE|Makefile", name)
            if not a_path or name.startswith(_MADE_BY_A_RUN):
                continue
            if name.rstrip("/") not in shipped | folders:
                missing.append(f"{doc}: {name}")
    assert not missing, sorted(set(missing))


@pytest.mark.parametrize("names", [[], ["01_tensors", "02_autograd"]])
def test_a_plain_nbgrader_export_of_a_course_of_several_assignments_is_one_line(
    names: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """``nbgrader export`` without ``--assignment`` in a course of several lessons ended in a
    traceback ("export one assignment at a time"); it is one line naming the option."""
    from types import SimpleNamespace

    from tools.teaching.export import ScoresCsv

    plugin = ScoresCsv()
    gradebook = SimpleNamespace(assignments=[SimpleNamespace(name=n) for n in names])
    with caplog.at_level("ERROR"), pytest.raises(SystemExit) as stop:
        plugin.export(gradebook)
    assert stop.value.code == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "add --assignment NAME" in line and (", ".join(names) or "none") in line


@pytest.mark.parametrize(
    ("said", "words"),
    [
        (
            "[IPKernelApp] WARNING | Kernel is running over TCP without encryption\n"
            "RuntimeError: Kernel died before replying to kernel_info\n",
            "did not start (with --memory-gb 0.5",
        ),
        ("nbclient.exceptions.DeadKernelError: Kernel died\n", "stopped while it ran"),
        ("OSError: AF_UNIX path too long\n", "socket path was too long"),
        ("ValueError: something else\n", "nbgrader could not grade it: ValueError"),
    ],
)
def test_a_failed_grading_is_noted_in_a_teachers_words(said: str, words: str) -> None:
    """Issue 44, case 15/16: a note named the kernel's last log line ('[IPKernelApp] WARNING |
    Kernel is running over TCP ...'); it says which limit and where the log is."""
    from tools.teaching.grade import in_a_teachers_words

    note = in_a_teachers_words(said, 2**29, "runs/T/logs/alice.log")
    assert words in note and "runs/T/logs/alice.log" in note
    assert "IPKernelApp" not in note


@pytest.mark.parametrize(
    "linked", ["feedback", "feedback/alice.html", "runs", "grades.csv", ".grades.csv.part", "build"]
)
def test_the_grader_writes_nothing_through_a_link(
    tmp_path: Path, monkeypatch, capsys, linked: str
) -> None:
    """Issue 46 case 3 for the grader: a linked feedback/ (or a page in it), runs/, grades.csv
    or its .part in --out, or a linked build/ on the way to the default --out, is refused in
    one line (exit 2) before any submission is graded, and nothing appears in the link's
    target."""
    from tools.teaching import grade

    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    checkout.mkdir()
    elsewhere.mkdir()
    submissions = tmp_path / "submitted"
    submissions.mkdir()
    (submissions / "alice.ipynb").write_text("{}")
    monkeypatch.setattr(grade, "ROOT", checkout)
    out = checkout / "build" / "grades" / "01_tensors"
    if linked == "build":
        (checkout / "build").symlink_to(elsewhere)
    else:
        (out / linked).parent.mkdir(parents=True, exist_ok=True)
        (out / linked).symlink_to(elsewhere / Path(linked).name)
    monkeypatch.setattr(grade, "_autograde", lambda *a, **k: pytest.fail("graded through a link"))
    # what the host has (bwrap, root) is another test's matter: `make test` runs without them
    monkeypatch.setattr(grade.sandbox, "check_host", lambda: "")
    code = grade.main(["--lesson", "01", "--submissions", str(submissions), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is a link" in err, err
    assert not any(elsewhere.rglob("*")), sorted(elsewhere.rglob("*"))


def test_every_line_the_grader_says_has_its_chinese() -> None:
    """COURSE_LANG=zh make grade: each template the grader, its sandbox, its judge, make
    homework and make collect fill in (tools/teaching/words.py's in_lang) has a Chinese line
    with the same fields."""
    import ast
    import re

    from tools.teaching.words import ZH

    used = []
    for module in ("grade.py", "sandbox.py", "judge.py", "homework.py"):
        tree = ast.parse((ROOT / "tools" / "teaching" / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "in_lang":
                template = node.args[1]
                assert isinstance(template, ast.Constant), (module, node.lineno)  # no f-string
                used.append(template.value)
    assert len(used) >= 25
    assert [t for t in used if t not in ZH] == []
    assert sorted(set(ZH) - set(used)) == []  # no line left behind

    def fields(text: str) -> list[str]:
        return sorted(set(re.findall(r"\{(\w+)", text)))

    assert [en for en, zh in ZH.items() if fields(en) != fields(zh)] == []
