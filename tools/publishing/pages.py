"""The site's pages: a lesson's header (its first cell), its page, deck and download, and each
language's index. nbconvert renders a page with ``templates/lesson`` (JupyterLab's look plus
navigation); saved widgets become static HTML, since live ones load scripts from a CDN."""

from __future__ import annotations

import copy
import html
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jinja2
import mistune
import nbformat
from nbconvert import HTMLExporter

from tools import conventions
from tools.authoring.lesson_size import DeepDive
from tools.publishing import decks, guides, search
from tools.publishing.accessibility import any_language, make_accessible
from tools.publishing.archive import NAME as ARCHIVE
from tools.publishing.decks import TEMPLATES

STATIC = "_static"
TOC_MARKER = "<!-- blitz-toc -->"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# The header's fields, `**Name**:` or `**Name:**` at the start of a line, under their labels
# in every language (tools/conventions.py).
HEADER_FIELDS = tuple(conventions.lesson_words(conventions.SOURCE)["header_fields"])
HEADER_ALIASES = {
    label: name
    for code in conventions.codes()
    for name, label in conventions.lesson_words(code)["header_fields"].items()
}
_TITLE_RE = re.compile(r"^#\s+(\d{2})\s*·\s*(.+?)\s*$")
_FIELD_RE = re.compile(r"^\*\*\s*([^*:：]+?)\s*[:：]?\s*\*\*\s*[:：]?\s*(.*)$")  # ： in Chinese
_md = mistune.create_markdown(escape=True)
_Exporter = any_language(HTMLExporter)


class SiteError(RuntimeError):
    """A notebook or the environment is not fit to build the site; the message says why."""


def _inline(markdown: str) -> str:
    return re.sub(r"^<p>(.*)</p>$", r"\1", str(_md(markdown)).strip(), flags=re.S)


@dataclass
class Lesson:
    """What the site shows of a lesson, read from its first cell."""

    path: Path
    number: str
    short_title: str
    summary: str
    fields: dict[str, str]

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def title(self) -> str:
        return f"{self.number} · {self.short_title}"

    @property
    def html_name(self) -> str:
        return f"{self.stem}.html"

    # The whole line: the header is the one source, and a shortened copy on the index read
    # as a different number (04's subset times were cut off).
    @property
    def run_time(self) -> str:
        return self.fields["Run time"].strip().rstrip(".。")

    @property
    def learner_time(self) -> str:
        return self.fields["Learner time"].strip().rstrip(".。")

    @property
    def hardware(self) -> str:
        # English sentences end in ". " before a capital; Chinese ones in 。！？ with no space.
        text = self.fields["Hardware"]
        match = re.match(r"(.+?(?:[.!?](?=\s+[A-Z(]|$)|[。！？]))", text)
        return (match.group(1) if match else text).strip()

    def as_context(self) -> dict[str, str]:
        """The strings the templates use (``*_html`` rendered from markdown)."""
        return {
            "stem": self.stem,
            "number": self.number,
            "short_title": self.short_title,
            "html_name": self.html_name,
            "ipynb_name": self.path.name,
            "deck_name": decks.deck_name(self.stem),
            "summary_html": _inline(self.summary),
            "summary_text": re.sub(r"[`*_]", "", self.summary),
            "run_time_html": _inline(self.run_time),
            "learner_time_html": _inline(self.learner_time),
            "hardware_html": _inline(self.hardware),
        }


def parse_header(path: Path, nb: nbformat.NotebookNode) -> Lesson:
    """The title, summary and **Field** paragraphs of ``nb``'s first cell, or a
    :class:`SiteError` naming the notebook and what is missing (CONTRIBUTING.md)."""
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
            if current is summary and summary:  # the summary is one paragraph; a field may be more
                current = None
        elif current is not None:
            current.append(line.strip())
    if not summary:
        raise SiteError(f"{where} needs a one-sentence summary right after the title")
    if missing := [name for name in HEADER_FIELDS if not fields.get(name)]:
        raise SiteError(
            f"{where} lacks {', '.join(f'**{m}**' for m in missing)} (or its translated label) "
            "(each as a bold label followed by its text; see CONTRIBUTING.md)"
        )
    joined = {name: " ".join(fields[name]) for name in HEADER_FIELDS}
    return Lesson(path, number, short_title, " ".join(summary), joined)


def _widget(model_id: str, state: dict, depth: int = 0) -> str | None:
    """Static HTML of widget ``model_id`` (boxes, progress bars, labels), else None."""
    model = state.get(model_id)
    if model is None or depth > 20:  # a box holding itself, in a broken state
        return None
    name, values = model.get("model_name", ""), model.get("state", {})
    if name in {"HBoxModel", "VBoxModel", "BoxModel"}:
        children = values.get("children", [])
        parts = [_widget(c.removeprefix("IPY_MODEL_"), state, depth + 1) for c in children]
        if any(part is None for part in parts):
            return None
        kind = "blitz-vbox" if name == "VBoxModel" else "blitz-hbox"
        return f'<div class="blitz-widget {kind}">{"".join(map(str, parts))}</div>'
    if name in {"FloatProgressModel", "IntProgressModel"}:
        style = html.escape(values.get("bar_style") or "")
        label = html.escape(values.get("description") or "")
        return (
            f'<span class="blitz-widget-label">{label}</span>'
            f'<progress class="blitz-progress {style}" value="{values.get("value", 0)}" '
            f'max="{values.get("max", 100)}"></progress>'
        )
    if name in {"HTMLModel", "LabelModel"}:
        # HTMLModel's HTML is the notebook's own (tqdm's counters), trusted like its text/html.
        value = values.get("value", "")
        value = value if name == "HTMLModel" else html.escape(value)
        return f'<span class="blitz-widget-html">{value}</span>'
    return None


def render_widgets_statically(nb: nbformat.NotebookNode) -> int:
    """Replace widget views by static HTML from the saved state (how many); a view with no saved
    model keeps its text/plain. The state is dropped: rendering it live needs a CDN."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                rendered = _widget(data.pop(WIDGET_VIEW).get("model_id", ""), state)
                if rendered is not None:
                    data["text/html"] = rendered
                    count += 1
    nb.metadata.pop("widgets", None)
    return count


def mark_deep_dives(
    nb: nbformat.NotebookNode, dives: list[DeepDive], badge: str
) -> nbformat.NotebookNode:
    """A copy of ``nb`` with the badge ("deep dive · optional · about N min") under each deep
    dive's heading."""
    nb = copy.deepcopy(nb)
    for dive in dives:
        cell = nb.cells[dive.start]
        if cell.cell_type == "markdown":
            heading, _, rest = cell.source.partition("\n")
            text = html.escape(badge.replace("{n}", str(max(1, dive.size.minutes))))
            cell.source = f'{heading}\n\n<p class="blitz-deep-dive-badge">{text}</p>\n{rest}'
    return nb


def toc_html(sections: list[search.Section], empty: str) -> str:
    """The ## and ### headings as nested lists (a ### under the ## before it)."""
    items = [s for s in sections if s.level in (2, 3) and s.anchor]
    if not items:
        return f'<p class="blitz-toc-empty">{html.escape(empty)}</p>'
    close = {0: "", 1: "</li>", 2: "</ol></li>"}
    out, depth = ['<ol class="blitz-toc-list">'], 0  # depth 1: in a ## item, 2: in its list
    for s in items:
        link = f'<li><a href="#{html.escape(s.anchor)}">{html.escape(s.title)}</a>'
        if s.level == 3 and depth:
            out.append(("" if depth == 2 else '<ol class="blitz-toc-sub">') + link + "</li>")
            depth = 2
        else:
            out.append(close[depth] + link)
            depth = 1
    return "".join(out) + close[depth] + "</ol>"


def render_language(
    code: str,
    codes: list[str],
    nbs: list[nbformat.NotebookNode],
    lessons: list[Lesson],
    downloads: list[bytes],
    dives: list[list[DeepDive]],
    site_dir: Path,
    log: Callable[[str], object],
    guide: guides.Guide | None = None,
    guide_codes: frozenset[str] = frozenset(),
) -> None:
    """Write one language's lesson pages, decks, notebooks, index and search index, and its
    ``guide`` page (the other ``guide_codes`` have one too, for the language switch)."""
    folder = "" if code == conventions.SOURCE else f"{code}/"  # the source's at the root
    out = site_dir / folder
    out.mkdir(parents=True, exist_ok=True)
    up = "../" if folder else ""
    static = up + STATIC  # a language folder shares the root's (MathJax alone is 12 MB)
    words = conventions.strings(code)
    html_lang = words["lesson"]["html_lang"]
    exporter = _Exporter(
        template_name="lesson",
        extra_template_basedirs=[str(TEMPLATES)],
        extra_template_paths=[str(TEMPLATES)],  # blitz_mathjax.html.j2, shared with the decks
        theme="light",
        language_code=html_lang,
    )
    others = {other: conventions.strings(other) for other in codes if other != code}

    def switch(page: str) -> list[dict[str, str]]:
        """Links to ``page`` in every other language."""
        return [
            {
                "href": up + ("" if other == conventions.SOURCE else f"{other}/") + page,
                "lang": theirs["lesson"]["html_lang"],
                "name": theirs["language_name"],
                "label": theirs["switch_label"],
            }
            for other, theirs in others.items()
        ]

    cards = [lesson.as_context() for lesson in lessons]
    found: list[dict[str, str]] = []
    for i, (nb, lesson) in enumerate(zip(nbs, lessons, strict=True)):
        start = time.perf_counter()
        (out / lesson.path.name).write_bytes(downloads[i])
        render_widgets_statically(nb)
        deck = decks.render_deck(nb, lesson.title, lesson.html_name, static, words)
        (out / decks.deck_name(lesson.stem)).write_text(deck, encoding="utf-8")
        nb = mark_deep_dives(nb, dives[i], words["deep_dive_badge"])
        nb.metadata["title"] = f"{lesson.title} · {words['site_title']}"
        site = {
            "title": words["site_title"],
            "ui": words,
            "static": static,
            "mathjax_url": decks.mathjax_url(static),
            "archive": up + ARCHIVE,
            "languages": switch(lesson.html_name),
            "lesson": cards[i],
            "lessons": cards,
            "prev": cards[i - 1] if i else None,
            "next": cards[i + 1] if i + 1 < len(cards) else None,
            "toc_marker": TOC_MARKER,
        }
        body, _ = exporter.from_notebook_node(nb, resources={"site": site})
        body = make_accessible(body, nb, words)
        sections = search.outline(body)
        body = body.replace(TOC_MARKER, toc_html(sections, words["toc_empty"]), 1)
        (out / lesson.html_name).write_text(body, encoding="utf-8")
        found += search.entries(sections, lesson.html_name, lesson.title)
        log(f"  {folder}{lesson.html_name}  ({time.perf_counter() - start:.1f} s)")

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, keep_trailing_newline=True
    )
    if guide is not None:
        page = env.get_template("guide.html.j2").render(
            title=words["site_title"],
            html_lang=html_lang,
            ui=words,
            static=static,
            languages=[s for s in switch(guides.PAGE) if s["lang"] in guide_langs(guide_codes)],
            guide=guide,
            footer_html=words["footer_guide_html"].replace(
                "{file}", f"<code>{html.escape(guide.source.name)}</code>"
            ),
        )
        (out / guides.PAGE).write_text(page, encoding="utf-8")
        found += search.entries(search.outline(page), guides.PAGE, guide.title)
        log(f"  {folder}{guides.PAGE}  ({guide.source.name})")

    search_index = f"{STATIC}/search-index{folder and '-' + code}.js"
    search.write_index(site_dir / search_index, found)
    index = env.get_template("home.html.j2").render(
        title=words["site_title"],
        html_lang=html_lang,
        ui=words,
        static=static,
        search_index=up + search_index,
        languages=switch("index.html"),
        lessons=cards,
        archive=up + ARCHIVE,
        guide=guides.PAGE if guide is not None else None,
    )
    (out / "index.html").write_text(index, encoding="utf-8")


def guide_langs(codes: frozenset[str]) -> set[str]:
    """The ``<html lang>`` of each language in ``codes``."""
    return {conventions.lesson_words(code)["html_lang"] for code in codes}
