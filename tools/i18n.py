"""Translated notebooks from one source: ``notebooks/*.ipynb`` + a catalog -> ``notebooks/zh``.

The English notebooks are the only source of code and outputs. A translation is a catalog
per notebook, ``translations/<lang>/<stem>.json``, keyed by cell id: each entry holds the
translated markdown and the hash of the English markdown it translates, so an English edit
makes the entry *stale* instead of silently wrong. ``build`` writes the translated notebooks
(every cell, id and output copied from the English one; only markdown sources replaced);
a missing or stale translation shows the English text there until it is (re)translated,
and ``check`` fails until then.

Usage (``make translations`` runs ``build``)::

    python tools/i18n.py build                  # write notebooks/zh/*.ipynb
    python tools/i18n.py check                  # missing / stale / damaged entries, exit 1
    python tools/i18n.py todo 01                # what a translator must (re)translate
    python tools/i18n.py todo 01 --json > t.json  # the same as {cell id: English text}
    python tools/i18n.py import 01 t.json       # record {cell id: translation} (a batch)
    python tools/i18n.py set 01 a2f572ae cell.md  # record one cell ('-': stdin)
    python tools/i18n.py prune 01               # drop entries whose cell no longer exists

A notebook is named by its stem, its number (``01``) or its path.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
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
    """The source notebooks: ``notebooks/*.ipynb`` (the translated ones live in subfolders)."""
    return sorted(notebooks_dir.glob("*.ipynb"))


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
            entries = {
                cell_id: Entry("".join(item["text"]), item["en_sha256"])
                for cell_id, item in data["cells"].items()
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise I18nError(
                f"{path} is not a valid catalog ({exc!r}): fix it, or restore it with git"
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
    """Cell id -> source of every markdown cell (the only cells that are translated)."""
    return {c.id: c.source for c in nb.cells if c.cell_type == "markdown"}


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$\n]*?\$", re.S)
_URL = re.compile(r"\]\(\s*([^)\s]+)")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)
# A line break between two Chinese characters: browsers render it as a space.
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK_BREAK = re.compile(f"([{_CJK}])\n[ \t]*([{_CJK}])")


def damage(english: str, translation: str) -> list[str]:
    """What a translation lost that must survive it: code spans, math, link targets, headings.

    Also a line break inside Chinese text (rendered as a stray space).

    Extra code spans are fine (a translator may add an identifier); in-page anchors
    (``#...``) change with the heading text, so the site's link check covers them instead.
    """
    problems = []
    for name, pattern in (("code span", _CODE_SPAN), ("formula", _MATH)):
        found = Counter(m.group(0) for m in pattern.finditer(translation))
        for item, count in Counter(m.group(0) for m in pattern.finditer(english)).items():
            if found[item] < count:
                problems.append(f"{name} {item} is missing (keep code and math as they are)")
    links = Counter(u for u in _URL.findall(translation))
    for url, count in Counter(u for u in _URL.findall(english) if not u.startswith("#")).items():
        if links[url] < count:
            problems.append(f"link target {url} is missing")
    for m in _CJK_BREAK.finditer(translation):
        problems.append(
            f"line break in '{m.group(1)}⏎{m.group(2)}' shows as a space in the browser: "
            "write each Chinese paragraph or list item on one line"
        )
    if _HEADING.findall(english) != _HEADING.findall(translation):
        problems.append(
            f"heading levels {[len(h) for h in _HEADING.findall(english)]} became "
            f"{[len(h) for h in _HEADING.findall(translation)]} (the contents list follows them)"
        )
    return problems


@dataclass
class Status:
    """Where one notebook's catalog stands against the English notebook."""

    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    damaged: dict[str, list[str]] = field(default_factory=dict)
    current: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.orphans or self.damaged)


def status(nb: nbformat.NotebookNode, catalog: Catalog) -> Status:
    result = Status()
    sources = markdown_cells(nb)
    for cell_id, source in sources.items():
        entry = catalog.entries.get(cell_id)
        if entry is None:
            result.missing.append(cell_id)
        elif entry.en_hash != source_hash(source):
            result.stale.append(cell_id)
        else:
            result.current += 1
            if problems := damage(source, entry.text):
                result.damaged[cell_id] = problems
    result.orphans = [i for i in catalog.entries if i not in sources]
    return result


def translate(nb: nbformat.NotebookNode, catalog: Catalog) -> nbformat.NotebookNode:
    """A copy of ``nb`` with every markdown cell that has a current translation replaced.

    Everything else (code, outputs, ids, metadata, attachments) is copied unchanged; a
    missing or stale translation keeps the English text, so a reader never sees a Chinese
    paragraph that describes code which has since changed.
    """
    out = copy.deepcopy(nb)
    for cell in out.cells:
        entry = catalog.entries.get(cell.get("id", ""))
        if cell.cell_type == "markdown" and entry and entry.en_hash == source_hash(cell.source):
            cell.source = entry.text
    return out


def differences(english: nbformat.NotebookNode, translated: nbformat.NotebookNode) -> list[str]:
    """Everything in which ``translated`` differs from ``english`` besides markdown text."""
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
        for key in sorted(keys):
            if en.get(key) != tr.get(key):
                found.append(f"{where}: {key} differs from the English notebook")
    return found


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """How ``build`` writes a notebook (nbformat's own layout, as Jupyter saves it)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


# --- commands ------------------------------------------------------------------------------


def build(notebooks_dir: Path, lang: str, root: Path) -> list[tuple[Path, Status]]:
    """Write every translated notebook; remove those whose English notebook is gone."""
    done = []
    for english in english_notebooks(notebooks_dir):
        nb = nbformat.read(english, as_version=4)
        catalog = Catalog.load(english, lang, root)
        target = translated_path(english, lang)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = notebook_text(translate(nb, catalog))
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        done.append((target, status(nb, catalog)))
    sources = {p.name for p in english_notebooks(notebooks_dir)}
    folder = notebooks_dir / lang
    for leftover in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        if leftover.name not in sources:
            leftover.unlink()  # generated from a notebook that no longer exists
    return done


def check(notebooks_dir: Path, lang: str, root: Path) -> list[str]:
    """Every problem that keeps the translation from shipping, one line each."""
    problems = []
    for english in english_notebooks(notebooks_dir):
        nb = nbformat.read(english, as_version=4)
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
                f"{' '.join(state.orphans)} (`python tools/i18n.py prune {name}`)"
            )
        target = translated_path(english, lang)
        if not target.exists():
            problems.append(f"{name}: {_shown(target)} does not exist (`make translations`)")
        elif target.read_text(encoding="utf-8") != notebook_text(translate(nb, catalog)):
            problems.append(
                f"{name}: {_shown(target)} is not what `make translations` writes now (edited "
                "by hand, or the English notebook or catalog changed since): `make translations`"
            )
    return problems


def todo(english: Path, lang: str, root: Path) -> tuple[Status, dict[str, str], Catalog]:
    nb = nbformat.read(english, as_version=4)
    catalog = Catalog.load(english, lang, root)
    return status(nb, catalog), markdown_cells(nb), catalog


def record(
    english: Path, translations: dict[str, str], lang: str, root: Path, allow_identical: bool
) -> Status:
    """Store ``translations`` (cell id -> text) with the current English hashes, all or none."""
    nb = nbformat.read(english, as_version=4)
    sources = markdown_cells(nb)
    errors = []
    for cell_id, text in translations.items():
        if cell_id not in sources:
            kind = "is not a markdown cell" if cell_id in {c.id for c in nb.cells} else "no cell"
            errors.append(f"{cell_id}: {kind} in {english.name} (see `todo {english.stem}`)")
        elif not isinstance(text, str) or not text.strip():
            errors.append(f"{cell_id}: the translation is empty")
        elif text.strip() == sources[cell_id].strip() and not allow_identical:
            errors.append(
                f"{cell_id}: the text is the English text (untranslated?); pass "
                "--allow-identical if this cell really reads the same in both languages"
            )
        else:
            errors.extend(f"{cell_id}: {p}" for p in damage(sources[cell_id], text))
    if errors:
        raise I18nError("nothing recorded:\n  " + "\n  ".join(errors))
    catalog = Catalog.load(english, lang, root)
    for cell_id, text in translations.items():
        # Keep the cell's own ending: nbformat stores sources without a final newline.
        catalog.entries[cell_id] = Entry(text.rstrip("\n"), source_hash(sources[cell_id]))
    catalog.save(list(sources))
    target = translated_path(english, lang)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook_text(translate(nb, catalog)), encoding="utf-8")
    return status(nb, catalog)


def prune(english: Path, lang: str, root: Path) -> list[str]:
    nb = nbformat.read(english, as_version=4)
    catalog = Catalog.load(english, lang, root)
    gone = status(nb, catalog).orphans
    for cell_id in gone:
        del catalog.entries[cell_id]
    if gone:
        catalog.save(list(markdown_cells(nb)))
    return gone


def _summary(name: str, state: Status) -> str:
    total = state.current + len(state.missing) + len(state.stale)
    return (
        f"{name}: {state.current}/{total} markdown cells translated"
        f" ({len(state.missing)} missing, {len(state.stale)} stale)"
    )


def _print_todo(english: Path, lang: str, root: Path, as_json: bool) -> None:
    state, sources, catalog = todo(english, lang, root)
    if as_json:
        # The file a translator fills in (replace each value) and gives to `import`.
        wanted = {i: sources[i] for i in sources if i in state.missing or i in state.stale}
        print(json.dumps(wanted, ensure_ascii=False, indent=1))
        return
    for cell_id in sources:
        if cell_id not in state.missing and cell_id not in state.stale:
            continue
        why = "missing" if cell_id in state.missing else "stale: the English changed"
        print(f"===== cell {cell_id} ({why}) =====\n--- English ---\n{sources[cell_id]}")
        if cell_id in state.stale:
            print(f"--- old translation (update it) ---\n{catalog.entries[cell_id].text}")
        print()
    print(_summary(english.stem, state))
    if state.missing or state.stale:
        print(
            f"Next: `python tools/i18n.py todo {english.stem} --json > t.json`, replace each "
            f"value by its translation, `python tools/i18n.py import {english.stem} t.json`."
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
                    f"{len(problems)} problem(s). Translate with `python tools/i18n.py todo NB` "
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
