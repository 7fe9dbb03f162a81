"""``make hub``'s decisions without a hub (tools/teaching/classroom.py): the link a teacher
hands out, the fair-share rules, and a bad ``HUB_*`` value or an unusable set-up answered with
one line before anything starts. The hub itself: tests/test_hub.py (make test-e2e)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tools.teaching import classroom

ROOT = Path(__file__).resolve().parents[1]


def test_the_link_pulls_the_teachers_clone_and_opens_notebook_01(tmp_path: Path) -> None:
    clone = tmp_path / "pytorch-blitz"
    s = classroom.settings({"HUB_LESSONS": str(clone), "HUB_PORT": "8123"})
    link = urlsplit(s.link())
    assert (link.scheme, link.netloc) == ("http", "127.0.0.1:8123")
    assert link.path == "/hub/user-redirect/git-pull"
    query = parse_qs(link.query)
    assert query == {
        "repo": [clone.as_uri()],
        "urlpath": ["lab/tree/pytorch-blitz/notebooks/01_tensors.ipynb"],
        "branch": ["main"],
    }
    # a teacher's host replaces the address the hub listens on
    assert s.link(host="https://class.example.org").startswith("https://class.example.org/hub/")


def test_threads_and_servers_follow_the_documented_rules(monkeypatch) -> None:
    monkeypatch.setattr(classroom, "cores", lambda: 16)
    monkeypatch.setattr(classroom, "mem_total", lambda: 64 * classroom.GIB)
    s = classroom.settings({"HUB_CLASS_SIZE": "40"})
    assert s.active_limit == 40  # (64 - 2) GiB / 1 GiB = 62 servers fit, the class is 40
    assert s.threads == 1  # 16 cores // 40
    s = classroom.settings({"HUB_CLASS_SIZE": "4"})
    assert (s.active_limit, s.threads) == (4, 4)
    monkeypatch.setattr(classroom, "mem_total", lambda: 8 * classroom.GIB)
    s = classroom.settings({"HUB_CLASS_SIZE": "40", "HUB_MEM_PER_STUDENT": "1.5G"})
    assert s.active_limit == 4  # (8 - 2) / 1.5: memory, not the class, limits
    assert s.spawn_limit == 32


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"HUB_PORT": "80000"}, "HUB_PORT='80000' is not a whole number from 1 to 65535"),
        ({"HUB_MEM_LIMIT": "lots"}, "HUB_MEM_LIMIT='lots' is not a size"),
        ({"HUB_MEM_LIMIT": "1G", "HUB_MEM_PER_STUDENT": "2G"}, "is above HUB_MEM_LIMIT"),
        ({"HUB_AUTHENTICATOR": "pam"}, "is neither native"),
        ({"HUB_AUTHENTICATOR": "dummy", "HUB_IP": "0.0.0.0"}, "refused on HUB_IP=0.0.0.0"),
        ({"HUB_TEACHER": "root"}, "not a login name the hub may create"),
        ({"HUB_SSL_CERT": "/x.pem"}, "give both HUB_SSL_CERT and HUB_SSL_KEY"),
    ],
)
def test_a_bad_setting_is_one_line(environ: dict, says: str) -> None:
    with pytest.raises(classroom.SettingError) as err:
        classroom.settings(environ)
    assert says in str(err.value) and "\n" not in str(err.value)
    # make hub prints that line and nothing else (no traceback)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")} | environ
    run = subprocess.run(
        [sys.executable, "-m", "tools.teaching.hub"], cwd=ROOT, env=env, capture_output=True
    )
    assert run.returncode == 1 and run.stdout == b""
    assert run.stderr.decode().strip() == str(err.value)


def test_the_hub_signs_in_only_its_own_accounts_and_the_teacher() -> None:
    assert not classroom.is_student_or_teacher("root", "teacher")  # never root's files
    assert classroom.is_student_or_teacher("teacher", "teacher")
    assert classroom.is_student_or_teacher("nobody-has-this-name-x9", "teacher")  # made at sign-in


def test_students_get_the_shared_data_their_threads_and_the_venv(tmp_path: Path) -> None:
    s = classroom.settings({"HUB_SRV": str(tmp_path)})
    assert "BLITZ_CIFAR10_SUBSET" not in classroom.student_environment(s)  # nothing shared yet
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / classroom.SUBSET_NAME).write_bytes(b"")
    env = classroom.student_environment(s)
    assert env["BLITZ_CIFAR10_SUBSET"] == str(tmp_path / "data" / classroom.SUBSET_NAME)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == str(s.threads)
    assert env["PATH"].split(":")[0] == str(classroom.VENV_PYTHON.parent)
    assert env["GIT_CONFIG_GLOBAL"] == str(tmp_path / "gitconfig")
    assert f"directory = {s.lessons / '.git'}" in classroom.gitconfig_text(s)
