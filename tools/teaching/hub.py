"""``make hub``: JupyterHub for a class (tools/teaching/jupyterhub_config.py), on
127.0.0.1:``HUB_PORT`` (default 8000) unless ``HUB_IP`` opens it.

Checks what would otherwise fail later and obscurely (root, ports, the proxy, files the
students must read), prepares the root-owned folder ``HUB_SRV`` (default /srv/blitz: the hub's
private state, the shared read-only CIFAR-10 subset, the git setting that lets students pull
the teacher's clone, nbgrader's homework exchange and the students' servers' settings for it:
tools/teaching/homework.py), then runs JupyterHub and, once it runs, prints the links to hand out
(English and Chinese, tools/teaching/links.py) after its start-up log and writes them to the
state folder."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

from tools import owned as hub_owned
from tools.teaching import classcopy, classroom, homework, hubsite, links

CONFIG = Path(__file__).resolve().parent / "jupyterhub_config.py"


def _fail(line: str) -> None:
    sys.exit(line)


def _check_port(ip: str, port: int, what: str) -> None:
    try:
        socket.create_server((ip, port)).close()
    except OSError as err:
        name = what.split("=")[0]
        if err.errno == errno.EADDRINUSE:
            _fail(
                f"make hub: port {port} on {ip} ({what}) is already in use (another hub?); "
                f"stop that program or choose another port: {name}={port + 10} make hub"
            )
        _fail(f"make hub: cannot open port {port} on {ip} ({what}): {err.strerror}")


def _readable_by_all(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (or the file itself) that other users cannot
    open or read, or None."""
    for part in [*reversed(path.parents), path]:
        mode = part.stat().st_mode
        need = stat.S_IXOTH if part.is_dir() else stat.S_IROTH
        if not mode & need:
            return part
    return None


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:  # streamed: the bytes are hashed, never held
        return hashlib.file_digest(f, "sha256").hexdigest()


def _own_folder(folder: Path, mode: int, what: str) -> None:
    """``folder`` made root's with ``mode``, or, when there, refused unless it already is:
    the hub never re-owns or re-modes a folder (someone else's files would change hands)."""
    if problem := hub_owned.root_folder(folder, mode):
        _fail(
            f"make hub: {problem} ({what}); the hub does not re-own it. Name a new HUB_SRV "
            "(the hub makes it)"
        )


def _publish_subset(given: str, shared: Path) -> list[str]:
    """Copy the file ``given`` (BLITZ_CIFAR10_SUBSET) to ``shared``, readable by every student,
    only when its checksum is the CIFAR-10 subset's (a root-only file of anything else would
    otherwise be published); what was done, as lines to print."""
    from utils.data import SUBSET_SHA256  # here: only a hub given a subset needs it

    source = Path(given).expanduser()
    if not hub_owned.is_regular(source):
        _fail(f"make hub: BLITZ_CIFAR10_SUBSET={given} is not a file; name cifar10-subset.npz")
    if (digest := _sha256(source)) != SUBSET_SHA256:
        _fail(
            f"make hub: BLITZ_CIFAR10_SUBSET={given} has sha256 {digest}, not the CIFAR-10 "
            "subset's: nothing published. Name a good cifar10-subset.npz (DATA.md)"
        )
    if hub_owned.is_regular(shared) and _sha256(shared) == SUBSET_SHA256:
        return [_say("already_published", shared=shared)]
    tmp = shared.with_name(f".{shared.name}.tmp")
    with open(source, "rb") as src, open(tmp, "xb") as dst:
        shutil.copyfileobj(src, dst)
    os.chmod(tmp, 0o444)
    os.replace(tmp, shared)
    size = shared.stat().st_size
    return [_say("published", given=given, shared=shared, size=size, digest=digest)]


def _prepare(s: classroom.Settings) -> list[str]:
    """HUB_SRV's folders and files, root-owned, in a folder the hub made; what was done, as
    lines to print."""
    done = []
    mark = s.srv / classroom.SRV_MARK
    if not s.srv.exists():
        s.srv.mkdir(mode=0o755, parents=True)
        os.chmod(s.srv, 0o755)
        mark.write_text("HUB_SRV: made by make hub (tools/teaching/hub.py)\n")
        done.append(_say("made_srv", srv=s.srv))
    elif not hub_owned.is_regular(mark):
        _fail(
            f"make hub: HUB_SRV={s.srv} exists and make hub did not make it (no {mark.name}): "
            "the hub writes only in a folder of its own. Name a new folder: HUB_SRV=/srv/blitz"
        )
    _own_folder(s.srv, 0o755, "HUB_SRV")
    _own_folder(s.state_dir, 0o700, "the hub's state: database and secrets")
    _own_folder(s.data_dir, 0o755, "the shared data: students only read")
    _own_folder(s.kernel_socket.parent, 0o755, "the kernel fork server's socket")
    hub_owned.replace_file(s.gitconfig, classroom.gitconfig_text(s))  # never through a link
    given = os.environ.get("BLITZ_CIFAR10_SUBSET", "").strip()
    shared = s.data_dir / classroom.SUBSET_NAME
    if given:
        done += _publish_subset(given, shared)
    if shared.is_file():
        done.append(_say("shared_subset", shared=shared))
    else:
        done.append(_say("no_subset", shared=shared))
    try:  # nbgrader's exchange and the students' servers' settings
        done += homework.prepare_hub(s, links.course_lang())
    except homework.HomeworkError as err:
        _fail(f"make hub: {err}")
    if s.course == "graded":
        _own_folder(s.class_dir, 0o755, "the class copies: students pull them")
        done += _class_copy(s)
    else:
        done.append(_say("practice", lessons=s.lessons))
    return done


def _class_copy(s: classroom.Settings) -> list[str]:
    """The graded course's class copy made or updated, then the teacher's copies closed to
    students (tools/teaching/classcopy.py); what was done."""
    try:
        done = classcopy.build(s.lessons, s.branch, s.class_dir)
    except (classcopy.CopyError, OSError, ValueError) as err:
        _fail(f"make hub: the class copy without the solutions cannot be made: {err}")
    return done + classcopy.close_course(classroom.ROOT, s.lessons)


def lessons_main() -> None:
    """``make hub-lessons``: the teacher's latest commit handed to a graded class (its class
    copy updated); the students get it at their next click on the link."""
    try:
        s = classroom.settings()
    except classroom.SettingError as err:
        _fail(str(err))
    if os.geteuid() != 0:
        _fail("make hub-lessons: run it as root (sudo), as make hub")
    if s.course != "graded":
        _fail(
            f"make hub-lessons: HUB_COURSE is {s.course}: the link pulls {s.lessons} itself, so "
            "a commit there reaches students at their next click. For a graded course, run "
            "make hub and make hub-lessons with HUB_COURSE=graded"
        )
    if not hub_owned.is_regular(s.srv / classroom.SRV_MARK) or hub_owned.root_folder(
        s.class_dir, 0o755, make=False
    ):
        _fail(f"make hub-lessons: no class copy in HUB_SRV={s.srv}: start make hub first")
    for line in _class_copy(s):
        print(f"make hub-lessons: {line}", flush=True)


def main() -> None:
    try:
        s = classroom.settings()
        hubsite.check_domain(s)
    except (classroom.SettingError, hubsite.DomainError) as err:
        _fail(str(err))
    if os.geteuid() != 0:
        _fail(
            "make hub: run it as root (sudo make hub): the hub creates a Unix account for each "
            "student and starts their server as that account"
        )
    if s.authenticator == "dummy" and not os.environ.get("HUB_DUMMY_PASSWORD"):
        _fail("make hub: HUB_AUTHENTICATOR=dummy needs HUB_DUMMY_PASSWORD (tests only)")
    if not classroom.PROXY.exists():
        _fail(
            f"make hub: no configurable-http-proxy at {classroom.PROXY}; "
            "`make hub` installs it with npm (Node.js 20 or newer)"
        )
    # the venv's interpreter is often a link into a folder only its owner opens (pyenv in ~)
    base = Path(os.path.realpath(classroom.VENV_PYTHON))
    if (closed := _readable_by_all(base) or _readable_by_all(Path(sys.base_prefix))) is not None:
        _fail(
            f"make hub: students cannot run the venv's Python {base}: {closed} is closed to "
            "other users. Make the venv from a Python every user can run: make clean, then "
            "PYTHON=/usr/bin/python3.11 make hub"
        )
    # the students pull the teacher's clone itself (git reads its .git), or its class copy
    git_dir = s.lessons / ".git" if (s.lessons / ".git").exists() else s.lessons
    pulled = [(git_dir, "the lessons")] if s.course == "practice" else []
    for path, what in ((classroom.VENV_PYTHON, "the venv"), *pulled):
        if (closed := _readable_by_all(path)) is not None:
            _fail(
                f"make hub: students cannot reach {what} at {path}: {closed} is closed to "
                f"other users. Put the checkout where all may read it (e.g. /srv) or chmod o+rx "
                f"{closed}"
            )
    git = ["git", "-C", str(s.lessons)]
    if subprocess.run(
        [*git, "rev-parse", "--verify", "--quiet", f"refs/heads/{s.branch}"], capture_output=True
    ).returncode:
        _fail(
            f"make hub: the lessons' clone {s.lessons} has no branch {s.branch!r} for the link; "
            f"name one it has: HUB_BRANCH=... (or HUB_LESSONS=/path/to/another/clone)"
        )
    for port, name in (
        (s.port, "HUB_PORT"),
        (s.hub_port, "HUB_INTERNAL_PORT"),
        (s.proxy_api_port, "HUB_PROXY_API_PORT"),
    ):
        _check_port(s.ip if name == "HUB_PORT" else "127.0.0.1", port, f"{name}={port}")
    classroom.ensure_students_group()
    for line in _prepare(s) + classroom.capacity_lines(s):
        print(f"make hub: {line}", flush=True)
    lang = links.course_lang()
    print(f"make hub: {_say('own_sites' if hubsite.domain() else 'one_origin')}", flush=True)
    class_links = links.class_links(s)
    files = links.write(s, class_links)
    closing = links.block(s, class_links, files, lang)
    os.chdir(classroom.ROOT)  # the config imports tools.teaching from here
    try:
        code = _run_hub([sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)], closing)
    finally:  # the students' processes and cgroup folders do not outlive the hub
        classroom.remove_class_cgroups(classroom.class_cgroup_name(s))
    sys.exit(code)


# make hub's own lines in the teacher's language (COURSE_LANG=zh: Chinese); its refusals
# (_fail) stay English for now
_SAY = {
    "en": {
        "one_origin": (
            "students' servers share the hub's web origin: the teacher cannot open them (set "
            "HUB_DOMAIN, e.g. HUB_DOMAIN=localhost on this machine, to give each its own site "
            "and the teacher access)"
        ),
        "own_sites": (
            "each student's server is a site of its own (<name>.HUB_DOMAIN); the teacher may "
            "open them"
        ),
        "made_srv": "made {srv} for the hub's files",
        "already_published": (
            "the CIFAR-10 subset at {shared} is already published (sha256 checked)"
        ),
        "published": "published {given} to {shared} ({size:,} bytes, sha256 {digest}, read-only)",
        "shared_subset": "notebook 04 reads the shared subset {shared} (BLITZ_CIFAR10_SUBSET)",
        "no_subset": (
            "no subset at {shared}: each student's notebook 04 downloads CIFAR-10 (170 MB). "
            "Give it once: BLITZ_CIFAR10_SUBSET=/path/to/cifar10-subset.npz make hub"
        ),
        "practice": (
            "the link hands out {lessons} as it is, the solutions included (HUB_COURSE=graded "
            "hands out a copy without them)"
        ),
    },
    "zh": {
        "one_origin": (
            "学生的服务器与 JupyterHub 同源：教师不能打开学生的服务器（设置 HUB_DOMAIN，"
            "例如本机用 HUB_DOMAIN=localhost，可让每个学生有自己的站点，教师即可打开）"
        ),
        "own_sites": "每个学生的服务器是独立站点（<name>.HUB_DOMAIN）；教师可以打开",
        "made_srv": "已创建 {srv}，存放 JupyterHub 的文件",
        "already_published": "CIFAR-10 子集 {shared} 已发布（sha256 已核对）",
        "published": "已将 {given} 发布到 {shared}（{size:,} 字节，sha256 {digest}，只读）",
        "shared_subset": "notebook 04 读取共享子集 {shared}（BLITZ_CIFAR10_SUBSET）",
        "no_subset": (
            "{shared} 处没有子集：每个学生的 notebook 04 都会下载 CIFAR-10（170 MB）。"
            "只需提供一次：BLITZ_CIFAR10_SUBSET=/path/to/cifar10-subset.npz make hub"
        ),
        "practice": (
            "链接按原样发放 {lessons}，含参考答案（HUB_COURSE=graded 则发放不含参考答案的副本）"
        ),
    },
}


def _say(key: str, **values) -> str:
    """One of make hub's own lines, in COURSE_LANG's language."""
    return _SAY[links.course_lang()][key].format(**values)


READY = b"JupyterHub is now running"  # JupyterHub's own line once the proxy routes to it


def _run_hub(argv: list[str], closing: list[str]) -> int:
    """JupyterHub as a child whose output passes through; once it says it runs, the links
    (``closing``) are printed after its start-up log, where a teacher looks. Ctrl-C reaches
    JupyterHub (same process group), which stops the students' servers; a TERM sent to this
    process alone is passed on. JupyterHub's exit code is returned."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # Ctrl-C: the child has it too and stops cleanly; TERM: passed on
    before = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    try:
        out = sys.stdout.buffer
        shown = False
        for line in iter(child.stdout.readline, b""):
            out.write(line)
            if not shown and READY in line:
                out.write("".join(f"{x}\n" for x in closing).encode())
                shown = True
            out.flush()
        return child.wait()
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


if __name__ == "__main__":
    lessons_main() if sys.argv[1:] == ["lessons"] else main()
