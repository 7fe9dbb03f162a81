"""Homework through nbgrader's exchange (tools/teaching/homework.py), without a hub: the
folders and settings make hub writes for it, and the rules by which make collect takes a
hand-in (the end-to-end run, in Lab, is tests/test_hub.py's)."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from tools.teaching import classroom, homework

STAMP = "2026-11-29 04:22:43.649013 UTC"
LATER = "2026-11-29 05:00:00.000000 UTC"


def _settings(tmp_path: Path) -> classroom.Settings:
    srv = tmp_path / "srv"
    srv.mkdir(mode=0o755)
    return classroom.settings({"HUB_SRV": str(srv), "HUB_LESSONS": str(tmp_path)})


@pytest.mark.skipif(os.geteuid() != 0, reason="the hub's folders are root's")
def test_make_hub_writes_the_exchange_and_the_students_settings(tmp_path) -> None:
    s = _settings(tmp_path)
    homework.prepare_hub(s, "zh")
    folders = homework.exchange_folders(s, "zh")
    modes = {k: p.stat().st_mode & 0o7777 for k, (p, _) in folders.items()}
    want = {"root": 0o1777, "course": 0o755, "outbound": 0o755, "inbound": 0o3733}
    assert modes == want | {"feedback": 0o711}
    assert homework.class_lang(s) == "zh"
    conf = s.jupyter_dir
    server = json.loads((conf / "jupyter_server_config.json").read_text())
    assert not any(server["ServerApp"]["jpserver_extensions"].values())  # the teacher's tools off
    page = json.loads((conf / "labconfig" / "page_config.json").read_text())
    assert page["disabledExtensions"]["@jupyter/nbgrader"] is False
    assert page["disabledExtensions"]["@jupyter/nbgrader:formgrader"] is True
    menu = json.loads((conf / "lab-settings" / "overrides.json").read_text())
    assert "作业" in json.dumps(menu, ensure_ascii=False)
    assert (conf / "labextensions" / "@jupyter" / "nbgrader" / "package.json").is_file()
    env = classroom.student_environment(s)
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(conf)  # first: it re-enables
    homework.prepare_hub(s, "zh")  # a second start finds its own folders


@pytest.mark.skipif(os.geteuid() != 0, reason="the hub's folders are root's")
def test_a_course_folder_a_student_made_first_is_refused(tmp_path) -> None:
    s = _settings(tmp_path)
    nobody = pwd.getpwnam("nobody")
    course = s.exchange_dir / "pytorch-blitz-en"
    course.mkdir(parents=True)
    os.chmod(s.exchange_dir, 0o1777)
    os.chown(course, nobody.pw_uid, nobody.pw_gid)  # made by a student before the hub
    with pytest.raises(homework.HomeworkError, match="not a root-owned folder"):
        homework.prepare_hub(s, "en")


@pytest.mark.skipif(os.geteuid() != 0, reason="the hub's folders are root's")
def test_homework_goes_only_through_the_folders_the_hub_made(tmp_path) -> None:
    s = _settings(tmp_path)
    homework.prepare_hub(s, "en")
    folders = homework.exchange_folders(s, "en")
    assert set(homework._check_exchange(s, "en")) == set(folders)
    inbound = folders["inbound"][0]
    nobody = pwd.getpwnam("nobody")
    os.chown(inbound, nobody.pw_uid, nobody.pw_gid)  # taken over since the hub started
    with pytest.raises(homework.HomeworkError, match="not a root-owned folder"):
        homework._check_exchange(s, "en")
    inbound.rmdir()
    with pytest.raises(homework.HomeworkError, match="is missing: make hub makes it"):
        homework._check_exchange(s, "en")
    assert not inbound.exists()  # checked, never made here


def test_without_a_hub_make_homework_says_start_it_first(tmp_path) -> None:
    with pytest.raises(homework.HomeworkError, match="start the class's hub first"):
        homework.class_lang(_settings(tmp_path))


def _hand_in(inbound: Path, name: str, owner: pwd.struct_passwd | None) -> Path:
    folder = inbound / name
    folder.mkdir()
    (folder / "01_tensors.ipynb").write_text("{}")
    if owner is not None:
        for path in (folder, folder / "01_tensors.ipynb"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    return folder


@pytest.mark.skipif(os.geteuid() != 0, reason="hand-ins of other owners need chown")
def test_collect_takes_each_students_latest_own_hand_in_and_refuses_the_rest(tmp_path) -> None:
    """A hand-in counts when it is a folder (no link) owned by the student it names, a student
    of the hub; nbgrader's own collect would take the forged one, the latest of bob's."""
    nobody = pwd.getpwnam("nobody")
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    _hand_in(inbound, f"nobody+01_tensors+{STAMP}+a1", nobody)
    latest = _hand_in(inbound, f"nobody+01_tensors+{LATER}+a2", nobody)
    _hand_in(inbound, f"bob+01_tensors+{LATER}+forged", nobody)  # nobody hands in as bob
    _hand_in(inbound, f"root+01_tensors+{STAMP}+r", None)  # root's: no student of the hub
    _hand_in(inbound, f"nobody+02_autograd+{LATER}+b", nobody)  # another lesson: not asked
    (inbound / "nobody+01_tensors+2027-01-01 00:00:00.000000 UTC+l").symlink_to(latest)
    got, refused = homework.hand_ins(inbound, "01_tensors", {"nobody", "bob"})
    assert {k: v[1] for k, v in got.items()} == {"nobody": latest}
    assert len(refused) == 3, refused
    assert any("names bob but belongs to nobody: not collected" in r for r in refused)
    assert any("root is no student of this hub" in r for r in refused)
    assert any("not a folder (a link?)" in r for r in refused)
    _, refused = homework.hand_ins(inbound, "01_tensors", {"nobody", "bob"}, "zh")  # a zh class
    assert any("署名 bob，却属于 nobody，未收取" in r for r in refused), refused


@pytest.mark.skipif(os.geteuid() != 0, reason="files of other owners need chown")
def test_a_file_in_a_hand_in_is_read_only_when_its_student_owns_it(tmp_path) -> None:
    """nbgrader leaves a hand-in's folder writable by all: a file another put there (or a
    link) is not read."""
    nobody = pwd.getpwnam("nobody")
    folder = _hand_in(tmp_path, "x", nobody)
    (folder / "timestamp.txt").write_text(STAMP)  # root's, not the student's
    (folder / "link.txt").symlink_to(folder / "01_tensors.ipynb")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert homework._read_small(fd, "01_tensors.ipynb", 100, nobody.pw_uid) == b"{}"
        assert homework._read_small(fd, "timestamp.txt", 100, nobody.pw_uid) is None
        assert homework._read_small(fd, "link.txt", 100, nobody.pw_uid) is None
        assert homework._read_small(fd, "01_tensors.ipynb", 1, nobody.pw_uid) is None  # too big
    finally:
        os.close(fd)
