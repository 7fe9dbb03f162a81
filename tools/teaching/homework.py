"""Homework on the hub through nbgrader's exchange: ``make homework`` hands a lesson's
assignment out, students fetch and submit it in Lab's Assignments panel (nbgrader's Lab
extension), ``make collect`` collects the hand-ins, grades them (tools/teaching/grade.py) and
hands the feedback back, which students fetch in the same panel.

The exchange is nbgrader's default one, in the hub's folder (``HUB_SRV/exchange``), one course
per class: the hub's language (``COURSE_LANG`` when ``make hub`` started) picks it. ``make hub``
makes the exchange's folders (root's, before any student could) and the settings every
student's server reads (:func:`prepare_hub`).

nbgrader's own ``collect`` takes the student's name from the hand-in folder's name and only
warns when the folder belongs to someone else, so a student could hand in as another (its
``check_owner``). ``collect`` here reads the inbound folder by two rules instead: a hand-in
counts only when it is a real folder (no link) owned by the student it names, a student this
hub made; and every file is read without following links, within a size bound, into the
teacher's private course folder. What it refuses, it says, one line each."""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import stat
import sys
from pathlib import Path

from tools.owned import private_folder, replace_file, root_folder, write_refusal
from tools.teaching import classroom
from tools.teaching.assignments import (
    LANGS,
    OUT,
    ROOT,
    AssignmentError,
    LessonError,
    course_id,
    failure,
    lesson_for,
    nbgrader,
)
from tools.teaching.words import in_lang

# nbgrader's server extensions and Lab plugins a student does not use: the teacher's tools
# (formgrader, creating assignments), and the course list and validate button (the checks in
# the notebook answer already). nbgrader's menu goes too (it lists the disabled tools as blank
# entries): a menu of our own, from Lab's settings, opens the Assignment List.
TEACHERS_SERVER_EXTENSIONS = (
    "nbgrader.server_extensions.formgrader",
    "nbgrader.server_extensions.course_list",
    "nbgrader.server_extensions.validate_assignment",
)
TEACHERS_PLUGINS = tuple(
    f"@jupyter/nbgrader:{p}"
    for p in ("formgrader", "course-list", "create-assignment", "validate-assignment", "menu")
)
MENU_LABEL = {"en": "Homework", "zh": "作业"}
LAB_EXTENSION = "@jupyter/nbgrader"
NBGRADER_CONFIG = "nbgrader_config.py"  # in the hub's jupyter folder: every student's nbgrader
SMALL = 4096  # timestamp.txt and submission_secret.txt: a line each
COLLECTED = Path("build/homework")  # hand-ins as collected: the teacher's alone (0700)


class HomeworkError(ValueError):
    """What stops make homework or make collect; the message is the line to print."""


def _hub_folder(path: Path, mode: int) -> None:
    """``path`` made root's with ``mode`` (in a folder the hub made), or refused: a student
    may have made it first."""
    if problem := root_folder(path, mode):
        raise HomeworkError(
            f"{problem} (made by someone else?); nothing is written through it. Remove it and "
            "start make hub again"
        )


def exchange_folders(s: classroom.Settings, lang: str) -> dict[str, tuple[Path, int]]:
    """The exchange's folders and their modes, nbgrader's own: the root anyone may write (it
    checks that; sticky, so no one moves another's entry), the course's outbound (read by all),
    inbound (written by all, listed by none; sticky) and feedback (entered, never listed)."""
    course = s.exchange_dir / course_id(lang)
    return {
        "root": (s.exchange_dir, 0o1777),
        "course": (course, 0o755),
        "outbound": (course / "outbound", 0o755),
        "inbound": (course / "inbound", 0o3733),
        "feedback": (course / "feedback", 0o711),
    }


def prepare_hub(s: classroom.Settings, lang: str) -> list[str]:
    """The exchange's folders, and the settings every student's server reads
    (``JUPYTER_CONFIG_PATH``): where the exchange is and which course, nbgrader's Lab
    extension with the Assignments panel only. What was done, as lines to print."""
    for path, mode in exchange_folders(s, lang).values():
        _hub_folder(path, mode)
    conf = s.jupyter_dir
    _hub_folder(conf, 0o755)
    _hub_folder(conf / "labconfig", 0o755)
    _hub_folder(conf / "labextensions", 0o755)
    _hub_folder(conf / "lab-settings", 0o755)
    _hub_folder(conf / "labextensions" / LAB_EXTENSION.split("/")[0], 0o755)
    # nbgrader looks for a .py (it warns on every action without one); the values as JSON
    # strings are Python string literals
    replace_file(
        conf / NBGRADER_CONFIG,
        "# make hub (tools/teaching/homework.py): the class's homework course and exchange\n"
        "c = get_config()  # noqa: F821\n"
        f"c.Exchange.root = {json.dumps(str(s.exchange_dir))}\n"
        f"c.CourseDirectory.course_id = {json.dumps(course_id(lang))}\n",
    )
    server = {
        "ServerApp": {"jpserver_extensions": dict.fromkeys(TEACHERS_SERVER_EXTENSIONS, False)},
        "LabApp": {
            "extra_labextensions_path": [str(conf / "labextensions")],
            "app_settings_dir": str(conf / "lab-settings"),  # overrides.json: the menu
        },
    }
    menu = {
        "id": "jp-mainmenu-homework",
        "label": MENU_LABEL[lang],
        "rank": 85,  # after Kernel, before Tabs
        "items": [{"command": "nbgrader:open-assignment-list"}],
    }
    overrides = {"@jupyterlab/mainmenu-extension:plugin": {"menus": [menu]}}
    text = json.dumps(overrides, indent=1, ensure_ascii=False) + "\n"
    replace_file(conf / "lab-settings" / "overrides.json", text)
    replace_file(conf / "jupyter_server_config.json", json.dumps(server, indent=1) + "\n")
    # make lab's settings (later on the path) disable the whole extension: on here, but for
    # the teacher's plugins
    page = {"disabledExtensions": {LAB_EXTENSION: False} | dict.fromkeys(TEACHERS_PLUGINS, True)}
    replace_file(conf / "labconfig" / "page_config.json", json.dumps(page, indent=1) + "\n")
    # the Lab extension as nbgrader ships it (make venv keeps it out of a learner's own Lab)
    import nbgrader

    shipped = Path(nbgrader.__file__).parent / "labextension"
    link = conf / "labextensions" / LAB_EXTENSION
    tmp = link.with_name(".nbgrader.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(shipped, target_is_directory=True)
    os.replace(tmp, link)
    course = course_id(lang)
    return [f"homework exchange {s.exchange_dir}, course {course} (make homework LESSON=01)"]


def class_lang(s: classroom.Settings) -> str:
    """The language of the hub's course, from the settings make hub wrote."""
    conf = s.jupyter_dir / NBGRADER_CONFIG
    try:
        text = conf.read_text(encoding="utf-8")
        given = re.search(r'^c\.CourseDirectory\.course_id = "([^"]*)"$', text, re.M)[1]
    except (OSError, ValueError, TypeError):
        raise HomeworkError(
            f"no hub settings at {conf}: start the class's hub first (make hub, with the same "
            "HUB_SRV), then hand out homework"
        ) from None
    for lang in LANGS:
        if course_id(lang) == given:
            return lang
    raise HomeworkError(f"{conf} names the course {given!r}, none of this project's")


def _check_exchange(s: classroom.Settings, lang: str) -> dict[str, Path]:
    found = {}
    for key, (path, mode) in exchange_folders(s, lang).items():
        if problem := root_folder(path, mode, make=False):
            raise HomeworkError(
                f"{problem}: make hub makes it (start make hub first); nothing handed out or "
                "collected through it"
            )
        found[key] = path
    return found


def release(number: str) -> int:
    """``make homework``: the lesson's assignment, into the exchange's outbound folder."""
    from tools.teaching import assignments

    s = classroom.settings()
    lang = class_lang(s)
    folders = _check_exchange(s, lang)
    name = lesson_for(number, lang).stem
    if assignments.main([number, "--lang", lang]) != 0:
        return 2
    course = OUT / lang
    root = f"--Exchange.root={s.exchange_dir}"
    done = nbgrader(course, "release_assignment", name, "--force", root)
    if done.returncode != 0:
        raise HomeworkError(f"nbgrader release_assignment: {failure(done)}")
    out = folders["outbound"] / name / f"{name}.ipynb"
    said = in_lang(
        lang,
        "{name} is handed out ({out}): each student opens Lab's menu {menu} > Assignment List, "
        "clicks Fetch, answers in the fetched notebook and clicks Submit; then make collect "
        "LESSON={n}",
        name=name, out=out, menu=MENU_LABEL[lang], n=number,
    )  # fmt: skip
    print(f"homework: {said}")
    return 0


def _read_small(folder: int, name: str, limit: int, owner: int) -> bytes | None:
    """The bytes of ``name`` in the open folder ``folder``: a plain file of ``owner``'s of at
    most ``limit`` bytes, opened without following a link; None otherwise (nbgrader leaves a
    hand-in's folder writable by all: only its unguessable name hides it)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != owner or st.st_size > limit:
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def hand_ins(
    inbound: Path, name: str, students: set[str], lang: str = "en"
) -> tuple[dict, list[str]]:
    """The latest hand-in of ``name`` by each of ``students`` in nbgrader's ``inbound``
    folder, as {student: (timestamp, folder)}, and a line for each hand-in refused."""
    from nbgrader.utils import parse_utc

    latest, refused = {}, []
    for entry in sorted(os.scandir(inbound), key=lambda e: e.name):
        parts = entry.name.split("+")
        if len(parts) not in (3, 4) or parts[1] != name:
            continue
        student, stamp = parts[0], parts[2]
        st = entry.stat(follow_symlinks=False)
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        if not stat.S_ISDIR(st.st_mode):
            refused.append(
                in_lang(lang, "{entry}: not a folder (a link?): not collected", entry=entry.name)
            )
        elif owner != student:
            refused.append(
                in_lang(lang, "{entry}: names {student} but belongs to {owner}: not collected",
                        entry=entry.name, student=student, owner=owner)
            )  # fmt: skip
        elif student not in students:
            refused.append(
                in_lang(lang, "{entry}: {student} is no student of this hub: not collected",
                        entry=entry.name, student=student)
            )  # fmt: skip
        else:
            try:
                when = parse_utc(stamp)
            except (ValueError, OverflowError):
                refused.append(
                    in_lang(lang, "{entry}: its time {stamp!r} is not a time: not collected",
                            entry=entry.name, stamp=stamp)
                )  # fmt: skip
                continue
            if student not in latest or when > latest[student][0]:
                latest[student] = (when, Path(entry.path))
    return latest, refused


def collect(number: str, grade_args: list[str], max_mb: float) -> int:
    """``make collect``: the latest hand-in of each student, graded; the feedback released."""
    from tools.teaching import grade

    s = classroom.settings()
    lang = class_lang(s)
    folders = _check_exchange(s, lang)
    name = lesson_for(number, lang).stem
    students = classroom.made_accounts(s) - {s.teacher}
    latest, refused = hand_ins(folders["inbound"], name, students, lang)
    for line in refused:
        print(f"collect: {line}")
    collected = ROOT / COLLECTED / lang / name
    course = OUT / lang
    for base, rel in ((ROOT, COLLECTED / lang / name), (ROOT, Path("build/assignments"))):
        if problem := write_refusal(base, [rel]):
            raise HomeworkError(problem)
    private_folder(ROOT / COLLECTED)
    private_folder(collected)
    earlier = sorted(collected.glob("*.ipynb"))  # an earlier collect's copies: replaced
    for old in earlier:
        old.unlink()
    if earlier:
        said = in_lang(lang, "replaced the {count} copies of an earlier collect (every hand-in "
                       "stays in the exchange's inbound folder)", count=len(earlier))  # fmt: skip
        print(f"collect: {said}")
    kept = {}
    for student, (_, folder) in sorted(latest.items()):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        uid = pwd.getpwnam(student).pw_uid
        try:
            notebook = _read_small(fd, f"{name}.ipynb", int(max_mb * 2**20), uid)
            stamp = _read_small(fd, "timestamp.txt", SMALL, uid)
            secret = _read_small(fd, "submission_secret.txt", SMALL, uid)
        finally:
            os.close(fd)
        if notebook is None:
            size = f"{max_mb:g} MB"
            said = in_lang(lang, "{entry}: no {name}.ipynb of at most {size}: not collected",
                           entry=folder.name, name=name, size=size)  # fmt: skip
            print(f"collect: {said}")
            continue
        (collected / f"{student}.ipynb").write_bytes(notebook)
        kept[student] = (stamp, secret)
    said = in_lang(lang, "{count} hand-ins of {name} collected into {folder}",
                   count=len(kept), name=name, folder=collected)  # fmt: skip
    print(f"collect: {said}")
    if not kept:
        return 0
    argv = ["--lesson", number, "--submissions", str(collected), "--lang", lang, *grade_args]
    if grade.main(argv) != 0:
        return 2
    out = _out_folder(grade_args) or ROOT / "build" / "grades" / (
        name + ("" if lang == "en" else f"-{lang}")
    )
    return _release_feedback(s, course, name, out / "feedback", kept, lang)


def _out_folder(grade_args: list[str]) -> Path | None:
    for i, arg in enumerate(grade_args):
        if arg == "--out" and i + 1 < len(grade_args):
            return Path(grade_args[i + 1])
        if arg.startswith("--out="):
            return Path(arg.split("=", 1)[1])
    return None


def _release_feedback(s, course: Path, name: str, pages: Path, kept: dict, lang: str) -> int:
    """Each student's feedback page where nbgrader's release_feedback finds it, beside the
    hand-in's time and secret (its name in the exchange is a hash of that secret: only the
    student who handed in finds it)."""
    released = 0
    for student, (stamp, secret) in sorted(kept.items()):
        page = pages / f"{student}.html"
        if stamp is None or secret is None or not page.is_file() or page.is_symlink():
            said = in_lang(lang, "no feedback for {student} (no page, or a hand-in without "
                           "its time)", student=student)  # fmt: skip
            print(f"collect: {said}")
            continue
        rel = Path("feedback") / student / name
        if problem := write_refusal(course, [rel / f"{name}.html"]):
            raise HomeworkError(problem)
        folder = course / rel
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.html").write_bytes(page.read_bytes())
        (folder / "timestamp.txt").write_bytes(stamp)
        (folder / "submission_secret.txt").write_bytes(secret)
        released += 1
    done = nbgrader(course, "release_feedback", name, f"--Exchange.root={s.exchange_dir}")
    if done.returncode != 0:
        raise HomeworkError(f"nbgrader release_feedback: {failure(done)}")
    said = in_lang(
        lang,
        "feedback of {count} students released: each clicks Fetch Feedback in Lab's "
        "Assignment List",
        count=released,
    )
    print(f"collect: {said}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    out = sub.add_parser("release", help="hand a lesson's homework out (make homework)")
    out.add_argument("--lesson", required=True, metavar="NN")
    back = sub.add_parser("collect", help="collect, grade, release feedback (make collect)")
    back.add_argument("--lesson", required=True, metavar="NN")
    back.add_argument("--max-mb", type=float, default=20, metavar="MB")
    args, rest = parser.parse_known_args(argv)
    if args.step == "release" and rest:
        parser.error(f"unknown arguments: {' '.join(rest)}")
    if os.geteuid() != 0:
        print("homework: run it as root, as make hub (the exchange is the hub's)", file=sys.stderr)
        return 2
    try:
        if args.step == "release":
            return release(args.lesson)
        return collect(args.lesson, [*rest, "--max-mb", str(args.max_mb)], args.max_mb)
    except (HomeworkError, LessonError, AssignmentError, classroom.SettingError) as err:
        print(f"{'homework' if args.step == 'release' else 'collect'}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
