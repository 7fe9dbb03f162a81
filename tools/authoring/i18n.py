"""Translated notebooks from one source: ``notebooks/*.ipynb`` + a catalog -> ``notebooks/zh``.

The English notebooks are the only source of code and outputs. A translation is a catalog
per notebook, ``translations/<lang>/<stem>.json``, keyed by cell id: each entry holds the
translated text and the hash of the English source it translates, so an English edit makes
the entry *stale* instead of silently wrong. ``build`` writes the translated notebooks
(every cell, id and output copied from the English one; only markdown sources and code
comments replaced); a missing or stale translation shows the English text there until it
is (re)translated, and ``check`` fails until then.

Both kinds of cell have the same entry, ``{"en_sha256": ..., "text": [lines]}``:

- a markdown cell: its translated markdown;
- a code cell with ``#`` comments: its whole source with only the comments translated.
  Any English edit of the cell, code or comment, makes the entry stale. The code with the
  comments taken out (found with :mod:`tokenize`, so a ``#`` inside a string is code; IPython
  magics and ``!`` lines as IPython reads them, see :func:`comments`) must be the English
  code line for line; ``check`` refuses anything else, and ``build`` writes the English
  source instead. A code cell without comments needs no entry.

Usage (``make translations`` runs ``build``)::

    python -m tools.authoring.i18n build                  # write notebooks/zh/*.ipynb
    python -m tools.authoring.i18n check                  # missing / stale / damaged entries,
    exit 1
    python -m tools.authoring.i18n todo 01                # what a translator must (re)translate
    python -m tools.authoring.i18n todo 01 --json > t.json  # the same as {cell id: English source}
    python -m tools.authoring.i18n import 01 t.json       # record {cell id: translation} (a batch)
    python -m tools.authoring.i18n set 01 a2f572ae cell.md  # record one cell ('-': stdin)
    python -m tools.authoring.i18n prune 01               # drop entries whose cell no longer exists

A notebook is named by its stem, its number (``01``) or its path.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import io
import json
import re
import sys
import tokenize
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import nbformat

from tools.lessons import lesson_notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = ROOT / "notebooks"
TRANSLATIONS_DIR = ROOT / "translations"
DEFAULT_LANG = "zh"
HASH_CHARS = 16  # of sha256's hex digest: plenty to notice an edit, short enough to read


class I18nError(RuntimeError):
    """Bad input from a translator or a broken catalog; the message says what to do."""


def source_hash(text: str) -> str:
    """The hash an entry stores of the English markdown it translates."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


def english_notebooks(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The source notebooks: the lessons in ``notebooks/`` (translations live in subfolders)."""
    return lesson_notebooks(notebooks_dir)


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it: short, and what commands take."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def translated_path(english: Path, lang: str = DEFAULT_LANG) -> Path:
    return english.parent / lang / english.name


def catalog_path(english: Path, lang: str = DEFAULT_LANG, root: Path = TRANSLATIONS_DIR) -> Path:
    return root / lang / f"{english.stem}.json"


def resolve_notebook(name: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    """``01``, ``01_tensors``, ``01_tensors.ipynb`` or a path -> the English notebook."""
    stem = Path(name).name.removesuffix(".ipynb")
    found = [p for p in english_notebooks(notebooks_dir) if p.stem == stem]
    found = found or [p for p in english_notebooks(notebooks_dir) if p.stem.startswith(stem)]
    if len(found) != 1:
        known = ", ".join(p.stem for p in english_notebooks(notebooks_dir))
        what = "matches several" if found else "matches none"
        raise I18nError(f"notebook {name!r} {what} of the notebooks in {notebooks_dir}: {known}")
    return found[0]


def load_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook, or an :class:`I18nError` naming the file and what is wrong in
    one line (tools/publishing/build_site.py reads the notebooks with it too)."""
    try:
        return nbformat.read(path, as_version=4)
    except Exception as exc:  # OSError, bad JSON or UTF-8, not a notebook (many kinds)
        # nbformat's "does not appear to be JSON" hides where: json's own error says it
        cause = exc.__cause__ or exc.__context__
        why = cause if isinstance(cause, json.JSONDecodeError) else exc
        reason = (str(why).splitlines() or [type(why).__name__])[0][:160]
        raise I18nError(
            f"{_shown(path)} is not a readable notebook ({reason}): fix it, or restore it with git"
        ) from exc


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """``path`` as a notebook whose cells have ids, or an :class:`I18nError` saying why not."""
    nb = load_notebook(path)
    if nb.cells and any("id" not in cell for cell in nb.cells):
        raise I18nError(
            f"{_shown(path)} has cells without ids (nbformat {nb.nbformat}.{nb.nbformat_minor}); "
            "the catalog is keyed by cell id: open and save it in JupyterLab, which adds them"
        )
    return nb


# --- catalogs ------------------------------------------------------------------------------


@dataclass
class Entry:
    text: str
    en_hash: str


@dataclass
class Catalog:
    """One notebook's translations: cell id -> :class:`Entry`."""

    path: Path
    notebook: str
    lang: str
    entries: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, english: Path, lang: str = DEFAULT_LANG, root: Path = TRANSLATIONS_DIR):
        path = catalog_path(english, lang, root)
        if not path.exists():
            return cls(path, english.name, lang)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            cells = data["cells"]
            if not isinstance(cells, dict):
                raise TypeError(f"'cells' is a {type(cells).__name__}, not {{cell id: entry}}")
            entries = {}
            for cell_id, item in cells.items():
                text, en_hash = item["text"], item["en_sha256"]
                if extra := sorted(set(item) - {"text", "en_sha256"}):  # outputs, metadata...
                    raise TypeError(
                        f"cell {cell_id}: fields {', '.join(extra)}: an entry holds "
                        "en_sha256 and text only"
                    )
                if not (isinstance(text, list) and all(isinstance(t, str) for t in text)):
                    raise TypeError(f"cell {cell_id}: 'text' is not a list of lines")
                if not isinstance(en_hash, str):
                    raise TypeError(f"cell {cell_id}: 'en_sha256' is not a string")
                entries[cell_id] = Entry("".join(text), en_hash)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"no field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            raise I18nError(
                f"{_shown(path)} is not a valid catalog ({reason}): fix it, or restore it with git"
            ) from exc
        return cls(path, english.name, lang, entries)

    def save(self, order: list[str]) -> None:
        """Write the entries in the notebook's cell order (stable diffs), unknown ids last."""
        ids = [i for i in order if i in self.entries] + sorted(set(self.entries) - set(order))
        cells = {
            # Lines, as in .ipynb files: a changed sentence is a one-line diff.
            i: {"en_sha256": self.entries[i].en_hash, "text": self.entries[i].text.splitlines(True)}
            for i in ids
        }
        data = {"notebook": self.notebook, "language": self.lang, "cells": cells}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", "utf-8")


# --- comparing English and translation ------------------------------------------------------


def markdown_cells(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Cell id -> source of every markdown cell."""
    return {c.id: c.source for c in nb.cells if c.cell_type == "markdown"}


def translatable_cells(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Cell id -> source of every cell a catalog translates, in the notebook's order: each
    markdown cell, and each code cell with a comment to translate (see :func:`has_words`)."""
    return {
        c.id: c.source
        for c in nb.cells
        if c.cell_type == "markdown" or (c.cell_type == "code" and has_words(c.source))
    }


def _code_ids(nb: nbformat.NotebookNode) -> set[str]:
    return {c.id for c in nb.cells if c.cell_type == "code"}


_FENCE = re.compile(r"^([ \t]*)(```+|~~~+)([^\n]*)\n(.*?)^[ \t]*\2[ \t]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*?\$", re.S)
_URL = re.compile(r"\]\(\s*([^)\s]+)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_BARE_URL = re.compile(r"\b(?:https?|ftp|javascript|data):[^\s)>\]]*", re.I)
_TAG = re.compile(r"<\s*/?\s*([a-zA-Z][\w:-]*)[^>]*>")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)
# Chinese characters and full-width punctuation (a line break between two of them, or any
# soft break in a Chinese paragraph, shows as a stray space in the browser).
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_HAS_CJK = re.compile(f"[{_CJK}]")
_CJK_BREAK = re.compile(f"([{_CJK}])\n[ \t]*([{_CJK}])")
# A line that starts a new Markdown block (so the break before it is not a soft break).
_BLOCK_START = re.compile(r"\s*(?:$|[-*+]\s|\d+[.)]\s|#|\||>|```|~~~|\$\$|<)")
MAX_SENTENCE = 80  # characters of a Chinese sentence; code, a formula, a link count as one
_SENTENCE_END = re.compile(r"[。！？；\n]")


def _code_lines(code: str) -> list[str]:
    """The lines of a code block without ``#`` comments: what a translation must keep.

    A ``#`` starts a comment at the start of a line or after a space, outside quotes (Python
    and shell alike), so a translator may translate comments and nothing else.
    """
    kept = []
    for line in code.splitlines():
        start = _line_comment_start(line)
        kept.append((line if start is None else line[:start]).rstrip())
    return kept


def _without_code(text: str) -> str:
    """``text`` with fenced code blocks removed: what code spans and prose checks look at."""
    return _FENCE.sub("", text)


def damage(english: str, translation: str) -> list[str]:
    """What a translation lost that must survive it: code, math, link targets, headings.

    Code blocks must keep every line of code (comments may be translated); code spans,
    formulas and link targets must all still be there. Extra code spans are fine (a
    translator may add an identifier); in-page anchors (``#...``) change with the heading
    text, so the site's link check covers them instead. A translation may not add markup
    (HTML tags) or web addresses the English does not have: the site renders it as it is.
    """
    problems = []
    en_fences = [_code_lines(m.group(4)) for m in _FENCE.finditer(english)]
    tr_fences = [_code_lines(m.group(4)) for m in _FENCE.finditer(translation)]
    if en_fences != tr_fences:
        problems.append(
            "a code block changed (translate only its # comments; keep every line of code "
            "and the number of code blocks)"
        )
    en_text, tr_text = _without_code(english), _without_code(translation)
    for name, pattern in (("code span", _CODE_SPAN), ("formula", _MATH)):
        found = Counter(m.group(0) for m in pattern.finditer(tr_text))
        for item, count in Counter(m.group(0) for m in pattern.finditer(en_text)).items():
            if found[item] < count:
                problems.append(f"{name} {item} is missing (keep code and math as they are)")
    links = Counter(u for u in _URL.findall(tr_text))
    for url, count in Counter(u for u in _URL.findall(en_text) if not u.startswith("#")).items():
        if links[url] < count:
            problems.append(f"link target {url} is missing")
    problems += _added_markup(en_text, tr_text) or rendered_markup(english, translation)
    if _HEADING.findall(english) != _HEADING.findall(translation):
        problems.append(
            f"heading levels {[len(h) for h in _HEADING.findall(english)]} became "
            f"{[len(h) for h in _HEADING.findall(translation)]} (the contents list follows them)"
        )
    return problems + style(translation)


def _added_markup(english: str, translation: str) -> list[str]:
    """HTML tags, link targets and web addresses in ``translation`` that ``english`` lacks."""
    en_prose, tr_prose = (_CODE_SPAN.sub("", t) for t in (english, translation))
    problems = []
    en_tags = Counter(t.lower() for t in _TAG.findall(en_prose))
    for tag, count in Counter(t.lower() for t in _TAG.findall(tr_prose)).items():
        if count > en_tags[tag]:
            problems.append(
                f"markup <{tag}> that the English does not have (the site would render it: "
                "write it as `code` or leave it out)"
            )
    en_urls = set(_URL.findall(en_prose)) | set(_BARE_URL.findall(en_prose))
    for url in sorted(set(_URL.findall(tr_prose)) | set(_BARE_URL.findall(tr_prose))):
        if url not in en_urls and not url.startswith("#"):
            problems.append(
                f"address {url} that the English does not have (keep the English links)"
            )
    return problems


# What plain Markdown renders: a translation may add these elements (no attributes). Anything
# else on the page (an element, an attribute, an address) only where the English cell has it.
_MARKDOWN_TAGS = frozenset(
    "p h1 h2 h3 h4 h5 h6 a em strong code pre ul ol li blockquote hr br del "
    "table thead tbody tr th td".split()
)
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())


class _PageMarkup(HTMLParser):
    """Every element and attribute of rendered HTML, attribute values decoded as a browser
    decodes them (``&#x61;`` is ``a``): ``(tag,)`` and ``(tag, name, value)``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, ...]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag,))
        for name, value in attrs:
            if (tag in _HEADINGS and name == "id") or name in ("alt", "title"):
                value = ""  # follows the translated words; inert
            elif tag == "a" and name == "href" and (value or "").startswith("#"):
                value = "#"  # a link inside the page
            self.found.append((tag, name, value or ""))


def _page_markup(markdown: str) -> list[tuple[str, ...]]:
    """What ``markdown`` puts on the page, rendered the way the site and the decks render it
    (nbconvert's mistune renderer)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune  # slow to import

    parser = _PageMarkup()
    parser.feed(markdown2html_mistune(markdown))
    parser.close()
    return parser.found


def rendered_markup(english: str, translation: str) -> list[str]:
    """Elements, attributes and addresses the rendered ``translation`` has and neither plain
    Markdown nor the rendered ``english`` has: the page would run or load them."""
    allowed = set(_page_markup(english)) | {(t,) for t in _MARKDOWN_TAGS}
    allowed |= {("a", "href", "#"), ("a", "class", "anchor-link")}
    allowed |= {(h, "id", "") for h in _HEADINGS}
    problems = []
    for item in dict.fromkeys(_page_markup(translation)):
        if item not in allowed:
            what = f"<{item[0]}>" if len(item) == 1 else f'<{item[0]} {item[1]}="{item[2]}">'
            problems.append(
                f"{what} on the page that the English cell does not render (the site would "
                "show, run or load it: keep the English markup and links)"
            )
    return problems


def sentences(text: str) -> list[str]:
    """The sentences of Chinese markdown as a reader counts them.

    Code blocks are left out; inline code, a formula and a link count as one character
    each; a sentence ends at 。！？； or a line break, a table cell at ``|``; Markdown marks
    (``#``, ``**``, list bullets) are not counted.
    """
    text = _without_code(text)
    for pattern in (_CODE_SPAN, _MATH, _LINK):
        text = pattern.sub("□", text)
    found = []
    for piece in _SENTENCE_END.split(text):
        for cell in piece.split("|"):
            cell = re.sub(r"^\s*(?:#+|[-*+]|\d+[.)]|>)\s+", "", cell).replace("**", "")
            if cell.strip():
                found.append(cell.strip())
    return found


def soft_breaks(text: str) -> list[str]:
    """Line breaks inside a paragraph or list item of Chinese text, each as ``'…⏎…'``.

    Markdown joins such lines with a space, which shows between Chinese characters. A new
    block (list item, heading, table row, quote, code, display math, HTML) or a hard break
    (two trailing spaces or a backslash) is not a soft break.
    """
    text = _FENCE.sub("", re.sub(r"\$\$.+?\$\$", "$$", text, flags=re.S))
    lines = text.split("\n")
    found = []
    for line, after in zip(lines, lines[1:], strict=False):
        one_line_block = line.lstrip().startswith(("#", "|"))  # a heading or a table row
        if not line.strip() or one_line_block or _BLOCK_START.match(after):
            continue
        if line.endswith(("  ", "\\")):
            continue
        if _HAS_CJK.search(line) or _HAS_CJK.search(after):
            found.append(f"{line.strip()[-8:]}⏎{after.strip()[:8]}")
    return found


def style(translation: str) -> list[str]:
    """How a Chinese cell falls short of the glossary's style rules (sentence length, breaks)."""
    problems = [
        f"line break in '{where}' shows as a space in the browser: write each Chinese "
        "paragraph or list item on one line"
        for where in soft_breaks(translation)
    ]
    return problems + sentence_problems(translation)


def sentence_problems(text: str) -> list[str]:
    """Chinese sentences too long, with two colons, or with brackets inside brackets."""
    problems = []
    for sentence in sentences(text):
        if not _HAS_CJK.search(sentence):
            continue
        start = f"'{sentence[:20]}…'"
        if len(sentence) > MAX_SENTENCE:
            problems.append(
                f"sentence of {len(sentence)} characters (at most {MAX_SENTENCE}): split {start}"
            )
        if sentence.count("：") > 1:
            problems.append(f"two colons in one sentence: split {start}")
        depth = deepest = 0
        for char in sentence:
            depth += (char in "（(") - (char in "）)")
            deepest = max(deepest, depth)
        if deepest > 1:
            problems.append(f"brackets inside brackets: rephrase {start}")
    return problems


# --- code cells: only their comments are translated ------------------------------------------

CODE_WIDTH = 100  # ruff's line-length (pyproject.toml); ruff counts a Chinese character as two
# A cell magic's body is Python or shell (its comments are translated) or neither: then all of
# it is code and stays as it is (%%html, %%writefile notes.md, ...).
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}
_SHELL_CELL_MAGICS = {"bash", "sh", "script", "system"}
# Comments that tools read (ruff, mypy, nbval): kept byte for byte, on the same line of code.
_DIRECTIVE = re.compile(
    r"#\s*(?:noqa\b(?::\s*[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*)?|type:\s*ignore\b(?:\[[^\]]*\])?"
    r"|fmt:\s*(?:skip|off|on)\b|isort:\s*\w+|pragma:?\s*no\s*cover\b|NBVAL_[A-Z_]+)"
)
# Half-width punctuation touching Chinese text (Chinese sentences take ，；：？！（）).
_HALF_WIDTH = re.compile(f"[{_CJK}][,;:?!)]|[,;:?!]\\s*[{_CJK}]|\\([{_CJK}]")


@dataclass(frozen=True)
class Comment:
    """One ``#`` comment of a code cell: where it starts and its text (``#`` to line end)."""

    line: int  # 0-based line of the cell's source
    column: int
    text: str

    @property
    def words(self) -> str:
        """What a reader reads: the text without ``#`` and without tool directives."""
        words = _DIRECTIVE.sub("", self.text).strip().lstrip("#").strip()
        return words.removeprefix("-- ")  # what follows a directive: `# noqa: F401 -- why`


def _line_comment_start(line: str) -> int | None:
    """Where a shell-style comment starts in ``line``: a ``#`` at the start or after a space,
    outside quotes (shell commands, line magics, markdown code blocks), or None."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return i
    return None


def _scan_python(source: str) -> tuple[dict[int, int], set[int]]:
    """Comments of Python that :mod:`tokenize` cannot read (IPython syntax such as ``x?``):
    line -> column of each ``#`` outside strings, and the lines that start inside a string."""
    found: dict[int, int] = {}
    in_string: set[int] = set()
    quote, i, line, line_start = "", 0, 0, 0
    while i < len(source):
        char = source[i]
        if char == "\n":
            quote = quote if len(quote) == 3 else ""  # a one-line string ends with its line
            line, line_start = line + 1, i + 1
            if quote:
                in_string.add(line)
            i += 1
        elif quote:
            if char == "\\":
                i += 1 if source[i + 1 : i + 2] in ("", "\n") else 2
            elif source.startswith(quote, i):
                i, quote = i + len(quote), ""
            else:
                i += 1
        elif char == "#":
            found[line] = i - line_start
            end = source.find("\n", i)
            i = len(source) if end < 0 else end
        elif char in "'\"":
            quote = char * 3 if source.startswith(char * 3, i) else char
            i += len(quote)
        else:
            i += 1
    return found, in_string


def _cell_magic_body(first_line: str) -> str | None:
    """``"python"``, ``"shell"`` or None: what the body of a ``%%magic`` cell is written in."""
    name, _, args = first_line.strip()[2:].partition(" ")
    if name in ("writefile", "file"):
        target = (args.split() or [""])[-1]
        return "python" if target.endswith(".py") else "shell" if target.endswith(".sh") else None
    if name in _PYTHON_CELL_MAGICS:
        return "python"
    return "shell" if name in _SHELL_CELL_MAGICS else None


def comments(source: str) -> list[Comment]:
    """Every ``#`` comment of a code cell, found with :mod:`tokenize` so that a ``#`` inside a
    string is never one. IPython lines are read as IPython does: a ``%%writefile x.py`` or
    ``%%time`` body is Python, a ``%%bash`` body and ``!cmd`` / ``%magic`` lines are read as
    shell (a ``#`` after a space, outside quotes); another cell magic's body has no comments.
    Python that :mod:`tokenize` rejects is scanned for ``#`` outside strings instead.
    """
    lines = source.split("\n")
    body = "python"
    if lines[0].lstrip().startswith("%%"):
        body = _cell_magic_body(lines[0])
    starts: dict[int, int] = {}
    _, in_string = _scan_python(source) if body == "python" else ({}, set())
    python = []
    for n, line in enumerate(lines):
        stripped = line.lstrip()
        if n == 0 and stripped.startswith("%%"):
            python.append("")
            continue
        shell = body == "shell" or (
            body == "python" and n not in in_string and stripped.startswith(("%", "!"))
        )
        if shell and (column := _line_comment_start(line)) is not None:
            starts[n] = column
        if body == "python" and not shell:
            python.append(line)
        else:  # a stand-in: keeps the line numbers and the indentation tokenize checks
            python.append(line[: len(line) - len(stripped)] + "pass" if shell else "")
    if body == "python":
        code = "\n".join(python)
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
            starts |= {t.start[0] - 1: t.start[1] for t in tokens if t.type == tokenize.COMMENT}
        except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
            starts |= _scan_python(code)[0]
    return [Comment(n, col, lines[n][col:]) for n, col in sorted(starts.items())]


@dataclass
class CodeParts:
    """A code cell taken apart: the code a translation keeps, and its comments."""

    code: list[str]  # every line without its comment; lines holding only a comment left out
    directives: list[tuple[int, str]]  # (index in code of the line it belongs to, directive)
    comments: list[Comment]


def code_parts(source: str) -> CodeParts:
    found = comments(source)
    at = {c.line: c for c in found}
    code: list[str] = []
    directives = []
    for n, line in enumerate(source.split("\n")):
        comment = at.get(n)
        kept = line[: comment.column].rstrip() if comment else line
        if comment is None or kept.strip():
            code.append(kept)
        if comment:  # a comment on its own line belongs to the next line of code
            where = len(code) - 1 if kept.strip() else len(code)
            directives += [(where, d.group(0)) for d in _DIRECTIVE.finditer(comment.text)]
    return CodeParts(code, directives, found)


def code_without_comments(source: str) -> list[str]:
    """The lines of a code cell without its comments: what its translation must keep."""
    return code_parts(source).code


def has_words(source: str) -> bool:
    """Whether a code cell has a comment to translate (not only tool directives)."""
    return any(re.search(r"[^\W\d_]", c.words) for c in comments(source))


def comment_prose(source: str) -> str:
    """A code cell's comments as a reader reads them, one line each (the glossary's terms
    and the style rules are checked on this)."""
    return "\n".join(c.words for c in comments(source) if c.words)


def width(line: str) -> int:
    """Columns ``line`` takes in an editor, and for ruff: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def same_code(english: str, translation: str) -> bool:
    """Whether ``translation`` is ``english`` with only its comments changed."""
    en, tr = code_parts(english), code_parts(translation)
    return en.code == tr.code and en.directives == tr.directives


def code_damage(english: str, translation: str) -> list[str]:
    """How a code cell's translation falls short: it may change the comments, nothing else.

    The code with the comments taken out must be the English code line for line (a comment
    on its own line may be split or joined; one after code stays on its line); directives
    such as ``# noqa: F401`` stay; no line may pass ruff's width (ruff would re-wrap the
    code to fit a long comment); the comments follow the style rules of the markdown.
    """
    en, tr = code_parts(english), code_parts(translation)
    problems = []
    if en.code != tr.code:
        pairs = zip(en.code, tr.code, strict=False)
        line = next(
            (f"{a.strip()!r} became {b.strip()!r}" for a, b in pairs if a != b),
            f"{len(en.code)} lines of code became {len(tr.code)}",
        )
        problems.append(
            f"the code changed (translate only its # comments; keep every line of code): {line}"
        )
    if en.directives != tr.directives:
        problems.append(
            f"directives {[d for _, d in en.directives]} must stay as they are, on their line "
            f"(found {[d for _, d in tr.directives]})"
        )
    english_lines = set(english.split("\n"))  # a long line the English has is ruff's business
    for n, line in enumerate(translation.split("\n")):
        if width(line) > CODE_WIDTH and line not in english_lines:
            problems.append(
                f"line {n + 1} is {width(line)} columns wide (at most {CODE_WIDTH}; a Chinese "
                "character takes two): shorten its comment"
            )
    for comment in tr.comments:
        plain = _CODE_SPAN.sub("□", comment.words)
        if bad := _HALF_WIDTH.search(plain):
            problems.append(
                f"half-width punctuation {bad.group(0)!r} in {comment.text!r}: Chinese text "
                "takes full-width ，；：？！（）"
            )
    return problems + sentence_problems(comment_prose(translation))


# --- the glossary's settled terms -------------------------------------------------------------

TERMS_HEADING = "## 统一写法"  # the glossary section whose table `check` enforces


@dataclass(frozen=True)
class Term:
    """One row of the glossary's settled terms: how a term is written, and how not."""

    english: str
    written: str  # the Chinese (or kept English) form used throughout
    first_use: str  # how its first use in each lesson reads ("" if no rule)
    avoid: tuple[str, ...]  # renderings the check refuses


def load_terms(glossary: Path) -> list[Term]:
    """The table under ``## 统一写法`` in the glossary: English | 写作 | 每课首次出现 | 不要写."""
    try:
        text = glossary.read_text(encoding="utf-8")
    except OSError as exc:
        raise I18nError(f"cannot read the glossary {_shown(glossary)}: {exc}") from exc
    section = text.partition(TERMS_HEADING)[2].split("\n## ")[0]
    terms = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.lstrip().startswith("|") or set(cells[0]) <= set("-: "):
            continue
        if cells[0] == "English":
            continue
        english, written, first, avoid = (c.strip("`") if c not in ("", "—") else "" for c in cells)
        if not written or (first and written not in first):
            raise I18nError(
                f"{_shown(glossary)}: term {english!r}: the first use {first!r} must contain "
                f"the written form {written!r}"
            )
        terms.append(
            Term(english, written, first, tuple(a.strip() for a in avoid.split("、") if a.strip()))
        )
    if not terms:
        raise I18nError(f"{_shown(glossary)} has no table under {TERMS_HEADING!r}")
    return terms


def _prose(markdown: str) -> str:
    """What a reader reads as words: code blocks only by their comments, no code or URLs."""
    comments = lambda m: "\n".join(re.findall(r"(?:^|\s)#\s*([^\n]*)", m.group(4)))  # noqa: E731
    text = _FENCE.sub(comments, markdown)
    text = _LINK.sub(lambda m: m.group(1), _CODE_SPAN.sub(" ", text))
    return _BARE_URL.sub(" ", _MATH.sub(" ", text))


def _find(term: str, text: str, start: int = 0) -> int:
    """Where ``term`` occurs in ``text`` (a Latin term only as a whole word), or -1."""
    edge = "(?<![A-Za-z_])" if term[:1].isascii() else ""
    tail = "(?![A-Za-z_])" if term[-1:].isascii() else ""
    found = re.compile(edge + re.escape(term) + tail).search(text, start)
    return found.start() if found else -1


def term_problems(cells: dict[str, str], terms: list[Term]) -> list[str]:
    """Settled terms written otherwise, or first used without their first-use form.

    ``cells`` is one lesson's translated markdown, cell id -> text, in the lesson's order.
    """
    prose = {cell_id: _prose(text) for cell_id, text in cells.items()}
    problems = []
    for term in terms:
        how = f"the glossary writes {term.english!r} as {term.written!r}" + (
            f" (first use in a lesson: {term.first_use!r})" if term.first_use else ""
        )
        for cell_id, text in prose.items():
            cleared = text.replace(term.first_use, "") if term.first_use else text
            for other in (t for t in terms if t.first_use and t is not term):
                cleared = cleared.replace(other.first_use, "")
            for bad in term.avoid:
                if _find(bad, cleared) >= 0:
                    problems.append(f"cell {cell_id}: {bad!r}: {how}")
        if not term.first_use:
            continue
        for cell_id, text in prose.items():
            at = _find(term.written, text)
            if at < 0:
                continue
            first = text.find(term.first_use)
            if not (0 <= first <= at < first + len(term.first_use)):
                problems.append(
                    f"cell {cell_id}: first use of {term.written!r} in this lesson must read "
                    f"{term.first_use!r}"
                )
            break
    return problems


@dataclass
class Status:
    """Where one notebook's catalog stands against the English notebook."""

    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    damaged: dict[str, list[str]] = field(default_factory=dict)
    current: int = 0
    code_cells: int = 0  # of the cells to translate, code cells (their comments)
    code_current: int = 0  # of ``current``, code cells

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.orphans or self.damaged)


def status(nb: nbformat.NotebookNode, catalog: Catalog) -> Status:
    result = Status()
    sources = translatable_cells(nb)
    code_ids = _code_ids(nb)
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
            check = code_damage if is_code else damage
            if problems := check(source, entry.text):
                result.damaged[cell_id] = problems
    result.orphans = [i for i in catalog.entries if i not in sources]
    return result


def translate(nb: nbformat.NotebookNode, catalog: Catalog) -> nbformat.NotebookNode:
    """A copy of ``nb`` with every cell that has a current translation replaced.

    A markdown cell takes its translation; a code cell takes its translated comments, and
    only when nothing but comments differs from the English code (:func:`same_code`), so a
    catalog can never change what runs. Everything else (outputs, ids, metadata,
    attachments) is copied unchanged; a missing or stale translation keeps the English text,
    so a reader never sees a Chinese paragraph or comment that describes code which has
    since changed.
    """
    out = copy.deepcopy(nb)
    for cell in out.cells:
        entry = catalog.entries.get(cell.get("id", ""))
        if not entry or entry.en_hash != source_hash(cell.source):
            continue
        if cell.cell_type == "markdown" or (
            cell.cell_type == "code" and same_code(cell.source, entry.text)
        ):
            cell.source = entry.text
    return out


def differences(english: nbformat.NotebookNode, translated: nbformat.NotebookNode) -> list[str]:
    """Everything in which ``translated`` differs from ``english`` besides markdown text and
    code comments (a code cell's code without its comments is compared)."""
    found = []
    for key in ("nbformat", "nbformat_minor", "metadata"):
        if english.get(key) != translated.get(key):
            found.append(f"notebook {key} differs")
    if len(english.cells) != len(translated.cells):
        return found + [f"{len(translated.cells)} cells instead of {len(english.cells)}"]
    for n, (en, tr) in enumerate(zip(english.cells, translated.cells, strict=True)):
        where = f"cell {n} (id {en.get('id')}, {en.cell_type})"
        keys = set(en) | set(tr)
        if en.cell_type == "markdown" and tr.cell_type == "markdown":
            keys.discard("source")
        elif en.cell_type == tr.cell_type == "code" and same_code(en.source, tr.source):
            keys.discard("source")
        for key in sorted(keys):
            if en.get(key) != tr.get(key):
                found.append(f"{where}: {key} differs from the English notebook")
    return found


def html_differences(
    english: nbformat.NotebookNode, translated: nbformat.NotebookNode
) -> list[str]:
    """Code cells whose ``text/html`` outputs in ``translated`` are not the English ones: HTML
    runs as it is on the site and in the decks, and only the English notebook is reviewed."""

    def html(nb: nbformat.NotebookNode) -> dict[str, list]:
        return {
            cell.get("id", ""): [
                o.get("data", {}).get("text/html") for o in cell.get("outputs", [])
            ]
            for cell in nb.cells
            if cell.cell_type == "code"
        }

    en = html(english)
    return [
        f"cell {cell_id}: a text/html output differs from the English notebook's (a "
        "translation never carries outputs of its own: `make translations`)"
        for cell_id, outputs in html(translated).items()
        if any(outputs) and outputs != en.get(cell_id)
    ]


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """How ``build`` writes a notebook (nbformat's own layout, as Jupyter saves it)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


# --- commands ------------------------------------------------------------------------------


# The notebooks `build` wrote into a translation folder, by name: it overwrites and deletes only
# these, so a learner's own notebook there (Lab's "New notebook", a saved copy) is never lost.
BUILT = ".i18n-built.json"


def _built(folder: Path) -> set[str]:
    try:
        names = json.loads((folder / BUILT).read_text(encoding="utf-8"))["notebooks"]
        return {n for n in names if isinstance(n, str) and n == Path(n).name}
    except (OSError, ValueError, KeyError, TypeError):
        return set()  # no record (yet): nothing there is known to be this tool's


def _record_built(folder: Path, names: set[str]) -> None:
    text = json.dumps(
        {"written_by": "tools/authoring/i18n.py build", "notebooks": sorted(names)}, indent=1
    )
    record = folder / BUILT
    if not record.is_file() or record.read_text(encoding="utf-8") != text + "\n":
        record.write_text(text + "\n", encoding="utf-8")


def write_translation(target: Path, text: str) -> bool:
    """Write the translated notebook ``text`` to ``target`` unless that would overwrite a file
    this tool did not write (one that already holds ``text`` is taken as its own); whether
    ``target`` holds ``text`` now."""
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    built = _built(folder)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        return False
    if target.exists() and target.read_text(encoding="utf-8", errors="replace") != text:
        if target.name not in built:
            return False
        target.write_text(text, encoding="utf-8")
    elif not target.exists():
        target.write_text(text, encoding="utf-8")
    _record_built(folder, built | {target.name})
    return True


def _kept_line(kept: list[Path]) -> str:
    return (
        f"kept {', '.join(_shown(p) for p in kept)}: not written by "
        "`python -m tools.authoring.i18n build`, which overwrites and deletes only its own "
        "notebooks (move one away to have it rebuilt)"
    )


def build(
    notebooks_dir: Path, lang: str, root: Path, log: Callable[[str], object] = print
) -> list[tuple[Path, Status]]:
    """Write every translated notebook; remove those it wrote whose English notebook is gone.

    A notebook in the translation folder that this tool did not write (:data:`BUILT`) is
    neither overwritten nor deleted: ``log`` names them all in one line.
    """
    done, kept = [], []
    for english in english_notebooks(notebooks_dir):
        nb = read_notebook(english)
        catalog = Catalog.load(english, lang, root)
        target = translated_path(english, lang)
        if not write_translation(target, notebook_text(translate(nb, catalog))):
            kept.append(target)
        done.append((target, status(nb, catalog)))
    sources = {p.name for p in english_notebooks(notebooks_dir)}
    folder = notebooks_dir / lang
    if folder.is_dir():
        built = _built(folder)
        for name in sorted(built - sources):  # written from a notebook that no longer exists
            if (folder / name).is_file() or (folder / name).is_symlink():
                (folder / name).unlink()
        if built - sources:
            _record_built(folder, built & sources)
        kept += [p for p in sorted(folder.glob("*.ipynb")) if p.name not in built | sources]
    if kept:
        log(_kept_line(kept))
    return done


def check(notebooks_dir: Path, lang: str, root: Path) -> list[str]:
    """Every problem that keeps the translation from shipping, one line each."""
    problems = []
    glossary = root / lang / "glossary.md"
    terms = load_terms(glossary) if glossary.exists() else []
    for english in english_notebooks(notebooks_dir):
        nb = read_notebook(english)
        catalog = Catalog.load(english, lang, root)
        state = status(nb, catalog)
        name = english.stem
        if state.missing:
            problems.append(f"{name}: {len(state.missing)} untranslated: {' '.join(state.missing)}")
        if state.stale:
            problems.append(
                f"{name}: {len(state.stale)} stale (English changed since translated): "
                + " ".join(state.stale)
            )
        for cell_id, lost in state.damaged.items():
            problems.extend(f"{name}: cell {cell_id}: {problem}" for problem in lost)
        if state.orphans:
            problems.append(
                f"{name}: {_shown(catalog.path)} has entries for cells that no longer exist: "
                f"{' '.join(state.orphans)} (`python -m tools.authoring.i18n prune {name}`)"
            )
        if terms:
            problems.extend(f"{name}: {p}" for p in term_problems(lesson_prose(nb, catalog), terms))
        target = translated_path(english, lang)
        if not target.exists():
            problems.append(f"{name}: {_shown(target)} does not exist (`make translations`)")
        elif html := html_differences(nb, load_notebook(target)):
            problems.extend(f"{name}: {_shown(target)}: {p}" for p in html)
        elif target.read_text(encoding="utf-8") != notebook_text(translate(nb, catalog)):
            problems.append(
                f"{name}: {_shown(target)} is not what `make translations` writes now (edited "
                "by hand, or the English notebook or catalog changed since): `make translations`"
            )
    return problems


def lesson_prose(nb: nbformat.NotebookNode, catalog: Catalog) -> dict[str, str]:
    """One lesson's translated words in its order, cell id -> text, where the glossary's
    terms are checked: each markdown translation, and each code cell's translated comments
    (its code is not prose: an identifier ``rank`` is no use of the term)."""
    found = {}
    for cell in nb.cells:
        entry = catalog.entries.get(cell.get("id", ""))
        if entry is not None and cell.cell_type == "markdown":
            found[cell.id] = entry.text
        elif entry is not None and cell.cell_type == "code":
            found[cell.id] = comment_prose(entry.text)
    return found


def todo(english: Path, lang: str, root: Path) -> tuple[Status, dict[str, str], Catalog]:
    nb = read_notebook(english)
    catalog = Catalog.load(english, lang, root)
    return status(nb, catalog), translatable_cells(nb), catalog


def record(
    english: Path, translations: dict[str, str], lang: str, root: Path, allow_identical: bool
) -> Status:
    """Store ``translations`` (cell id -> text) with the current English hashes, all or none.

    A markdown cell's translation is its whole text; a code cell's is its whole source with
    the comments translated (:func:`code_damage` says what else it may not change).
    """
    nb = read_notebook(english)
    sources = translatable_cells(nb)
    code_ids = _code_ids(nb)
    errors = []
    for cell_id, text in translations.items():
        if cell_id not in sources:
            kind = (
                "is a code cell without comments (nothing to translate)"
                if cell_id in code_ids
                else "is not a markdown or code cell"
                if cell_id in {c.id for c in nb.cells}
                else "no cell"
            )
            errors.append(f"{cell_id}: {kind} in {english.name} (see `todo {english.stem}`)")
        elif not isinstance(text, str) or not text.strip():
            errors.append(f"{cell_id}: the translation is empty")
        elif text.strip() == sources[cell_id].strip() and not allow_identical:
            errors.append(
                f"{cell_id}: the text is the English text (untranslated?); pass "
                "--allow-identical if this cell really reads the same in both languages"
            )
        else:
            check = code_damage if cell_id in code_ids else damage
            errors.extend(f"{cell_id}: {p}" for p in check(sources[cell_id], text))
    if errors:
        raise I18nError("nothing recorded:\n  " + "\n  ".join(errors))
    catalog = Catalog.load(english, lang, root)
    for cell_id, text in translations.items():
        # Keep the cell's own ending: nbformat stores sources without a final newline.
        catalog.entries[cell_id] = Entry(text.rstrip("\n"), source_hash(sources[cell_id]))
    catalog.save([c.id for c in nb.cells])
    target = translated_path(english, lang)
    if not write_translation(target, notebook_text(translate(nb, catalog))):
        raise I18nError(f"recorded in {_shown(catalog.path)}; " + _kept_line([target]))
    return status(nb, catalog)


def prune(english: Path, lang: str, root: Path) -> list[str]:
    nb = read_notebook(english)
    catalog = Catalog.load(english, lang, root)
    gone = status(nb, catalog).orphans
    for cell_id in gone:
        del catalog.entries[cell_id]
    if gone:
        catalog.save([c.id for c in nb.cells])
    return gone


def _summary(name: str, state: Status) -> str:
    total = state.current + len(state.missing) + len(state.stale)
    markdown = f"{state.current - state.code_current}/{total - state.code_cells} markdown cells"
    code = f", {state.code_current}/{state.code_cells} code cells' comments"
    code = code if state.code_cells else ""
    return (
        f"{name}: {markdown}{code} translated"
        f" ({len(state.missing)} missing, {len(state.stale)} stale)"
    )


def _print_todo(english: Path, lang: str, root: Path, as_json: bool) -> None:
    state, sources, catalog = todo(english, lang, root)
    code_ids = _code_ids(read_notebook(english))
    if as_json:
        # The file a translator fills in (replace each value) and gives to `import`.
        wanted = {i: sources[i] for i in sources if i in state.missing or i in state.stale}
        print(json.dumps(wanted, ensure_ascii=False, indent=1))
        return
    for cell_id in sources:
        if cell_id not in state.missing and cell_id not in state.stale:
            continue
        why = "missing" if cell_id in state.missing else "stale: the English changed"
        if cell_id in code_ids:
            why += "; code: translate only its # comments"
        print(f"===== cell {cell_id} ({why}) =====\n--- English ---\n{sources[cell_id]}")
        if cell_id in state.stale:
            print(f"--- old translation (update it) ---\n{catalog.entries[cell_id].text}")
        print()
    print(_summary(english.stem, state))
    if state.missing or state.stale:
        print(
            f"Next: `python -m tools.authoring.i18n todo {english.stem} --json > t.json`, "
            "replace each value by its translation, "
            f"`python -m tools.authoring.i18n import {english.stem} t.json`."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", default=DEFAULT_LANG, help="catalog folder (default: zh)")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS_DIR, help=argparse.SUPPRESS)
    parser.add_argument(
        "--translations", type=Path, default=TRANSLATIONS_DIR, help=argparse.SUPPRESS
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="write notebooks/<lang>/*.ipynb")
    commands.add_parser("check", help="list missing, stale and damaged translations (exit 1)")
    p_todo = commands.add_parser("todo", help="print the cells that need a (re)translation")
    p_todo.add_argument("notebook", nargs="?", help="01, 01_tensors or a path (default: all)")
    p_todo.add_argument("--json", action="store_true", help="as {cell id: English text}")
    p_set = commands.add_parser("set", help="record one cell's translation from a file")
    p_set.add_argument("notebook")
    p_set.add_argument("cell_id")
    p_set.add_argument("file", help="the translated markdown ('-': stdin)")
    p_import = commands.add_parser("import", help="record a JSON {cell id: translation}")
    p_import.add_argument("notebook")
    p_import.add_argument("file", type=Path)
    p_prune = commands.add_parser("prune", help="drop entries of cells that no longer exist")
    p_prune.add_argument("notebook")
    for sub in (p_set, p_import):
        sub.add_argument(
            "--allow-identical",
            action="store_true",
            help="accept a cell that reads the same in both languages (a formula, a link)",
        )
    args = parser.parse_args(argv)
    lang, root, notebooks = args.lang, args.translations, args.notebooks

    try:
        if args.command == "build":
            for target, state in build(notebooks, lang, root):
                print(f"{_summary(target.stem, state)} -> {_shown(target)}")
        elif args.command == "check":
            problems = check(notebooks, lang, root)
            if problems:
                print("\n".join(problems))
                print(
                    f"{len(problems)} problem(s). Translate with "
                    "`python -m tools.authoring.i18n todo NB` "
                    "and `import` (see translations/zh/glossary.md), then `make translations`.",
                    file=sys.stderr,
                )
                return 1
            print(f"all {len(english_notebooks(notebooks))} notebooks fully translated ({lang})")
        elif args.command == "todo":
            if args.notebook is None:
                for english in english_notebooks(notebooks):
                    print(_summary(english.stem, todo(english, lang, root)[0]))
            else:
                _print_todo(resolve_notebook(args.notebook, notebooks), lang, root, args.json)
        elif args.command in {"set", "import"}:
            english = resolve_notebook(args.notebook, notebooks)
            if args.command == "set":
                source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
                with source:
                    batch = {args.cell_id: source.read()}
            else:
                try:
                    batch = json.loads(args.file.read_text(encoding="utf-8"))
                except ValueError as exc:
                    raise I18nError(f"{args.file} is not JSON: {exc}") from exc
                if not isinstance(batch, dict):
                    raise I18nError(f"{args.file} must hold one object {{cell id: translation}}")
            state = record(english, batch, lang, root, args.allow_identical)
            print(f"recorded {len(batch)} cell(s). {_summary(english.stem, state)}")
        elif args.command == "prune":
            gone = prune(resolve_notebook(args.notebook, notebooks), lang, root)
            print(f"removed {len(gone)} entries: {' '.join(gone)}" if gone else "nothing to prune")
    except (I18nError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
