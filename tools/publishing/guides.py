"""The teacher's guide on the site: TEACHING.md at the root, TEACHING.<code>.md in each
language's folder (a language without one has no guide page), as ``teaching.html``.

The guides are Markdown files read on GitHub too, so a heading's id is GitHub's (the guides'
contents lists link them), and a link to another file of the checkout becomes its page on
the site: README.md the index, a guide its page; one the site does not carry stops the build.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import mistune

from tools import conventions

ROOT = Path(__file__).resolve().parents[2]
PAGE = "teaching.html"


class GuideError(RuntimeError):
    """A guide the site cannot render as it is; the message says what to change."""


@dataclass
class Guide:
    code: str
    source: Path
    title: str
    body_html: str  # the guide without its title, rendered


def guide_path(code: str, root: Path = ROOT) -> Path:
    return root / ("TEACHING.md" if code == conventions.SOURCE else f"TEACHING.{code}.md")


def slug(text: str) -> str:
    """GitHub's id for a heading whose text is ``text``: lower case, punctuation dropped
    (Chinese characters are letters, full-width punctuation is not), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _plain(inline_html: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", inline_html))


class _Renderer(mistune.HTMLRenderer):
    def __init__(self, name: str, links: dict[str, str | None]) -> None:
        super().__init__(escape=True)  # a guide's raw HTML shows as text, never as markup
        self.name, self.links, self.ids = name, links, set()

    def heading(self, text: str, level: int, **attrs) -> str:
        anchor, n = slug(_plain(text)), 1
        while anchor in self.ids:  # GitHub numbers a repeated heading's id
            anchor, n = f"{slug(_plain(text))}-{n}", n + 1
        self.ids.add(anchor)
        return f'<h{level} id="{html.escape(anchor)}">{text}</h{level}>\n'

    def link(self, text: str, url: str, title: str | None = None) -> str:
        parts = urlsplit(url)
        if parts.scheme or url.startswith("#"):
            return super().link(text, url, title)
        target = unquote(parts.path)
        if target not in self.links:
            carried = ", ".join(sorted(self.links))
            raise GuideError(
                f"{self.name} links {target}, which the site does not carry: link one of "
                f"{carried}, a section (#...) or a web address"
            )
        page = self.links[target]
        if page is None:  # a guide of a language this build leaves out: the text alone
            return text
        fragment = f"#{parts.fragment}" if parts.fragment and page.endswith(PAGE) else ""
        return super().link(text, page + fragment, title)


def render(code: str, codes: list[str], root: Path = ROOT) -> Guide | None:
    """Language ``code``'s guide for the site built in ``codes``, or None when it has none."""
    source = guide_path(code, root)
    if not source.is_file():
        return None
    up = "" if code == conventions.SOURCE else "../"
    links: dict[str, str | None] = {"README.md": "index.html"}  # the learner's start
    for other in conventions.codes():
        folder = "" if other == conventions.SOURCE else f"{other}/"
        built = other in codes and guide_path(other, root).is_file()
        links[guide_path(other, root).name] = up + folder + PAGE if built else None
    text = source.read_text(encoding="utf-8")
    title_line, _, rest = text.partition("\n")
    if not title_line.startswith("# "):
        raise GuideError(f"{source.name} must start with its title, a line '# ...'")
    renderer = _Renderer(source.name, links)
    markdown = mistune.create_markdown(renderer=renderer, plugins=["table"])
    title = _plain(str(markdown(title_line)))
    renderer.ids.clear()  # the title is the page's <h1>: the body's ids start afresh
    body = str(markdown(rest))
    # A wide table or code block scrolls inside its own box, not the page (the phone width
    # test), and a box that scrolls takes the keyboard's focus (axe: scrollable-region-focusable).
    body = body.replace("<table>", '<div class="blitz-table" tabindex="0"><table>')
    body = body.replace("</table>", "</table></div>").replace("<pre>", '<pre tabindex="0">')
    return Guide(code, source, title.strip(), body)
