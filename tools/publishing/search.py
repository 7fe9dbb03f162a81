"""The site's search: one entry per heading of a lesson page, with its section's text."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

# The part of a lesson a cell is in, by the tag nbconvert writes as a class (CONTRIBUTING.md,
# "The core path and the deep dives"): "Core path only" hides both, so a result says so.
PART_OF_TAG = {
    "celltag_optional": "deep_dive",
    "celltag_exercise": "exercise",
    "celltag_solution": "exercise",
}


@dataclass
class Section:
    level: int  # 1 to 3: the heading's
    anchor: str
    part: str  # "deep_dive", "exercise", or "" for the core path
    title: str = ""
    text: list[str] = field(default_factory=list)


class _Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self._heading: list[str] | None = None  # the text of the heading being read
        self._skip = 0
        self._part = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        classes = (attr.get("class") or "").split()
        # A code cell's tags are on its cell, a markdown cell's on its rendered markdown.
        if tag == "div" and ("jp-Cell" in classes or "jp-MarkdownOutput" in classes):
            self._part = next((PART_OF_TAG[c] for c in classes if c in PART_OF_TAG), "")
        if tag in {"script", "style"}:
            self._skip += 1
        elif tag in {"h1", "h2", "h3"}:
            self._heading = []
            self.sections.append(Section(int(tag[1]), attr.get("id") or "", self._part))
        elif tag == "a" and self._heading is not None and attr.get("class") == "anchor-link":
            self._skip += 1  # the ¶ nbconvert puts in each heading

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style"} or (tag == "a" and self._skip and self._heading is not None):
            self._skip = max(0, self._skip - 1)
        elif tag in {"h1", "h2", "h3"} and self._heading is not None:
            self.sections[-1].title = " ".join("".join(self._heading).split())
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._heading is not None:
            self._heading.append(data)
        elif self.sections:
            self.sections[-1].text.append(data)


def outline(page: str) -> list[Section]:
    """The h1-h3 sections of a lesson page's HTML, in order."""
    parser = _Outline()
    parser.feed(page)
    return parser.sections


def entries(sections: list[Section], page: str, lesson: str) -> list[dict[str, str]]:
    """The search entries of one page: a heading each (an h1 stands for the whole lesson)."""
    return [
        {
            "page": page,
            "lesson": lesson,
            "section": s.title if s.level > 1 else lesson,
            "anchor": s.anchor if s.level > 1 else "",
            "part": s.part,
            "text": " ".join(" ".join(s.text).split())[:4000],
        }
        for s in sections
    ]


def write_index(path: Path, found: list[dict[str, str]]) -> None:
    """The index as a script (site.js reads it from a ``file://`` page, where fetch fails)."""
    text = json.dumps(found, ensure_ascii=False)
    path.write_text(f"window.BLITZ_SEARCH_INDEX = {text};\n", encoding="utf-8")
