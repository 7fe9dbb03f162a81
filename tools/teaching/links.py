"""The links a teacher hands out, in English and Chinese: printed last by ``make hub`` (once
JupyterHub runs, after its start-up log) and written to ``links.txt`` and ``links.html`` in the
hub's state folder (root only), whose paths are printed with them.

``COURSE_LANG=zh`` (the switch ``make grade`` uses) makes ``make hub``'s closing lines Chinese.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path

from tools.owned import replace_file
from tools.teaching import classroom, hubsite

PRIVATE = 0o600  # the links files: readable by their owner (root) only

LANG_ENV = "COURSE_LANG"


@dataclass(frozen=True)
class Link:
    en: str  # what it is, in English
    zh: str  # the same, in Chinese
    url: str


def course_lang(environ: os._Environ | dict = os.environ) -> str:
    """``zh`` or ``en`` from COURSE_LANG (anything else: English)."""
    return "zh" if environ.get(LANG_ENV, "").strip().lower().startswith("zh") else "en"


def class_links(s: classroom.Settings, environ: os._Environ | dict = os.environ) -> list[Link]:
    """Lesson 01 in each language (each only when the teacher's clone has it on disk).
    Homework needs no link: students fetch it in Lab's Assignment List (homework.py)."""
    host = hubsite.public_url(s.url, s.port, environ)
    lessons = [
        Link("Lesson 01, English", "第 1 课（英文版）", "notebooks/01_tensors.ipynb"),
        Link("Lesson 01, Chinese", "第 1 课（中文版）", "notebooks/zh/01_tensors.ipynb"),
    ]
    return [
        Link(x.en, x.zh, s.link(x.url, host=host)) for x in lessons if (s.pulled / x.url).is_file()
    ]


WORDS = {
    "en": {
        "title": "Links for the class",
        "hub": "The hub (the teacher signs up first as {teacher!r})",
        "hand": "Hand these out: a click signs a student in, copies the lessons, opens the lesson",
        "file": "The same links, to open or copy: {txt} and {html}",
        "none": "no lesson notebook found in {lessons}: no link to hand out",
        "homework": (
            "Homework needs no link: make homework LESSON=01 hands lesson 01's out, and students "
            "fetch and submit it in Lab's menu Homework > Assignment List (TEACHING.md)"
        ),
    },
    "zh": {
        "title": "课堂链接",
        "hub": "JupyterHub 地址（教师先以 {teacher!r} 注册）",
        "hand": "把下列链接发给学生：点击即登录、复制课程并打开这一课",
        "file": "同样的链接也写在文件中，可打开或复制：{txt} 和 {html}",
        "none": "在 {lessons} 中找不到课程 notebook：没有可发的链接",
        "homework": (
            "作业不需要链接：make homework LESSON=01 布置第 1 课的作业，学生在 Lab 的菜单"
            "“作业 > Assignment List”中领取和提交（TEACHING.zh.md）"
        ),
    },
}


def block(
    s: classroom.Settings,
    links: list[Link],
    files: tuple[Path, Path],
    lang: str,
    environ: os._Environ | dict = os.environ,
) -> list[str]:
    """The closing lines of ``make hub``'s output: the links alone on their lines, plain."""
    w = WORDS[lang]
    rule = "=" * 72
    lines = [rule, w["title"], "", w["hub"].format(teacher=s.teacher) + ":"]
    lines.append("    " + hubsite.public_url(s.url, s.port, environ) + "/hub/")
    if not links:
        lines.append(w["none"].format(lessons=s.pulled))
    else:
        lines += ["", w["hand"] + ":"]
    for link in links:
        lines += ["", f"{link.en} / {link.zh}:" if lang == "en" else f"{link.zh} / {link.en}:"]
        lines.append(link.url)
    lines += ["", w["homework"], "", w["file"].format(txt=files[0], html=files[1]), rule]
    return lines


def write(s: classroom.Settings, links: list[Link], environ=os.environ) -> tuple[Path, Path]:
    """links.txt and links.html in the hub's state folder; their paths."""
    txt, page = s.state_dir / "links.txt", s.state_dir / "links.html"
    hub = hubsite.public_url(s.url, s.port, environ) + "/hub/"
    text = [f"JupyterHub: {hub}", ""]
    for link in links:
        text += [f"{link.en} / {link.zh}:", link.url, ""]
    replace_file(txt, "\n".join(text), PRIVATE)
    items = "\n".join(
        f'<li><p>{html.escape(x.en)} / <span lang="zh">{html.escape(x.zh)}</span></p>'
        f'<p><a href="{html.escape(x.url)}">{html.escape(x.url)}</a></p></li>'
        for x in links
    )
    replace_file(
        page,
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Links for the class / 课堂链接</title></head><body>\n"
        '<h1>Links for the class / <span lang="zh">课堂链接</span></h1>\n'
        f'<p>JupyterHub: <a href="{html.escape(hub)}">{html.escape(hub)}</a></p>\n'
        f"<ul>\n{items}\n</ul>\n</body></html>\n",
        PRIVATE,
    )
    return txt, page
