"""The grader's lines and notes (and make homework's and make collect's) in the course's
language (``--lang zh``, which ``COURSE_LANG=zh make grade`` passes): the English template is
the key, as gettext's msgid is, and a template without a Chinese line stays English. Values
(names, numbers, paths) are filled in after the choice, so both languages say the same facts."""

from __future__ import annotations

ZH = {
    # grades.csv's notes and the feedback page of a submission that was not graded
    "not a notebook: {name} is not an .ipynb file": "不是笔记本：{name} 不是 .ipynb 文件",
    " (student {stem} is graded from {stem}.ipynb)": "（学生 {stem} 按 {stem}.ipynb 批改）",
    "not a plain file: {name} (a link, folder or device is not read)": (
        "不是普通文件：{name}（链接、文件夹或设备不会被读取）"
    ),
    "too large: {size:.1f} MB, more than {most:g} MB": "太大：{size:.1f} MB，超过 {most:g} MB",
    "too large: more than {most:g} MB": "太大：超过 {most:g} MB",
    "not a notebook: the file is not UTF-8 text": "不是笔记本：文件不是 UTF-8 文本",
    "not a notebook: the file is not valid JSON{where}": "不是笔记本：文件不是有效的 JSON{where}",
    " (line {line}, column {column})": "（第 {line} 行，第 {column} 列）",
    "not a Jupyter notebook: JSON without a notebook's version and cells": (
        "不是 Jupyter 笔记本：这个 JSON 没有笔记本的版本号和单元格"
    ),
    "not a valid Jupyter notebook: {first}": "不是有效的 Jupyter 笔记本：{first}",
    "not lesson {n}'s assignment: none of its check cells (ex{n}_q1, ...) is in it": (
        "不是第 {n} 课的作业：里面没有它的任何检查单元格（ex{n}_q1 等）"
    ),
    "not graded: a student id (the file name before .ipynb) is letters, digits, - and _, "
    "starting with a letter or digit; rename the file": (
        "未批改：学生编号（.ipynb 前面的文件名）由字母、数字、- 和 _ 组成，"
        "以字母或数字开头。请给文件改名"
    ),
    "the grader stopped after {s} s: not graded": "批改程序在 {s} 秒后停止：未批改",
    "interrupted after {s} s: code cell {cells}": "{s} 秒后被中断：代码单元格 {cells}",
    "not run by the grader: a deep dive no later cell needs": (
        "批改时没有运行：这是一段深入内容，后面的单元格都不需要它"
    ),
    "the submission's time limit ({s} s) ran out": "提交的时间限制（{s} 秒）用完了",
    "the kernel stopped (the code above crashed or exited)": (
        "内核停止了（上面的代码崩溃或退出了）"
    ),
    "a cell did not stop within {s} s, even when interrupted": (
        "有一个单元格在 {s} 秒内没有停下，中断后也没有"
    ),
    "not run: {why}": "未运行：{why}",
    "code cell {n} used up the submission's memory (--memory-gb {gb:g}) and the kernel was "
    "stopped": "代码单元格 {n} 用完了提交的内存（--memory-gb {gb:g}），内核被停止",
    # the grader's lines to the teacher
    "run {record}: lesson {n} ({lang}), submissions from {folder}{side}": (
        "批改 {record}：第 {n} 课（{lang}），提交来自 {folder}{side}"
    ),
    ", {jobs} side by side": "，同时批改 {jobs} 份",
    "ignored {name!r} (a hidden file)": "忽略了 {name!r}（隐藏文件）",
    "the lesson's own solutions: full marks in {s:.1f} s": "课程自带的答案：满分，用时 {s:.1f} 秒",
    "{student}: graded in {s:.1f} s": "{student}：批改完毕，用时 {s:.1f} 秒",
    "{student}: added ({points} points)": "{student}：新增（{points} 分）",
    "{student}: unchanged ({points} points)": "{student}：不变（{points} 分）",
    "{student}: updated from {before} to {points} points": (
        "{student}：更新，从 {before} 分变为 {points} 分"
    ),
    "{student}: updated, still {points} points (a score or the note changed)": (
        "{student}：更新，仍是 {points} 分（某项得分或备注变了）"
    ),
    "this run's record: {record}": "这次批改的记录：{record}",
    "{csv} and {feedback}/ written in {s:.0f} s": "已写出 {csv} 和 {feedback}/，用时 {s:.0f} 秒",
    # make homework and make collect (tools/teaching/homework.py), in the hub's language
    "{name} is handed out ({out}): each student opens Lab's menu {menu} > Assignment List, "
    "clicks Fetch, answers in the fetched notebook and clicks Submit; then make collect "
    "LESSON={n}": (
        "{name} 已发布（{out}）：每个学生在 Lab 的菜单 {menu} > Assignment List 里点 Fetch，"
        "在取回的笔记本里作答，再点 Submit。之后运行 make collect LESSON={n}"
    ),
    "{entry}: not a folder (a link?): not collected": "{entry}：不是文件夹（是链接？），未收取",
    "{entry}: names {student} but belongs to {owner}: not collected": (
        "{entry}：署名 {student}，却属于 {owner}，未收取"
    ),
    "{entry}: {student} is no student of this hub: not collected": (
        "{entry}：{student} 不是本 JupyterHub 的学生，未收取"
    ),
    "{entry}: its time {stamp!r} is not a time: not collected": (
        "{entry}：其中的时间 {stamp!r} 不是有效的时间，未收取"
    ),
    "{entry}: no {name}.ipynb of at most {size}: not collected": (
        "{entry}：没有不超过 {size} 的 {name}.ipynb，未收取"
    ),
    "replaced the {count} copies of an earlier collect (every hand-in stays in the exchange's "
    "inbound folder)": (
        "替换了上次收取的 {count} 份副本（所有提交仍保存在交换区的 inbound 文件夹里）"
    ),
    "{count} hand-ins of {name} collected into {folder}": (
        "已把 {name} 的 {count} 份提交收进 {folder}"
    ),
    "no feedback for {student} (no page, or a hand-in without its time)": (
        "{student} 没有反馈（没有反馈页面，或提交里缺少时间）"
    ),
    "feedback of {count} students released: each clicks Fetch Feedback in Lab's Assignment List": (
        "已发还 {count} 个学生的反馈：每人在 Lab 的 Assignment List 里点 Fetch Feedback"
    ),
}


def in_lang(lang: str, template: str, /, **values) -> str:
    """``template`` in ``lang`` (``zh``: its Chinese line where there is one), filled in."""
    return (ZH.get(template, template) if lang == "zh" else template).format(**values)
