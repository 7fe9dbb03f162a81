"""Build the offline teaching site: ``notebooks/*.ipynb`` -> static HTML under ``build/site``.

Usage (``make html`` runs the first form)::

    python -m tools.publishing.build_site                      # stored outputs, into build/site
    python -m tools.publishing.build_site --execute            # re-execute (on a copy) first
    python -m tools.publishing.build_site --notebooks DIR --out DIR

A build replaces ``--out`` only if it is empty, or holds just what an earlier build wrote
there, unchanged (listed in ``_static/built-files.sha256``): anything else stops it, named.

Every lesson page is rendered by nbconvert with the template in
``tools/publishing/templates/lesson``
(JupyterLab's look plus navigation). The site never loads anything from another host:
MathJax 2 is copied from the ``jupyter-server-mathjax`` wheel into ``_static/mathjax``,
images are embedded as data URIs, require.js / widget / mermaid CDN scripts are dropped and
saved widget state (tqdm bars) is rendered as static HTML; code and outputs get keyboard
access and names, figures alt text (tools/publishing/accessibility.py), and
``code-colours.css`` gives
code and prompts WCAG AA contrast (tests/test_accessibility.py). The index lists each lesson's
title, summary, run time and hardware, read from the notebook's first markdown cell
(the convention in CONTRIBUTING.md).

The Chinese site goes into ``<out>/zh`` (``--english-only`` skips it): the same notebooks
with the markdown of ``translations/zh`` (tools/authoring/i18n.py), a language switch on every page,
its own search index and the interface words of ``templates/strings/<code>.json``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import html
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import mistune
import nbformat
from nbconvert import HTMLExporter
from traitlets import validate

from tools import conventions
from tools.authoring import i18n, lesson_size
from tools.lessons import lesson_notebooks
from tools.publishing import archive, decks
from tools.publishing.accessibility import make_accessible

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = "_static"
# Every file a build wrote, with its sha256 (sha256sum's format): a rebuild replaces the
# folder only if it holds exactly these files, unchanged, so nothing a user put there is lost.
MANIFEST = f"{STATIC}/built-files.sha256"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"
TOC_MARKER = "<!-- blitz-toc -->"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# Fields every first cell carries, as `**Name**:` or `**Name:**` at the start of a line, and
# their labels in every language (tools/conventions.py).
HEADER_FIELDS = tuple(conventions.lesson_words(conventions.SOURCE)["header_fields"])
HEADER_ALIASES = {
    label: field
    for code in conventions.codes()
    for field, label in conventions.lesson_words(code)["header_fields"].items()
}
_TITLE_RE = re.compile(r"^#\s+(\d{2})\s*·\s*(.+?)\s*$")
# Chinese puts a full-width colon (：) where English has ':'.
_FIELD_RE = re.compile(r"^\*\*\s*([^*:：]+?)\s*[:：]?\s*\*\*\s*[:：]?\s*(.*)$")


@dataclass(frozen=True)
class Language:
    """One language of the site: where its pages go (``folder``, "" for the root)."""

    # its strings file's name (tools/conventions.py), its catalog folder (tools/authoring/i18n.py)
    code: str
    html_lang: str
    folder: str

    @property
    def search_index(self) -> str:
        return "search-index.js" if not self.folder else f"search-index-{self.code}.js"


def site_languages() -> list[Language]:
    """English (the source, at the site's root), then every language with a strings file
    (tools/conventions.py), each in its own folder, built from translations/<code>/."""
    return [
        Language(code, conventions.lesson_words(code)["html_lang"], "" if i == 0 else code)
        for i, code in enumerate(conventions.codes())
    ]


class _LessonExporter(HTMLExporter):
    """nbconvert's HTML exporter, taking a BCP 47 ``<html lang>`` such as ``zh-CN``.

    nbconvert accepts bare ISO 639-1 codes only and turns others into "en"; the region
    matters here, since it makes browsers pick Simplified Chinese glyph shapes.
    """

    @validate("language_code")
    def _valid_language_code(self, proposal: dict) -> str:
        return proposal["value"]


class SiteError(RuntimeError):
    """A notebook or the environment is not fit to build the site; the message says why."""


@dataclass
class Lesson:
    """What the site needs to know about one notebook."""

    path: Path
    number: str
    short_title: str
    summary: str
    fields: dict[str, str]
    stem: str = field(init=False)

    def __post_init__(self) -> None:
        self.stem = self.path.stem

    @property
    def title(self) -> str:
        return f"{self.number} · {self.short_title}"

    @property
    def html_name(self) -> str:
        return f"{self.stem}.html"

    @property
    def ipynb_name(self) -> str:
        return self.path.name

    @property
    def deck_name(self) -> str:
        return decks.deck_name(self.stem)

    @property
    def summary_text(self) -> str:
        return _plain(self.summary)

    @property
    def run_time(self) -> str:
        """The header's whole run-time line, without its final stop. All of it: the header is
        the one source (README points at it), and a shortened copy on the index read as a
        different number (04's subset times were cut off)."""
        return self.fields["Run time"].strip().rstrip(".。")

    @property
    def learner_time(self) -> str:
        """The learner-time line (tools/authoring/lesson_size.py writes it), without its final
        stop."""
        return self.fields["Learner time"].strip().rstrip(".。")

    @property
    def hardware(self) -> str:
        """The first sentence of the hardware note."""
        return _first_sentence(self.fields["Hardware"])

    def as_context(self) -> dict[str, str]:
        """The strings the templates use (HTML ones already rendered from markdown)."""
        return {
            "stem": self.stem,
            "number": self.number,
            "short_title": self.short_title,
            "title": self.title,
            "html_name": self.html_name,
            "ipynb_name": self.ipynb_name,
            "deck_name": self.deck_name,
            "summary_html": _inline_markdown(self.summary),
            "summary_text": self.summary_text,
            "run_time_html": _inline_markdown(self.run_time),
            "learner_time_html": _inline_markdown(self.learner_time),
            "hardware_html": _inline_markdown(self.hardware),
        }


def _plain(markdown: str) -> str:
    return re.sub(r"[`*_]", "", markdown)


def _first_sentence(text: str) -> str:
    # English sentences end in ". " before a capital; Chinese ones in 。！？ with no space.
    match = re.match(r"(.+?(?:[.!?](?=\s+[A-Z(]|$)|[。！？]))", text)
    return (match.group(1) if match else text).strip()


_md = mistune.create_markdown(escape=True)


def _inline_markdown(text: str) -> str:
    rendered = str(_md(text)).strip()
    return re.sub(r"^<p>(.*)</p>$", r"\1", rendered, flags=re.S)


def parse_header(path: Path, nb: nbformat.NotebookNode) -> Lesson:
    """Read title, summary and the **Field** paragraphs from the notebook's first cell.

    Raises :class:`SiteError` naming the notebook and what is missing, so that an author
    can fix the cell (see CONTRIBUTING.md, "Conventions every notebook follows").
    """
    where = f"{path.name}: first cell"
    if not nb.cells or nb.cells[0].cell_type != "markdown":
        raise SiteError(f"{where} must be a markdown cell starting with '# NN · Title'")
    lines = nb.cells[0].source.strip().splitlines()
    title = _TITLE_RE.match(lines[0]) if lines else None
    if not title:
        found = repr(lines[0]) if lines else "an empty cell"
        raise SiteError(f"{where} must start with '# NN · Title' (a middle dot), found {found}")
    number, short_title = title.groups()
    if not path.name.startswith(number):
        raise SiteError(f"{where}: title number {number} does not match the file name")

    summary: list[str] = []
    fields: dict[str, list[str]] = {}
    current: list[str] | None = summary
    for line in lines[1:]:
        match = _FIELD_RE.match(line.strip())
        label = match and HEADER_ALIASES.get(match.group(1), match.group(1))
        if match and label in HEADER_FIELDS:
            current = fields.setdefault(label, [])
            if match.group(2):
                current.append(match.group(2))
        elif not line.strip():
            # The summary is the first paragraph only; fields may span several lines.
            if current is summary and summary:
                current = None
        elif current is not None:
            current.append(line.strip())
    if not summary:
        raise SiteError(f"{where} needs a one-sentence summary right after the title")
    missing = [name for name in HEADER_FIELDS if not fields.get(name)]
    if missing:
        raise SiteError(
            f"{where} lacks {', '.join(f'**{m}**' for m in missing)} (or its translated label) "
            "(each as a bold label followed by its text; see CONTRIBUTING.md)"
        )
    return Lesson(
        path=path,
        number=number,
        short_title=short_title,
        summary=" ".join(summary),
        fields={name: " ".join(fields[name]) for name in HEADER_FIELDS},
    )


# --- widgets: saved state -> static HTML -------------------------------------------------


def _render_widget(model_id: str, state: dict, depth: int = 0) -> str | None:
    model = state.get(model_id)
    if model is None or depth > 20:
        return None
    name = model.get("model_name", "")
    values = model.get("state", {})
    if name in {"HBoxModel", "VBoxModel", "BoxModel"}:
        parts = []
        for child in values.get("children", []):
            rendered = _render_widget(child.removeprefix("IPY_MODEL_"), state, depth + 1)
            if rendered is None:
                return None
            parts.append(rendered)
        kind = "blitz-vbox" if name == "VBoxModel" else "blitz-hbox"
        return f'<div class="blitz-widget {kind}">{"".join(parts)}</div>'
    if name in {"FloatProgressModel", "IntProgressModel"}:
        style = html.escape(values.get("bar_style") or "")
        label = html.escape(values.get("description") or "")
        return (
            f'<span class="blitz-widget-label">{label}</span>'
            f'<progress class="blitz-progress {style}" value="{values.get("value", 0)}" '
            f'max="{values.get("max", 100)}"></progress>'
        )
    if name == "HTMLModel":
        # The notebook itself produced this HTML (tqdm's counters); nbconvert trusts
        # stored text/html outputs the same way.
        return f'<span class="blitz-widget-html">{values.get("value", "")}</span>'
    if name == "LabelModel":
        return f'<span class="blitz-widget-html">{html.escape(values.get("value", ""))}</span>'
    return None


def render_widgets_statically(nb: nbformat.NotebookNode) -> int:
    """Replace widget views by static HTML from the saved widget state; return how many.

    A view whose model was not saved keeps only its text/plain fallback. The widget state is
    dropped from the metadata afterwards: rendering it live would need scripts from a CDN.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            rendered = _render_widget(view.get("model_id", ""), state)
            if rendered is not None:
                data["text/html"] = rendered
                count += 1
    nb.metadata.pop("widgets", None)
    return count


# --- table of contents and search --------------------------------------------------------


# Which part of a lesson a cell belongs to, by its tag (CONTRIBUTING.md, "The core path and
# the deep dives"): site.js hides both parts for "Core path only", and the search says so.
PART_OF_TAG = {
    "celltag_optional": "deep_dive",
    "celltag_exercise": "exercise",
    "celltag_solution": "exercise",
}


def _part(classes: list[str]) -> str:
    """The part ("deep_dive", "exercise", or "" for the core path) of a cell's classes."""
    return next((PART_OF_TAG[c] for c in classes if c in PART_OF_TAG), "")


class _Headings(HTMLParser):
    """Collect (level, id, text) of h1-h3, the part of the lesson each heading is in, and the
    text of every section for the search."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[tuple[int, str, str]] = []
        self.parts: list[str] = []
        self.sections: list[list[str]] = [[]]
        self._in_heading: tuple[int, str] | None = None
        self._text: list[str] = []
        self._skip = 0
        self._part = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        # nbconvert writes a cell's tags as classes: on the cell of a code cell, on the
        # rendered markdown of a markdown cell; every cell starts a new part.
        if tag == "div" and ("jp-Cell" in classes or "jp-MarkdownOutput" in classes):
            self._part = _part(classes)
        if tag in {"script", "style"}:
            self._skip += 1
        elif tag in {"h1", "h2", "h3"}:
            self._in_heading = (int(tag[1]), dict(attrs).get("id") or "")
            self._text = []
        elif tag == "a" and self._in_heading and dict(attrs).get("class") == "anchor-link":
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style"} or (tag == "a" and self._skip and self._in_heading):
            self._skip = max(0, self._skip - 1)
        elif tag in {"h1", "h2", "h3"} and self._in_heading:
            level, anchor = self._in_heading
            text = " ".join("".join(self._text).split())
            self.headings.append((level, anchor, text))
            self.parts.append(self._part)
            self.sections.append([])
            self._in_heading = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_heading:
            self._text.append(data)
        else:
            self.sections[-1].append(data)


def _toc_html(headings: list[tuple[int, str, str]], empty: str) -> str:
    """Nested ordered list of the ## and ### headings (### nest under the ## before them)."""
    items = [(lvl, anchor, text) for lvl, anchor, text in headings if lvl in (2, 3) and anchor]
    if not items:
        return f'<p class="blitz-toc-empty">{html.escape(empty)}</p>'
    out = ['<ol class="blitz-toc-list">']
    in_item = in_sub = False
    for level, anchor, text in items:
        link = f'<a href="#{html.escape(anchor)}">{html.escape(text)}</a>'
        if level == 3 and in_item:
            if not in_sub:
                out.append('<ol class="blitz-toc-sub">')
                in_sub = True
            out.append(f"<li>{link}</li>")
            continue
        if in_sub:
            out.append("</ol>")
            in_sub = False
        if in_item:
            out.append("</li>")
        out.append(f"<li>{link}")
        in_item = True
    out.append("</ol></li></ol>" if in_sub else "</li></ol>")
    return "".join(out)


def _search_entries(lesson: Lesson, parser: _Headings) -> list[dict[str, str]]:
    """One entry per heading; ``part`` says whether the section is a deep dive or an exercise,
    so that the results can say so before a click (the switch hides those parts)."""
    entries = []
    sections = zip(parser.headings, parser.parts, parser.sections[1:], strict=True)
    for (level, anchor, text), part, words in sections:
        body = " ".join(" ".join(words).split())
        entries.append(
            {
                "page": lesson.html_name,
                "lesson": lesson.title,
                "section": text if level > 1 else lesson.title,
                "anchor": anchor if level > 1 else "",
                "part": part,
                "text": body[:4000],
            }
        )
    return entries


# --- building ------------------------------------------------------------------------------


def find_mathjax() -> Path:
    """Directory holding MathJax 2's ``MathJax.js`` (from the jupyter-server-mathjax wheel)."""
    try:
        import jupyter_server_mathjax
    except ImportError as exc:  # pragma: no cover - the pin in requirements.txt installs it
        raise SiteError(
            "MathJax is missing: `pip install -r requirements.txt` (jupyter-server-mathjax) "
            "or run `make venv`"
        ) from exc
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (static / "MathJax.js").is_file():
        raise SiteError(f"{static} holds no MathJax.js: reinstall jupyter-server-mathjax")
    return static


def execute_notebook(nb: nbformat.NotebookNode, path: Path, timeout: int = 600) -> None:
    """Run ``nb`` top to bottom in memory (the file on disk is not touched) with the runner
    and the test contract of ``make refresh`` (tools/authoring/run_notebooks.py,
    tools/harness/contract.py): on
    the CPU, from the subset, as the stored outputs were made."""
    from tools.authoring import run_notebooks
    from tools.harness import contract

    contract.apply()
    result = run_notebooks.execute(nb, path, timeout, "python3")
    if not result.passed:
        raise SiteError(f"{path.name} did not run:\n{result.report}")


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook, or a :class:`SiteError` naming the file and what is wrong."""
    try:
        return i18n.load_notebook(path)
    except i18n.I18nError as exc:
        raise SiteError(str(exc)) from exc


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def record_build(out_dir: Path) -> None:
    """Write ``MANIFEST``: every file now under ``out_dir`` (a build's, just written)."""
    files = sorted(p for p in out_dir.rglob("*") if p.is_file())
    lines = [f"{_sha256(p)}  {p.relative_to(out_dir).as_posix()}\n" for p in files]
    (out_dir / MANIFEST).write_text("".join(lines), encoding="utf-8")


def check_rebuildable(out_dir: Path) -> None:
    """Raise :class:`SiteError` unless replacing ``out_dir`` loses nothing: it is empty, or
    holds exactly the files an earlier build recorded in ``MANIFEST``, unchanged."""
    if not any(out_dir.iterdir()):
        return
    manifest = out_dir / MANIFEST
    if not manifest.is_file():  # a mistyped --out could be anything
        raise SiteError(
            f"{out_dir} is not empty and has no {MANIFEST}, so this tool did not build it (or "
            f"built it before keeping that record): pick another --out, or delete it yourself "
            f"if nothing in it is yours"
        )
    recorded = {}
    for line in manifest.read_text(encoding="utf-8", errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        recorded[name] = digest
    foreign, changed = [], []
    for root, dirs, files in os.walk(out_dir):  # a link to a folder is listed, not entered
        dirs.sort()
        here = Path(root).relative_to(out_dir)
        foreign += [f"{(here / d).as_posix()}/" for d in dirs if (Path(root) / d).is_symlink()]
        for name in sorted(files):
            rel, path = (here / name).as_posix(), Path(root) / name
            if rel == MANIFEST:
                continue
            # A FIFO or device is never the build's, and reading one could block forever.
            if rel not in recorded or path.is_symlink() or not path.is_file():
                foreign.append(rel)
            elif _sha256(path) != recorded[rel]:
                changed.append(rel)
    if foreign or changed:
        lost = foreign + changed
        named = ", ".join(lost[:2]) + (f" and {len(lost) - 2} more" if len(lost) > 2 else "")
        what = "files this tool did not write" if foreign else "files changed since the build"
        if foreign and changed:
            what = "files this tool did not write or that changed since the build"
        raise SiteError(
            f"{out_dir} holds {what} ({named}), which a rebuild would lose: move them out "
            "of the folder, or pick another --out"
        )


def copy_regular(src: Path, dst: Path, log: Callable[[str], object] = print) -> None:
    """Copy the folder ``src`` into ``dst``: regular files and folders only (a FIFO or a
    device would block the copy or fail it), each other entry named in one line to ``log``."""

    def specials(folder: str, names: list[str]) -> list[str]:
        skipped = [
            n
            for n in names
            if not (os.path.isdir(Path(folder, n)) or os.path.isfile(Path(folder, n)))
        ]
        for name in skipped:
            log(f"  skipped {Path(folder, name)}: not a regular file or folder")
        return skipped

    shutil.copytree(src, dst, ignore=specials, dirs_exist_ok=True)


def build_site(
    notebooks_dir: Path,
    out_dir: Path,
    execute: bool = False,
    log: Callable[[str], object] = print,
    translations: Path | None = None,
) -> list[Lesson]:
    """Render every lesson (``NN_name.ipynb``) in ``notebooks_dir`` into a site in ``out_dir``.

    ``out_dir`` is replaced as a whole, but only if it is empty or an earlier build holding
    only the files it wrote, unchanged (``MANIFEST``); a failed build leaves nothing there.
    With ``execute=True`` each notebook is re-run in memory first (the file is untouched).
    With ``translations`` (the catalogs' folder, see tools/authoring/i18n.py) the Chinese site goes
    into ``out_dir/zh``: the same notebooks, outputs included, with the catalog's markdown.
    An untranslated or stale cell shows its English text there (``tools/authoring/i18n.py check``
    fails until none is left), so every lesson exists in both languages.
    Raises :class:`SiteError` with an actionable message on bad input.
    """
    paths = lesson_notebooks(notebooks_dir, log)
    if not paths:
        raise SiteError(f"no notebooks (NN_name.ipynb) in {notebooks_dir}: nothing to build")
    notebooks = [(p, read_notebook(p)) for p in paths]
    lessons = [parse_header(p, nb) for p, nb in notebooks]
    languages = site_languages() if translations is not None else site_languages()[:1]
    catalogs = {
        lang.code: [i18n.Catalog.load(p, lang.code, translations) for p in paths]
        for lang in languages[1:]
    }
    # The translated downloads and headers come from the files as stored (like the English
    # download); a header the site cannot read fails here, before out_dir is touched.
    downloads = {"en": [p.read_bytes() for p in paths]}
    headers = {"en": lessons}
    for code, cats in catalogs.items():
        stored = [i18n.translate(nb, cat) for (_, nb), cat in zip(notebooks, cats, strict=True)]
        downloads[code] = [i18n.notebook_text(nb).encode() for nb in stored]
        headers[code] = [parse_header(p, nb) for p, nb in zip(paths, stored, strict=True)]
    # Measured on the English cells (a Chinese paragraph has no spaces to count words by);
    # the translated notebooks have the same cells, so the same sections and minutes.
    dives = [lesson_size.deep_dives(nb) for _, nb in notebooks]
    mathjax = find_mathjax()

    if out_dir.exists():
        check_rebuildable(out_dir)
        shutil.rmtree(out_dir)
    try:
        static = out_dir / STATIC
        static.mkdir(parents=True)
        copy_regular(mathjax, static / "mathjax", log)
        copy_regular(TEMPLATES / "static", static, log)
        copy_regular(decks.REVEAL, static / "reveal.js", log)
        # The whole collection in one zip: a single notebook does not run without `utils`.
        size = archive.write_archive(out_dir / archive.NAME)
        log(f"  {archive.NAME}  ({size / 1e6:.1f} MB)")

        if execute:
            for path, nb in notebooks:
                start = time.perf_counter()
                execute_notebook(nb, path)
                log(f"  executed {path.name}  ({time.perf_counter() - start:.1f} s)")
        ui = {lang.code: conventions.strings(lang.code) for lang in languages}
        for lang in languages:
            # Translated pages: the (possibly re-executed) English notebooks with the catalog's
            # markdown and code comments, so both languages always show the same code and
            # outputs.
            pages = [nb for _, nb in notebooks]
            if lang.code in catalogs:
                pages = [
                    i18n.translate(nb, c) for nb, c in zip(pages, catalogs[lang.code], strict=True)
                ]
            others = [other for other in languages if other != lang]
            _render_language(
                lang,
                pages,
                headers[lang.code],
                downloads[lang.code],
                out_dir,
                ui,
                others,
                log,
                dives,
            )
    except BaseException:
        # The folder holds only what this run wrote: an unfinished site is of no use.
        shutil.rmtree(out_dir, ignore_errors=True)
        raise
    record_build(out_dir)
    return lessons


def mark_deep_dives(
    nb: nbformat.NotebookNode, dives: list[lesson_size.DeepDive], badge: str
) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose deep-dive headings carry the badge ("deep dive · optional ·
    about N min") under the heading line; site.js hides the sections for "core path only"."""
    nb = copy.deepcopy(nb)
    for dive in dives:
        cell = nb.cells[dive.start]
        if cell.cell_type != "markdown":
            continue
        heading, _, rest = cell.source.partition("\n")
        text = html.escape(badge.replace("{n}", str(max(1, dive.size.minutes))))
        cell.source = f'{heading}\n\n<p class="blitz-deep-dive-badge">{text}</p>\n{rest}'
    return nb


def _render_language(
    lang: Language,
    pages: list[nbformat.NotebookNode],
    lessons: list[Lesson],
    downloads: list[bytes],
    site_dir: Path,
    ui: dict[str, dict[str, str]],
    others: list[Language],
    log: Callable[[str], object],
    dives: list[list[lesson_size.DeepDive]],
) -> None:
    """Write one language's lesson pages, index and search index under ``site_dir``."""
    out_dir = site_dir / lang.folder
    out_dir.mkdir(parents=True, exist_ok=True)
    # Pages in a language folder share the root's _static (MathJax alone is 12 MB).
    static = "../" * bool(lang.folder) + STATIC
    up = "../" * bool(lang.folder)
    words = ui[lang.code]
    title = words["site_title"]
    exporter = _LessonExporter(
        template_name="lesson",
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(TEMPLATES)],  # blitz_mathjax.html.j2, shared with the decks
        theme="light",
        language_code=lang.html_lang,
    )

    def switch(page: str) -> list[dict[str, str]]:
        """Links to ``page`` in every other language (relative to this language's folder)."""
        return [
            {
                "href": up + (f"{o.folder}/" if o.folder else "") + page,
                "lang": o.html_lang,
                "name": ui[o.code]["language_name"],
                "label": ui[o.code]["switch_label"],
            }
            for o in others
        ]

    summaries = [lesson.as_context() for lesson in lessons]
    search: list[dict[str, str]] = []
    for i, (nb, lesson) in enumerate(zip(pages, lessons, strict=True)):
        start = time.perf_counter()
        (out_dir / lesson.ipynb_name).write_bytes(downloads[i])
        render_widgets_statically(nb)
        mathjax_url = f"{static}/mathjax/MathJax.js?config={MATHJAX_CONFIG}"
        deck = decks.render_deck(
            nb,
            title=f"{lesson.title} · {words['slides']}",
            html_lang=lang.html_lang,
            static=static,
            mathjax_url=mathjax_url,
            lesson_page=lesson.html_name,
            words=words,
        )
        (out_dir / lesson.deck_name).write_text(deck, encoding="utf-8")
        nb = mark_deep_dives(nb, dives[i], words["deep_dive_badge"])
        nb.metadata["title"] = f"{lesson.title} · {title}"
        resources = {
            "site": {
                "title": title,
                "ui": words,
                "static": static,
                "mathjax_url": mathjax_url,
                "archive": up + archive.NAME,
                "languages": switch(lesson.html_name),
                "lesson": summaries[i],
                "lessons": summaries,
                "prev": summaries[i - 1] if i > 0 else None,
                "next": summaries[i + 1] if i + 1 < len(summaries) else None,
                "toc_marker": TOC_MARKER,
            }
        }
        body, _ = exporter.from_notebook_node(nb, resources=resources)
        body = make_accessible(body, nb, words)
        parser = _Headings()
        parser.feed(body)
        body = body.replace(TOC_MARKER, _toc_html(parser.headings, words["toc_empty"]), 1)
        (out_dir / lesson.html_name).write_text(body, encoding="utf-8")
        search.extend(_search_entries(lesson, parser))
        log(
            f"  {lang.folder + '/' if lang.folder else ''}{lesson.html_name}"
            f"  ({time.perf_counter() - start:.1f} s)"
        )

    (site_dir / STATIC / lang.search_index).write_text(
        "window.BLITZ_SEARCH_INDEX = " + json.dumps(search, ensure_ascii=False) + ";\n",
        encoding="utf-8",
    )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, keep_trailing_newline=True
    )
    index = env.get_template("home.html.j2").render(
        title=title,
        html_lang=lang.html_lang,
        ui=words,
        static=static,
        search_index=f"{static}/{lang.search_index}",
        languages=switch("index.html"),
        lessons=summaries,
        archive=up + archive.NAME,
    )
    (out_dir / "index.html").write_text(index, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument(
        "--translations",
        type=Path,
        default=ROOT / "translations",
        help="catalogs of the translated sites (tools/authoring/i18n.py); default: %(default)s",
    )
    parser.add_argument(
        "--english-only", action="store_true", help="skip the translated sites (build/site/zh)"
    )
    parser.add_argument(
        "--execute",
        action="store_true",
        help="re-execute each notebook (in memory) before rendering; stored outputs otherwise",
    )
    args = parser.parse_args(argv)
    # Usage errors (exit 2) before anything is read or written. The folder's content is
    # checked by build_site itself, which wipes only a site it built.
    existing = next((p for p in (args.out, *args.out.parents) if p.exists()), None)
    if args.out.is_symlink():
        parser.error(f"--out {args.out} is a symbolic link: give the folder it points to")
    if existing == args.out and not args.out.is_dir():
        parser.error(f"--out {args.out} is a file, not a folder: give a folder for the site")
    if existing is not None and not existing.is_dir():
        parser.error(f"--out {args.out} is inside {existing}, which is a file: give a folder")
    if not args.notebooks.is_dir():
        parser.error(f"--notebooks {args.notebooks} is not a folder")
    start = time.perf_counter()
    print(f"Building the site from {args.notebooks} into {args.out}")
    try:
        lessons = build_site(
            args.notebooks,
            args.out,
            execute=args.execute,
            translations=None if args.english_only else args.translations,
        )
    except (SiteError, i18n.I18nError, archive.ArchiveError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    index = (args.out / "index.html").resolve()
    print(
        f"Built {len(lessons)} lesson pages + index per language in "
        f"{time.perf_counter() - start:.1f} s.\n"
        f"Open {index.as_uri()} (or: python -m http.server -d {args.out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
