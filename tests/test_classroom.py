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
        # issue 46, cases 5, 7, 15, 16
        ({"HUB_IP": "0.0.0.0"}, "HUB_IP=0.0.0.0 without TLS would send passwords in clear"),
        ({"HUB_SSL_CERT": "/nonexistent/c.pem", "HUB_SSL_KEY": "/nonexistent/k.pem"},
         "HUB_SSL_CERT=/nonexistent/c.pem is not a file"),
        ({"HUB_MEM_PER_STUDENT": "0"}, "HUB_MEM_PER_STUDENT='0' must be more than 0"),
        ({"HUB_MEM_LIMIT": "1024T"}, "is above this machine's memory"),
        ({"HUB_PORT": "65535"}, "HUB_PORT=65535 leaves no room for the hub's own ports"),
        ({"HUB_SRV": "/etc/passwd"}, "HUB_SRV=/etc/passwd is not a folder"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line(environ: dict, says: str) -> None:
    with pytest.raises(classroom.SettingError) as err:
        classroom.settings(environ)
    assert says in str(err.value) and "\n" not in str(err.value)


# Each case above is refused by classroom.settings, which make hub calls first: two of them
# started as make hub starts, a fresh Python each.
@pytest.mark.parametrize(
    "environ", [{"HUB_PORT": "80000"}, {"HUB_SRV": "/etc/passwd"}], ids=["port", "srv"]
)
def test_make_hub_says_a_bad_setting_in_its_one_line_and_nothing_else(environ: dict) -> None:
    with pytest.raises(classroom.SettingError) as err:
        classroom.settings(environ)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")} | environ
    run = subprocess.run(
        [sys.executable, "-m", "tools.teaching.hub"], cwd=ROOT, env=env, capture_output=True
    )
    assert run.returncode == 1 and run.stdout == b""
    assert run.stderr.decode().strip() == str(err.value)


def test_an_open_hub_needs_tls_or_a_proxy_that_says_it_terminates_tls(tmp_path) -> None:
    (tmp_path / "c.pem").write_text("x")
    (tmp_path / "k.pem").write_text("x")
    tls = {"HUB_SSL_CERT": str(tmp_path / "c.pem"), "HUB_SSL_KEY": str(tmp_path / "k.pem")}
    assert classroom.settings({"HUB_IP": "0.0.0.0", **tls}).url.startswith("https://")
    assert classroom.settings({"HUB_IP": "0.0.0.0", classroom.TLS_PROXY_ENV: "1"}).ip == "0.0.0.0"
    assert classroom.settings({"HUB_PORT": "65533"}).proxy_api_port == 65535


def test_an_account_in_the_group_that_this_hub_did_not_make_is_refused(
    tmp_path: Path, monkeypatch
) -> None:
    # Issue 46, case 6: another hub's or term's student (in blitz-students) got a server in
    # its existing home; only the accounts this hub recorded are served.
    import grp
    from types import SimpleNamespace

    monkeypatch.setattr(classroom.pwd, "getpwnam", lambda name: SimpleNamespace(pw_gid=4242))
    group = SimpleNamespace(gr_mem=["oldterm"], gr_gid=4242)
    monkeypatch.setattr(grp, "getgrnam", lambda name: group)
    s = classroom.settings({"HUB_SRV": str(tmp_path)})
    (tmp_path / "hub").mkdir()
    assert classroom.made_accounts(s) == set()
    assert not classroom.is_student_or_teacher("oldterm", "teacher", classroom.made_accounts(s))
    classroom.record_account(s, "oldterm")
    assert classroom.made_accounts(s) == {"oldterm"}
    assert classroom.is_student_or_teacher("oldterm", "teacher", classroom.made_accounts(s))
    assert oct((tmp_path / "hub" / classroom.ACCOUNTS_FILE).stat().st_mode & 0o777) == "0o600"


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


# --- HUB_SRV and the published subset (tools/teaching/hub.py's _prepare) ------------------


def _prepared(srv: Path, monkeypatch, subset: str = "") -> list[str]:
    from tools.teaching import hub

    monkeypatch.setenv("BLITZ_CIFAR10_SUBSET", subset)
    return hub._prepare(classroom.settings({"HUB_SRV": str(srv)}))


def test_an_existing_folder_the_hub_did_not_make_is_refused_and_left_alone(
    tmp_path: Path, monkeypatch
) -> None:
    # Issue 46, case 7: HUB_SRV naming a general folder: its gitconfig overwritten, its data/
    # and hub/ (another owner's, 0700) re-owned to root.
    srv = tmp_path / "general"
    (srv / "data").mkdir(parents=True)
    os.chown(srv / "data", 4321, 4321)
    os.chmod(srv / "data", 0o700)
    (srv / "gitconfig").write_text("someone's settings\n")
    with pytest.raises(SystemExit) as info:
        _prepared(srv, monkeypatch)
    assert "exists and make hub did not make it" in str(info.value)
    assert (srv / "gitconfig").read_text() == "someone's settings\n"
    st = (srv / "data").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (4321, 0o700) and not (srv / "hub").exists()
    # a folder the hub makes is its own: made, marked, and used again on the next start
    fresh = tmp_path / "fresh" / "srv"
    assert f"made {fresh} for the hub's files" in _prepared(fresh, monkeypatch)
    assert (fresh / classroom.SRV_MARK).is_file()
    assert (fresh / "hub").stat().st_mode & 0o777 == 0o700
    _prepared(fresh, monkeypatch)
    os.chown(fresh / "hub", 4321, 4321)  # then someone else's: refused, never re-owned
    with pytest.raises(SystemExit, match="does not re-own it"):
        _prepared(fresh, monkeypatch)
    assert (fresh / "hub").stat().st_uid == 4321


def test_only_a_file_with_the_subsets_checksum_is_published(tmp_path: Path, monkeypatch) -> None:
    # Issue 46, cases 4 and 17: a root-only file of anything was copied for every student to
    # read; a missing one was never named; a corrupt one was "copied" without a check.
    import hashlib

    from utils import data

    secret = tmp_path / "secret"
    secret.write_bytes(b"root's private key\n")
    secret.chmod(0o600)
    srv = tmp_path / "srv"
    shared = srv / "data" / classroom.SUBSET_NAME
    with pytest.raises(SystemExit, match=r"has sha256 .* not the CIFAR-10 subset's: nothing"):
        _prepared(srv, monkeypatch, str(secret))
    assert not shared.exists()
    with pytest.raises(SystemExit, match=f"BLITZ_CIFAR10_SUBSET={tmp_path}/gone.npz is not a"):
        _prepared(srv, monkeypatch, str(tmp_path / "gone.npz"))
    good = tmp_path / "good.npz"
    good.write_bytes(b"stands for the subset")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    monkeypatch.setattr(data, "SUBSET_SHA256", digest)
    said = _prepared(srv, monkeypatch, str(good))
    assert f"published {good} to {shared} (21 bytes, sha256 {digest}, read-only)" in said
    assert shared.read_bytes() == good.read_bytes() and shared.stat().st_mode & 0o777 == 0o444


def _class_cgroups(name: str) -> classroom.Cgroups:
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    groups, line = classroom.class_cgroups(name, 2 * classroom.GIB)
    if groups is None:
        pytest.skip(line)
    return groups


def test_stopping_a_student_ends_detached_processes_and_removes_the_folders() -> None:
    """Issue 47 items 5 and 11: `setsid nohup sleep 900 &` and a detached Python outlived the
    server; the cgroup folders stayed after the hub."""
    groups = _class_cgroups(f"blitz-test-{os.getpid()}")
    try:
        server = subprocess.Popen(["sleep", "60"])
        groups.confine("alice", server.pid, 256 * 1024**2)
        script = (
            "setsid nohup sleep 900 >/dev/null 2>&1 & "
            "setsid python3 -c 'import time; time.sleep(900)' >/dev/null 2>&1 & sleep 0.5"
        )
        helper = subprocess.Popen(
            ["sh", "-c", f"echo $$ > {groups.folders('alice')[0]}/cgroup.procs; {script}"]
        )
        helper.wait(10)
        assert len(groups.processes("alice")) >= 3  # the server, sleep 900, the Python
        server.kill()  # the spawner stops the server's own process; the rest stays
        server.wait()
        assert len(groups.processes("alice")) >= 2
        groups.release("alice")
        assert not any(folder.exists() for folder in groups.folders("alice"))
    finally:
        groups.remove()
    assert not groups.base.exists() and not any(o.exists() for o in groups.others)


def test_a_student_cannot_start_more_processes_than_the_pids_limit() -> None:
    groups = _class_cgroups(f"blitz-test-{os.getpid()}")
    if not any((f / "pids.max").exists() for f in [groups.base, *groups.others]):
        pytest.skip("no pids controller")
    try:
        shell = subprocess.Popen(["sleep", "60"])
        groups.confine("mallory", shell.pid, 256 * 1024**2, pids=50)
        join = "; ".join(f"echo $$ > {f}/cgroup.procs" for f in groups.folders("mallory"))
        out = subprocess.run(  # 500 `setsid sleep 60`: those past the limit fail to fork
            ["sh", "-c", f"{join}; for i in $(seq 500); do setsid sleep 60 >/dev/null 2>&1 & done"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
        started = len(groups.processes("mallory"))
        assert 10 < started <= 50, out.stderr[-500:]
    finally:
        groups.remove()


def test_the_teacher_sees_each_students_disk_in_home_tmp_and_hand_ins(
    tmp_path: Path, monkeypatch
) -> None:
    """Issue 47 item 5: alice wrote 2 GiB to ~ and 2 GiB to /tmp; no quota on this filesystem,
    so `make hub-disk` shows who uses what (hand-ins in the homework exchange too)."""
    import pwd
    from types import SimpleNamespace

    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    (tmp / "x").mkdir(parents=True)
    (home / "big").write_bytes(b"1" * 3 * 1024**2)
    (tmp / "x" / "alice.bin").write_bytes(b"2" * 5 * 1024**2)
    (tmp / "other").write_bytes(b"3" * 1024**2)  # root's: not counted
    os.chown(tmp / "x" / "alice.bin", 54321, 54321)
    monkeypatch.setattr(
        pwd, "getpwnam", lambda name: SimpleNamespace(pw_uid=54321, pw_dir=str(home))
    )
    exchange = tmp_path / "exchange"
    (exchange / "inbound" / "alice+01_tensors+2026").mkdir(parents=True)
    handed_in = exchange / "inbound" / "alice+01_tensors+2026" / "01_tensors.ipynb"
    handed_in.write_bytes(b"4" * 2 * 1024**2)
    os.chown(handed_in, 54321, 54321)
    [(name, in_home, in_tmp, in_exchange)] = classroom.disk_usage(
        {"alice"}, tmp=tmp, exchange=exchange
    )
    assert name == "alice"
    assert 3 * 1024**2 <= in_home < 4 * 1024**2
    assert 5 * 1024**2 <= in_tmp < 6 * 1024**2
    assert 2 * 1024**2 <= in_exchange < 3 * 1024**2  # every hand-in is kept there
