"""Translated notebooks: the English ones plus a catalog each -> ``notebooks/<lang>``.

A catalog, ``translations/<lang>/<stem>.json``, maps a cell id to ``{"en_sha256", "text"}``:
a markdown cell's translation, or a code cell's whole source with only its ``#`` comments
and its docstrings (module, class, function) translated. The hash of the English source
makes an entry stale when the English changes: the built notebook then shows the English
text and ``check`` fails. Code, outputs and metadata are always the English notebook's.

    python -m tools.authoring.i18n build | check
    python -m tools.authoring.i18n todo [01] [--json]       # what to (re)translate
    python -m tools.authoring.i18n import 01 t.json         # record {cell id: translation}
    python -m tools.authoring.i18n set 01 a2f572ae cell.md  # record one cell ('-': stdin)
    python -m tools.authoring.i18n prune 01                 # drop entries of cells now gone
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import inspect
import json
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from pathlib import Path

import html5lib
import nbformat

from tools import lessons
from tools.lessons import LessonError, lesson_notebooks
from tools.owned import is_regular, remove, within

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = ROOT / "notebooks"
TRANSLATIONS_DIR = ROOT / "translations"
DEFAULT_LANG = "zh"
Notebook = nbformat.NotebookNode


class I18nError(RuntimeError):
    """Bad input from a translator or a broken file; the message says what to do."""


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]  # enough to notice an edit


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def translated_path(english: Path, lang: str = DEFAULT_LANG) -> Path:
    return english.parent / lang / english.name


def catalog_path(english: Path, lang: str = DEFAULT_LANG, root: Path = TRANSLATIONS_DIR) -> Path:
    return root / lang / f"{english.stem}.json"


def resolve_notebook(name: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    """``01``, ``01_tensors``, ``01_tensors.ipynb`` or a path -> the English notebook."""
    stem, known = Path(name).name.removesuffix(".ipynb"), lesson_notebooks(notebooks_dir)
    found = [p for p in known if p.stem == stem] or [p for p in known if p.stem.startswith(stem)]
    if len(found) != 1:
        what = "matches several" if found else "matches none"
        names = ", ".join(p.stem for p in known)
        raise I18nError(f"notebook {name!r} {what} of the notebooks in {notebooks_dir}: {names}")
    return found[0]


def load_notebook(path: Path) -> Notebook:
    """``path`` as a notebook, or an I18nError in one line (build_site reads with it too)."""
    try:
        return lessons.read_notebook(path)  # the tools' one reader
    except LessonError as exc:
        raise I18nError(str(exc)) from None


def read_notebook(path: Path) -> Notebook:
    """A notebook whose cells have ids: the catalogs are keyed by them."""
    nb = load_notebook(path)
    if any("id" not in cell for cell in nb.cells):
        raise I18nError(
            f"{_shown(path)} has cells without ids (nbformat {nb.nbformat}.{nb.nbformat_minor}); "
            "the catalog is keyed by cell id: open and save it in JupyterLab, which adds them"
        )
    return nb


@dataclass
class Entry:
    text: str
    en_hash: str


@dataclass
class Catalog:
    """One notebook's translations: cell id -> :class:`Entry`."""

    path: Path  # <root>/<lang>/<stem>.json
    entries: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, english: Path, lang: str = DEFAULT_LANG, root: Path = TRANSLATIONS_DIR):
        path, entries = catalog_path(english, lang, root), {}
        try:
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"] if path.exists() else {}
            if not isinstance(cells, dict):
                raise TypeError(f"'cells' is a {type(cells).__name__}, not {{cell id: entry}}")
            for cell_id, item in cells.items():
                if extra := sorted(set(item) - {"text", "en_sha256"}):  # outputs, metadata...
                    raise TypeError(
                        f"cell {cell_id}: fields {', '.join(extra)}: an entry holds "
                        "en_sha256 and text only"
                    )
                entries[cell_id] = Entry("".join(item["text"]), str(item["en_sha256"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"no field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            raise I18nError(
                f"{_shown(path)} is not a valid catalog ({reason}): fix it, or restore it with git"
            ) from exc
        return cls(path, entries)

    def save(self, order: list[str]) -> None:
        """Entries in the notebook's cell order (stable diffs), as lines like an .ipynb."""
        ids = [i for i in order if i in self.entries] + sorted(set(self.entries) - set(order))
        cells = {
            i: {"en_sha256": self.entries[i].en_hash, "text": self.entries[i].text.splitlines(True)}
            for i in ids
        }
        name, lang = f"{self.path.stem}.ipynb", self.path.parent.name  # catalog_path's parts
        data = {"notebook": name, "language": lang, "cells": cells}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", "utf-8")


def translatable_cells(nb: Notebook) -> dict[str, str]:
    """Cell id -> source of each markdown cell and each code cell with words in a comment."""
    return {
        c.id: c.source
        for c in nb.cells
        if c.cell_type == "markdown" or (c.cell_type == "code" and has_words(c.source))
    }


# --- markdown: what a translation must keep, and may not add ---------------------------------

_FENCE = re.compile(r"^([ \t]*)(```+|~~~+)([^\n]*)\n(.*?)^[ \t]*\2[ \t]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*?\$", re.S)
_URL = re.compile(r"\]\(\s*([^)\s]+)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_BARE_URL = re.compile(r"\b(?:https?|ftp|javascript|data):[^\s)>\]]*", re.I)
_HEADING = re.compile(r"^(#{1,6})\s", re.M)
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"  # Chinese characters and punctuation
_HAS_CJK = re.compile(f"[{_CJK}]")
# A line that starts a new Markdown block (so the break before it is not a soft break).
_BLOCK_START = re.compile(r"\s*(?:$|[-*+]\s|\d+[.)]\s|#|\||>|```|~~~|\$\$|<)")
MAX_SENTENCE = 80  # characters of a Chinese sentence; code, a formula, a link count as one
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


def formulas(markdown: str) -> list[str]:
    """The formulas (``$...$``, ``$$...$$``) of a markdown text, outside code blocks and spans."""
    return _MATH.findall(_CODE_SPAN.sub(" ", _FENCE.sub("", markdown)))


def damage(english: str, translation: str) -> list[str]:
    """What a markdown translation lost (code, spans, formulas, link targets, heading levels)
    or added (what the page would render), then its :func:`style` problems. In-page anchors
    follow the heading text: the site's link check has them."""

    def code(text: str) -> list[list[str]]:  # code blocks without their comments
        return [
            [line[: _comment_start(line, shell=True)[0]].rstrip() for line in m[4].splitlines()]
            for m in _FENCE.finditer(text)
        ]

    problems = []
    if code(english) != code(translation):
        problems.append(
            "a code block changed (translate only its # comments; keep every line of code "
            "and the number of code blocks)"
        )
    texts = (_FENCE.sub("", english), _FENCE.sub("", translation))
    for name, pattern in (("code span", _CODE_SPAN), ("formula", _MATH), ("link target", _URL)):
        en, tr = (
            Counter(m[1 if pattern is _URL else 0] for m in pattern.finditer(t)) for t in texts
        )
        problems += [
            f"{name} {item} is missing (keep code, math and links as they are)"
            for item, count in en.items()
            if tr[item] < count and not item.startswith("#")
        ]
    problems += _untranslated(  # the comments of its code blocks
        [
            line[start:].lstrip("#").strip()
            for m in _FENCE.finditer(translation)
            for line in m[4].splitlines()
            if (start := _comment_start(line, shell=True)[0]) is not None
        ]
    )
    problems += rendered_markup(english, translation)
    levels = [[len(h) for h in _HEADING.findall(t)] for t in (english, translation)]
    if levels[0] != levels[1]:
        problems.append(
            f"heading levels {levels[0]} became {levels[1]} (the contents list follows them)"
        )
    return problems + style(translation)


def _markup(html: str) -> list[tuple[str, ...]]:
    """Every element ``(tag,)`` and attribute ``(tag, name, value)`` a browser builds from
    ``html``: html5lib follows the HTML standard's parser (``<!-->`` ends a comment, so does
    ``--!>``; ``<![CDATA[`` ends at the first ``>``), with scripting on as in a browser."""
    parser = html5lib.HTMLParser(tree=html5lib.getTreeBuilder("etree"), namespaceHTMLElements=False)
    found: list[tuple[str, ...]] = []
    for element in parser.parseFragment(html, scripting=True).iter():
        if not isinstance(element.tag, str) or element.tag == "DOCUMENT_FRAGMENT":
            continue  # a comment (its tag is a function): inert
        found.append((element.tag,))
        for name, value in element.attrib.items():
            name = name if isinstance(name, str) else ":".join(filter(None, name))
            if (element.tag in _HEADINGS and name == "id") or name in ("alt", "title"):
                value = ""  # follows the translated words; inert
            elif element.tag == "a" and name == "href" and value.startswith("#"):
                value = "#"  # a link inside the page
            found.append((element.tag, name, value))
    return found


def rendered_markup(english: str, translation: str) -> list[str]:
    """What ``translation``, rendered as the site renders it, puts on the page that neither
    plain Markdown (its elements, a heading's id, a link inside the page) nor the rendered
    ``english`` does: the page would show, run or load it."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune  # slow to import

    plain = "p a em strong code pre ul ol li blockquote hr br del table thead tbody tr th td"
    allowed = {(t,) for t in (*plain.split(), *_HEADINGS)} | {(h, "id", "") for h in _HEADINGS}
    allowed |= {("a", "href", "#"), ("a", "class", "anchor-link")}
    allowed |= set(_markup(markdown2html_mistune(english)))
    problems = []
    for item in dict.fromkeys(_markup(markdown2html_mistune(translation))):
        if item not in allowed:
            tag, name, value = (*item, "", "")[:3]
            what = f'markup <{tag} {name}="{value}">' if name else f"markup <{tag}>"
            what = f"address {value}" if name in ("href", "src") else what
            problems.append(
                f"{what} on the page that the English cell does not render (the site would "
                "show, run or load it: keep the English markup and links)"
            )
    return problems


def sentences(text: str) -> list[str]:
    """Chinese markdown's sentences as a reader counts them: no code blocks; code, a formula
    or a link is one character; a sentence ends at 。！？； or a line end, a table cell at |."""
    text = _FENCE.sub("", text)
    for pattern in (_CODE_SPAN, _MATH, _LINK):
        text = pattern.sub("□", text)
    cells = (cell for piece in re.split(r"[。！？；\n]", text) for cell in piece.split("|"))
    cells = (re.sub(r"^\s*(?:#+|[-*+]|\d+[.)]|>)\s+", "", c).replace("**", "") for c in cells)
    return [cell.strip() for cell in cells if cell.strip()]


def soft_breaks(text: str) -> list[str]:
    """Line breaks inside a paragraph of Chinese text, each as ``'…⏎…'``: Markdown joins the
    lines with a space, which shows. A new block or a hard break is no soft break."""
    lines = _FENCE.sub("", re.sub(r"\$\$.+?\$\$", "$$", text, flags=re.S)).split("\n")
    return [
        f"{line.strip()[-8:]}⏎{after.strip()[:8]}"
        for line, after in pairwise(lines)
        if line.strip()
        and not line.lstrip().startswith(("#", "|"))  # a heading, a table row
        and not _BLOCK_START.match(after)
        and not line.endswith(("  ", "\\"))
        and (_HAS_CJK.search(line) or _HAS_CJK.search(after))
    ]


def style(text: str, breaks: bool = True) -> list[str]:
    """How Chinese text falls short of the glossary's style rules: soft line breaks (if
    ``breaks``: not in comments, one a line), long sentences, two colons, nested brackets."""
    problems = [
        f"line break in '{where}' shows as a space in the browser: write each Chinese "
        "paragraph or list item on one line"
        for where in (soft_breaks(text) if breaks else [])
    ]
    for sentence in filter(_HAS_CJK.search, sentences(text)):
        start = f"'{sentence[:20]}…'"
        if len(sentence) > MAX_SENTENCE:
            problems.append(
                f"sentence of {len(sentence)} characters (at most {MAX_SENTENCE}): split {start}"
            )
        if sentence.count("：") > 1:
            problems.append(f"two colons in one sentence: split {start}")
        if max(accumulate((c in "（(") - (c in "）)") for c in sentence), default=0) > 1:
            problems.append(f"brackets inside brackets: rephrase {start}")
    return problems


# --- code cells: only their comments and docstrings are translated --------------------------

CODE_WIDTH = 100  # ruff's line-length (pyproject.toml); ruff counts a Chinese character as two
# What a cell magic's body is written in (its comments are translated); any other magic's body
# is all code (%%html, %%writefile notes.md). A %%writefile body goes by the file's suffix.
_MAGIC_BODY = dict.fromkeys(["time", "timeit", "capture", "prun", "debug", ".py"], "python")
_MAGIC_BODY |= dict.fromkeys(["bash", "sh", "script", "system", ".sh"], "shell")
# Comments that tools read (ruff, mypy, nbval): kept byte for byte, on the same line of code.
_DIRECTIVE = re.compile(
    r"#\s*(?:noqa\b(?::\s*[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)?|type:\s*ignore\b(?:\[[^\]]*\])?"
    r"|fmt:\s*(?:skip|off|on)\b|isort:\s*\w+|pragma:?\s*no\s*cover\b|NBVAL_[A-Z_]+)"
)
# Half-width punctuation touching Chinese text (Chinese sentences take ，；：？！（）).
# Three English words in a row (two letters or more each: not ``N x 6 x 14``, a shape) in a
# comment with no Chinese at all: a comment left untranslated.
_ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ \t]+[A-Za-z]{2,}){2,}")


def english_left(text: str) -> bool:
    """Whether ``text`` (a translated comment or docstring) still reads as English."""
    text = _CODE_SPAN.sub("□", text)
    return not _HAS_CJK.search(text) and _ENGLISH_RUN.search(text) is not None


def _untranslated(texts: list[str]) -> list[str]:
    return [
        f"{text!r} is still English: translate the comment (an identifier or a shape may stay)"
        for text in texts
        if english_left(text)
    ]


_HALF_WIDTH = re.compile(f"[{_CJK}][,;:?!)]|[,;:?!]\\s*[{_CJK}]|\\([{_CJK}]")


@dataclass(frozen=True)
class Comment:
    line: int  # 0-based line of the cell's source
    column: int
    text: str  # from ``#`` to the line's end

    @property
    def words(self) -> str:
        """What a reader reads: no ``#``, no tool directives (``# noqa: F401 -- why``)."""
        return _DIRECTIVE.sub("", self.text).strip().lstrip("#").strip().removeprefix("-- ")


def _comment_start(line: str, quote: str = "", shell: bool = False) -> tuple[int | None, str]:
    """Where a comment starts in ``line`` (None: nowhere), and the string still open at its
    end (``quote``: the one open at its start). Python: a ``#`` outside strings. Shell (shell
    commands, line magics, markdown code blocks): a ``#`` at the start or after a space,
    outside quotes, which have no escapes and end with the line."""
    i = 0
    while i < len(line):
        if quote and line[i] == "\\" and not shell:
            i += 2
        elif quote and line.startswith(quote, i):
            i, quote = i + len(quote), ""
        elif not quote and line[i] == "#" and (not shell or i == 0 or line[i - 1].isspace()):
            return i, ""
        elif not quote and line[i] in "'\"":
            quote = line[i] * 3 if not shell and line.startswith(line[i] * 3, i) else line[i]
            i += len(quote)
        else:
            i += 1
    return None, quote if not shell and (len(quote) == 3 or line.endswith("\\")) else ""


def _cell_body(source: str) -> tuple[list[str], str | None]:
    """A code cell's lines, a cell magic's own line blanked, and what they are written in:
    "python", "shell" (a ``%%bash`` body), or None (another cell magic's body: all code)."""
    lines, body = source.split("\n"), "python"
    if lines[0].lstrip().startswith("%%"):
        name, _, args = lines[0].strip()[2:].partition(" ")
        if name in ("writefile", "file"):
            name = Path((args.split() or [""])[-1]).suffix
        body = _MAGIC_BODY.get(name)
        lines[0] = ""  # the magic itself
    return lines, body


def comments(source: str) -> list[Comment]:
    """Every ``#`` comment of a code cell as IPython reads it: Python outside strings;
    ``!cmd`` and ``%magic`` lines and a ``%%bash`` body as shell; a ``%%time`` or
    ``%%writefile x.py`` body as Python; another cell magic's body has none."""
    (lines, body), quote, found = _cell_body(source), "", []
    for n, line in enumerate(lines if body else []):
        if body == "shell" or (not quote and line.lstrip().startswith(("%", "!"))):
            column = _comment_start(line, shell=True)[0]
        else:
            column, quote = _comment_start(line, quote)
        if column is not None:
            found.append(Comment(n, column, line[column:]))
    return found


@dataclass(frozen=True)
class Docstring:
    start: tuple[int, int]  # 0-based line and column (characters) where the literal begins
    end: tuple[int, int]  # and where it ends (exclusive)
    text: str  # what help() shows: its value, indentation removed (inspect.cleandoc)


DOCSTRING = '"""docstring"""'  # what stands for any docstring when code is compared


def _python_view(source: str) -> str | None:
    """``source`` as plain Python line for line (IPython's own translation of ``!cmd``,
    ``x = !cmd``, ``%magic``; a ``%%time`` or ``%%writefile x.py`` body with the magic's line
    blank), or None: another cell magic's body, or a translation that joined lines."""
    from IPython.core.inputtransformer2 import TransformerManager

    lines, body = _cell_body(source)
    if body != "python":
        return None
    python = "\n".join(lines)
    blank = next((n for n, line in enumerate(lines) if line.strip()), len(lines))
    try:  # IPython drops leading blank lines: keep them, so that line numbers stay
        view = "\n" * blank + TransformerManager().transform_cell("\n".join(lines[blank:]))
    except SyntaxError:  # IPython's tokenizer gave up (an unclosed bracket): no docstrings
        return None
    view = view[:-1] if view.endswith("\n") and not python.endswith("\n") else view
    return view if view.count("\n") == python.count("\n") else None


def docstrings(source: str) -> list[Docstring]:
    """The module, class and function docstrings of a code cell, found by Python's parser
    (``ast``), in order; none where the cell is not Python that parses."""
    view = _python_view(source)
    try:
        tree = ast.parse(view) if view is not None else None
    except (SyntaxError, ValueError):  # ValueError: a NUL character
        tree = None
    if tree is None:
        return []
    lines, found = view.split("\n"), []

    def column(line: int, byte: int) -> int:  # ast counts UTF-8 bytes, Python characters
        return len(lines[line].encode("utf-8")[:byte].decode("utf-8"))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0] if node.body else None
        if not (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            continue
        literal = first.value
        start, end = literal.lineno - 1, (literal.end_lineno or literal.lineno) - 1
        found.append(
            Docstring(
                (start, column(start, literal.col_offset)),
                (end, column(end, literal.end_col_offset or 0)),
                inspect.cleandoc(literal.value),
            )
        )
    source_lines = source.split("\n")  # IPython rewrote only lines with its own syntax
    if any(
        lines[d.start[0] : d.end[0] + 1] != source_lines[d.start[0] : d.end[0] + 1] for d in found
    ):
        return []
    return sorted(found, key=lambda d: d.start)


def without_docstrings(source: str) -> str:
    """``source`` with each docstring replaced by :data:`DOCSTRING` on one line: the code a
    translation must keep, whatever its docstrings say and however many lines they take."""
    lines = source.split("\n")
    for doc in reversed(docstrings(source)):
        (first, begin), (last, end) = doc.start, doc.end
        lines[first : last + 1] = [lines[first][:begin] + DOCSTRING + lines[last][end:]]
    return "\n".join(lines)


def code_parts(source: str) -> tuple[list[str], list[tuple[int, str]]]:
    """What a translation keeps of a code cell: its lines without comments (a comment-only
    line left out) and with each docstring as :data:`DOCSTRING`, and its directives as
    (index of their line of code, directive)."""
    source = without_docstrings(source)
    at = {c.line: c for c in comments(source)}
    code: list[str] = []
    directives = []
    for n, line in enumerate(source.split("\n")):
        comment = at.get(n)
        kept = line[: comment.column].rstrip() if comment else line
        if comment is None or kept.strip():
            code.append(kept)
        if comment:  # a comment on its own line belongs to the next line of code
            where = len(code) - 1 if kept.strip() else len(code)
            directives += [(where, d[0]) for d in _DIRECTIVE.finditer(comment.text)]
    return code, directives


def has_words(source: str) -> bool:
    """Whether a code cell has a comment (not only tool directives) or a docstring to
    translate."""
    texts = [c.words for c in comments(source)] + [d.text for d in docstrings(source)]
    return any(re.search(r"[^\W\d_]", text) for text in texts)


def code_prose(source: str) -> str:
    """A code cell's comments as read, one a line, then its docstrings: where terms and
    style are checked."""
    texts = [c.words for c in comments(source)] + [d.text for d in docstrings(source)]
    return "\n".join(text for text in texts if text)


def width(line: str) -> int:
    """Columns ``line`` takes in an editor, and for ruff: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def code_damage(english: str, translation: str) -> list[str]:
    """How a code cell's translation changed more than its comments and docstrings (a
    comment on its own line may be split or joined, a docstring take more or fewer lines),
    lost a directive, passed ruff's width (ruff would re-wrap the code), or broke the style
    rules of the markdown."""
    (en_code, en_directives), (tr_code, tr_directives) = map(code_parts, (english, translation))
    problems = []
    if en_code != tr_code:
        pairs = [(a.strip(), b.strip()) for a, b in zip(en_code, tr_code, strict=False) if a != b]
        line = f"{pairs[0][0]!r} became {pairs[0][1]!r}" if pairs else ""
        line = line or f"{len(en_code)} lines of code became {len(tr_code)}"
        problems.append(
            "the code changed (translate only its # comments and docstrings; keep every "
            f"line of code): {line}"
        )
    if en_directives != tr_directives:
        problems.append(
            f"directives {[d for _, d in en_directives]} must stay as they are, on their line "
            f"(found {[d for _, d in tr_directives]})"
        )
    english_lines = set(english.split("\n"))  # a long line the English has is ruff's business
    problems += [
        f"line {n + 1} is {width(line)} columns wide (at most {CODE_WIDTH}; a Chinese "
        "character takes two): shorten its comment"
        for n, line in enumerate(translation.split("\n"))
        if width(line) > CODE_WIDTH and line not in english_lines
    ]
    texts = [c.words for c in comments(translation)] + [d.text for d in docstrings(translation)]
    problems += _untranslated(texts)
    for text in texts:
        if bad := _HALF_WIDTH.search(_CODE_SPAN.sub("□", text)):
            problems.append(
                f"half-width punctuation {bad[0]!r} in {text!r}: Chinese text "
                "takes full-width ，；：？！（）"
            )
    return problems + style(code_prose(translation), breaks=False)


# --- the glossary's settled terms -------------------------------------------------------------

TERMS_HEADING = "## 统一写法"  # the glossary section whose table `check` enforces


@dataclass(frozen=True)
class Term:
    english: str
    written: str  # the form used throughout
    first_use: str  # how its first use in each lesson reads ("" if no rule)
    avoid: tuple[str, ...]  # renderings the check refuses


def load_terms(glossary: Path) -> list[Term]:
    """The table under ``## 统一写法``: English | 写作 | 每课首次出现 | 不要写."""
    try:
        section = glossary.read_text(encoding="utf-8").partition(TERMS_HEADING)[2]
    except OSError as exc:
        raise I18nError(f"cannot read the glossary {_shown(glossary)}: {exc}") from exc
    terms = []
    for line in section.split("\n## ")[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.lstrip().startswith("|") or cells[0] == "English":
            continue
        if set(cells[0]) <= set("-: "):  # the table's rule
            continue
        english, written, first, avoid = (c.strip("`") if c not in ("", "—") else "" for c in cells)
        if not written or (first and written not in first):
            raise I18nError(
                f"{_shown(glossary)}: term {english!r}: the first use {first!r} must contain "
                f"the written form {written!r}"
            )
        avoided = tuple(a.strip() for a in avoid.split("、") if a.strip())
        terms.append(Term(english, written, first, avoided))
    if not terms:
        raise I18nError(f"{_shown(glossary)} has no table under {TERMS_HEADING!r}")
    return terms


def _find(term: str, text: str) -> int:
    """Where ``term`` occurs in ``text`` (a Latin term only as a whole word), or -1."""
    edge = "(?<![A-Za-z_])" if term[:1].isascii() else ""
    tail = "(?![A-Za-z_])" if term[-1:].isascii() else ""
    found = re.search(edge + re.escape(term) + tail, text)
    return found.start() if found else -1


def term_problems(cells: dict[str, str], terms: list[Term]) -> list[str]:
    """Settled terms written otherwise, or first used without their first-use form, in one
    lesson's translated text (cell id -> text, in the lesson's order)."""
    prose = {}  # what a reader reads as words: code blocks only by their comments, no URLs
    for cell_id, text in cells.items():
        text = _FENCE.sub(lambda m: "\n".join(re.findall(r"(?:^|\s)#\s*([^\n]*)", m[4])), text)
        text = _LINK.sub(lambda m: m[1], _CODE_SPAN.sub(" ", text))
        prose[cell_id] = _BARE_URL.sub(" ", _MATH.sub(" ", text))
    cleared = dict(prose)  # a first-use form may hold an avoided word: 标准化（常称归一化）
    for first in (t.first_use for t in terms if t.first_use):
        cleared = {cell_id: text.replace(first, "") for cell_id, text in cleared.items()}
    problems = []
    for term in terms:
        how = f"the glossary writes {term.english!r} as {term.written!r}" + (
            f" (first use in a lesson: {term.first_use!r})" if term.first_use else ""
        )
        problems += [
            f"cell {cell_id}: {bad!r}: {how}"
            for cell_id, text in cleared.items()
            for bad in term.avoid
            if _find(bad, text) >= 0
        ]
        uses = ((i, at) for i, t in prose.items() if (at := _find(term.written, t)) >= 0)
        for cell_id, at in uses if term.first_use else ():  # the lesson's first use only
            first = prose[cell_id].find(term.first_use)
            if not (0 <= first <= at < first + len(term.first_use)):
                problems.append(
                    f"cell {cell_id}: first use of {term.written!r} in this lesson must read "
                    f"{term.first_use!r}"
                )
            break
    return problems


# --- a notebook against its catalog ------------------------------------------------------------


@dataclass
class Status:
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    damaged: dict[str, list[str]] = field(default_factory=dict)
    current: int = 0
    code_cells: int = 0  # of the cells to translate, code cells (comments, docstrings)
    code_current: int = 0  # of ``current``, code cells


def status(nb: Notebook, catalog: Catalog) -> Status:
    """Each cell to translate as missing, stale or current (then checked for damage)."""
    result = Status()
    sources = translatable_cells(nb)
    code_ids = {c.id for c in nb.cells if c.cell_type == "code"}
    for cell_id, source in sources.items():
        is_code = cell_id in code_ids
        result.code_cells += is_code
        entry = catalog.entries.get(cell_id)
        if entry is None:
            result.missing.append(cell_id)
        elif entry.en_hash != source_hash(source):
            result.stale.append(cell_id)
        else:
            result.current += 1
            result.code_current += is_code
            if problems := (code_damage if is_code else damage)(source, entry.text):
                result.damaged[cell_id] = problems
    result.orphans = [i for i in catalog.entries if i not in sources]
    return result


def refused(nb: Notebook, catalog: Catalog, state: Status | None = None) -> list[str]:
    """What in ``catalog`` no build may place, one line each (``check`` lists the same):
    every current entry that :func:`damage` or :func:`code_damage` finds fault with, a
    script or an off-site load the page would run included. ``state``: ``status``'s, if known."""
    state = status(nb, catalog) if state is None else state
    return [f"cell {i}: {p}" for i, lost in state.damaged.items() for p in lost]


def check_lines(nb: Notebook, lang: str) -> Notebook:
    """``nb`` with each stored exercise-check line (right, or not done yet) as the checks
    print it in ``lang``: the same messages, from utils.exercises. nbval compares only the
    mark and the number (tests/nbval_sanitize.cfg); a line with a hint is left as stored."""
    from utils import exercises  # imports torch: only when a translation is written

    if lang not in exercises.LANGUAGES:
        return nb
    said: dict[str, str] = {}  # the English line -> the same line in lang
    asked: set[int] = set()  # the exercise numbers whose lines are in ``said``

    def localized(line: str) -> str:
        for n in map(int, re.findall(r"\d+", line)[:1]):  # the exercise's number comes first
            if n in asked:
                continue
            asked.add(n)
            sample = exercises.Exercise(n, lambda *answers: None)
            for answer in (None, ...):  # right, not done yet
                english, translated = (sample.outcome(answer, lang=x)[1] for x in ("en", lang))
                said[english] = translated
        return said.get(line, line)

    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "stream" and isinstance(output.get("text"), str):
                output.text = "".join(
                    localized(line.rstrip("\n")) + "\n" * line.endswith("\n")
                    for line in output.text.splitlines(True)
                )
    return nb


def translate(nb: Notebook, catalog: Catalog) -> Notebook:
    """A copy of ``nb`` with each current translation in place: a code cell's only when its
    code is the English code (a catalog never changes what runs); a missing or stale one
    keeps the English, never text about code that has since changed. The exercise checks'
    stored lines speak the catalog's language (:func:`check_lines`). A catalog with an entry
    :func:`refused` names is refused whole (``I18nError``): the build writes what ``check``
    passes, never a page with a translator's script on it."""
    if problems := refused(nb, catalog):
        raise I18nError(
            f"{_shown(catalog.path)}: nothing built, the translation is refused:\n  "
            + "\n  ".join(problems)
            + "\n(fix the entries with `python -m tools.authoring.i18n set`, then build again)"
        )
    out = copy.deepcopy(nb)
    for cell in out.cells:
        entry = catalog.entries.get(cell.get("id", ""))
        if not entry or entry.en_hash != source_hash(cell.source):
            continue
        if cell.cell_type == "markdown" or (
            cell.cell_type == "code" and code_parts(cell.source) == code_parts(entry.text)
        ):
            cell.source = entry.text
    return check_lines(out, catalog.path.parent.name)


def html_differences(english: Notebook, translated: Notebook) -> list[str]:
    """Cells whose ``text/html`` outputs are not the English ones: HTML runs on the site, and
    only the English notebook is reviewed."""

    def html(cell: Notebook) -> list:
        return [o.get("data", {}).get("text/html") for o in cell.get("outputs", [])]

    en = {c.get("id", ""): html(c) for c in english.cells}
    return [
        f"cell {c.get('id', '')}: a text/html output differs from the English notebook's (a "
        "translation never carries outputs of its own: `make translations`)"
        for c in translated.cells
        if c.cell_type == "code" and any(html(c)) and html(c) != en.get(c.get("id", ""))
    ]


def notebook_text(nb: Notebook) -> str:
    """How ``build`` writes a notebook (nbformat's own layout, as Jupyter saves it)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


# --- commands ------------------------------------------------------------------------------

# `build` writes notebooks/<lang>/<lesson>.ipynb for each lesson, and overwrites or deletes only
# those names there: a lesson's, or one whose English lesson is gone while its catalog
# (translations/<lang>/<stem>.json) is still there. Never a link, nothing reached through one,
# never outside notebooks/ (tools/owned.py). It keeps no list of what it wrote: a list anyone
# can edit would decide what it deletes.
KEPT = (
    "kept {}: not a translation of a lesson here (`python -m tools.authoring.i18n build` "
    "overwrites and deletes only those, never through a link)"
)


def _own(english: Path, lang: str) -> Path | None:
    """Where ``build`` writes ``english``'s translation, if it may: a regular file or nothing
    yet at notebooks/<lang>/<name>, reached through no link."""
    path = within(english.parent, f"{lang}/{english.name}")
    return path if path is not None and (is_regular(path) or not path.exists()) else None


def write_translation(english: Path, lang: str, text: str) -> bool:
    """Write ``text`` as ``english``'s translation unless :func:`_own` refuses the place;
    whether the translation holds ``text`` now."""
    target = _own(english, lang)
    if target is None:
        return False
    if not target.exists() or target.read_text(encoding="utf-8", errors="replace") != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return True


def _open(english: Path, lang: str, root: Path) -> tuple[Notebook, Catalog, Status]:
    """A lesson's English notebook, its catalog and how the two stand."""
    nb, catalog = read_notebook(english), Catalog.load(english, lang, root)
    return nb, catalog, status(nb, catalog)


def build(
    notebooks_dir: Path, lang: str, root: Path, log: Callable[[str], object] = print
) -> list[tuple[Path, Status]]:
    """Write every lesson's translated notebook and remove a translation whose English lesson
    is gone while its catalog is not; ``log`` names in one line the other notebooks there and
    any place it may not write (a link, a path outside ``notebooks_dir``): left alone."""
    done, kept = [], []
    sources = lesson_notebooks(notebooks_dir)
    for english in sources:
        nb, catalog, state = _open(english, lang, root)
        target = translated_path(english, lang)
        if not write_translation(english, lang, notebook_text(translate(nb, catalog))):
            kept.append(target)
        done.append((target, state))
    names, folder = {p.name for p in sources}, within(notebooks_dir, lang)
    if folder is not None and folder.is_dir():
        for path in sorted(folder.glob("*.ipynb")):
            gone = notebooks_dir / path.name  # the English lesson it was written from
            if path.name in names:
                continue
            if (root / lang / f"{gone.stem}.json").is_file() and _own(gone, lang) is not None:
                target = _own(gone, lang)  # a translation whose lesson went: the tool's
                log(
                    f"removed {_shown(target)}: {gone.name} is no lesson in _toc.yml now; list "
                    f"it again and build to get it back from {_shown(root / lang / gone.stem)}.json"
                )
                remove(target)
            else:
                kept.append(path)
    elif (notebooks_dir / lang).is_dir():  # a link, or a path outside notebooks/
        kept += [p for p in sorted((notebooks_dir / lang).glob("*.ipynb")) if p not in kept]
    if kept:
        log(KEPT.format(", ".join(map(_shown, kept))))
    return done


def lesson_prose(nb: Notebook, catalog: Catalog) -> dict[str, str]:
    """One lesson's translated words in order, cell id -> text: each markdown translation and
    each code cell's translated comments and docstrings (an identifier ``rank`` is no use
    of a term)."""
    return {
        c.id: e.text if c.cell_type == "markdown" else code_prose(e.text)
        for c in nb.cells
        if c.cell_type in ("markdown", "code") and (e := catalog.entries.get(c.get("id", "")))
    }


def check(notebooks_dir: Path, lang: str, root: Path) -> list[str]:
    """Every problem that keeps the translation from shipping, one line each."""
    glossary = root / lang / "glossary.md"
    terms = load_terms(glossary) if glossary.exists() else []
    problems = []
    for english in lesson_notebooks(notebooks_dir):
        (nb, catalog, state), target = _open(english, lang, root), translated_path(english, lang)
        stale = "stale (English changed since translated)"
        found = [
            f"{len(ids)} {what}: {' '.join(ids)}"
            for what, ids in (("untranslated", state.missing), (stale, state.stale))
            if ids
        ]
        found += refused(nb, catalog, state)
        if state.orphans:
            found.append(
                f"{_shown(catalog.path)} has entries for cells that no longer exist: "
                f"{' '.join(state.orphans)} (`python -m tools.authoring.i18n prune {english.stem}`)"
            )
        found += term_problems(lesson_prose(nb, catalog), terms)
        if not target.exists():
            found.append(f"{_shown(target)} does not exist (`make translations`)")
        elif html := html_differences(nb, load_notebook(target)):
            found += [f"{_shown(target)}: {p}" for p in html]
        elif not state.damaged and target.read_text(encoding="utf-8") != notebook_text(
            translate(nb, catalog)
        ):
            found.append(
                f"{_shown(target)} is not what `make translations` writes now (edited by hand, "
                "or the English notebook or catalog changed since): `make translations`"
            )
        problems += [f"{english.stem}: {p}" for p in found]
    return problems


def record(
    english: Path, translations: dict[str, str], lang: str, root: Path, allow_identical: bool
) -> Status:
    """Store ``translations`` (cell id -> text) with the current English hashes, all or none."""
    nb = read_notebook(english)
    sources, kinds = translatable_cells(nb), {c.id: c.cell_type for c in nb.cells}
    errors = []
    for cell_id, text in translations.items():
        if cell_id not in sources:
            kind = {
                "code": "is a code cell without comments or docstrings (nothing to translate)",
                None: "no cell",
            }
            why = kind.get(kinds.get(cell_id), "is not a markdown or code cell")
            errors.append(f"{cell_id}: {why} in {english.name} (see `todo {english.stem}`)")
        elif not isinstance(text, str) or not text.strip():
            errors.append(f"{cell_id}: the translation is empty")
        elif text.strip() == sources[cell_id].strip() and not allow_identical:
            errors.append(
                f"{cell_id}: the text is the English text (untranslated?); pass "
                "--allow-identical if this cell really reads the same in both languages"
            )
        else:
            check = code_damage if kinds[cell_id] == "code" else damage
            errors += [f"{cell_id}: {p}" for p in check(sources[cell_id], text)]
    if errors:
        raise I18nError("nothing recorded:\n  " + "\n  ".join(errors))
    catalog = Catalog.load(english, lang, root)
    for cell_id, text in translations.items():  # nbformat stores sources without a final newline
        catalog.entries[cell_id] = Entry(text.rstrip("\n"), source_hash(sources[cell_id]))
    catalog.save([c.id for c in nb.cells])
    target = translated_path(english, lang)
    if not write_translation(english, lang, notebook_text(translate(nb, catalog))):
        raise I18nError(f"recorded in {_shown(catalog.path)}; " + KEPT.format(_shown(target)))
    return status(nb, catalog)


def prune(english: Path, lang: str, root: Path) -> list[str]:
    nb, catalog, state = _open(english, lang, root)
    for cell_id in state.orphans:
        del catalog.entries[cell_id]
    if state.orphans:
        catalog.save([c.id for c in nb.cells])
    return state.orphans


def _summary(name: str, state: Status) -> str:
    total = state.current + len(state.missing) + len(state.stale)
    markdown = f"{state.current - state.code_current}/{total - state.code_cells} markdown cells"
    code = f", {state.code_current}/{state.code_cells} code cells' comments and docstrings"
    counts = f"({len(state.missing)} missing, {len(state.stale)} stale)"
    return f"{name}: {markdown}{code if state.code_cells else ''} translated {counts}"


def _print_todo(english: Path, lang: str, root: Path, as_json: bool) -> None:
    nb, catalog, state = _open(english, lang, root)
    wanted = {c.id: c.source for c in nb.cells if c.id in state.missing + state.stale}
    if as_json:  # the file a translator fills in (replace each value) and gives to `import`
        print(json.dumps(wanted, ensure_ascii=False, indent=1))
        return
    code_ids = {c.id for c in nb.cells if c.cell_type == "code"}
    for cell_id, source in wanted.items():
        why = "missing" if cell_id in state.missing else "stale: the English changed"
        why += "; code: translate only its # comments and docstrings" if cell_id in code_ids else ""
        print(f"===== cell {cell_id} ({why}) =====\n--- English ---\n{source}")
        if cell_id in state.stale:
            print(f"--- old translation (update it) ---\n{catalog.entries[cell_id].text}")
        print()
    print(_summary(english.stem, state))
    if wanted:
        print(
            f"Next: `python -m tools.authoring.i18n todo {english.stem} --json > t.json`, "
            "replace each value by its translation, "
            f"`python -m tools.authoring.i18n import {english.stem} t.json`."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lang", default=DEFAULT_LANG, help="catalog folder (default: zh)")
    for flag, folder in (("--notebooks", NOTEBOOKS_DIR), ("--translations", TRANSLATIONS_DIR)):
        parser.add_argument(flag, type=Path, default=folder, help=argparse.SUPPRESS)  # tests'
    commands = parser.add_subparsers(dest="command", required=True)
    usage = {"build": [], "check": [], "todo": ["notebook?"], "prune": ["notebook"]}
    usage |= {"set": ["notebook", "cell_id", "file"], "import": ["notebook", "file"]}
    for command, positional in usage.items():
        sub = commands.add_parser(command)
        for name in positional:
            sub.add_argument(name.rstrip("?"), nargs="?" if name.endswith("?") else None)
        if command in ("set", "import"):
            sub.add_argument("--allow-identical", action="store_true")
    commands.choices["todo"].add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    lang, root, notebooks = args.lang, args.translations, args.notebooks
    try:
        name = getattr(args, "notebook", None)
        english = resolve_notebook(name, notebooks) if name else None
        if args.command == "build":
            for target, state in build(notebooks, lang, root):
                print(f"{_summary(target.stem, state)} -> {_shown(target)}")
        elif args.command == "check":
            if problems := check(notebooks, lang, root):
                print("\n".join(problems))
                print(
                    f"{len(problems)} problem(s). Translate with "
                    "`python -m tools.authoring.i18n todo NB` and `import` "
                    "(see translations/zh/glossary.md), then `make translations`.",
                    file=sys.stderr,
                )
                return 1
            print(f"all {len(lesson_notebooks(notebooks))} notebooks fully translated ({lang})")
        elif args.command == "todo" and english:
            _print_todo(english, lang, root, args.json)
        elif args.command == "todo":
            for each in lesson_notebooks(notebooks):
                print(_summary(each.stem, _open(each, lang, root)[2]))
        elif args.command == "prune":
            gone = prune(english, lang, root)
            print(f"removed {len(gone)} entries: {' '.join(gone)}" if gone else "nothing to prune")
        else:  # set, import
            if args.command == "set":
                with sys.stdin if args.file == "-" else open(args.file, encoding="utf-8") as file:
                    batch = {args.cell_id: file.read()}
            else:
                try:
                    batch = json.loads(Path(args.file).read_text(encoding="utf-8"))
                except ValueError as exc:
                    raise I18nError(f"{args.file} is not JSON: {exc}") from exc
                if not isinstance(batch, dict):
                    raise I18nError(f"{args.file} must hold one object {{cell id: translation}}")
            state = record(english, batch, lang, root, args.allow_identical)
            print(f"recorded {len(batch)} cell(s). {_summary(english.stem, state)}")
    except (I18nError, LessonError, OSError) as exc:  # LessonError: the table of contents
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
