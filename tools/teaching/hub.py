"""``make hub``: JupyterHub for a class (tools/teaching/jupyterhub_config.py), on
127.0.0.1:``HUB_PORT`` (default 8000) unless ``HUB_IP`` opens it.

Checks what would otherwise fail later and obscurely (root, ports, the proxy, files the
students must read), prepares the root-owned folder ``HUB_SRV`` (default /srv/blitz: the hub's
private state, the shared read-only CIFAR-10 subset, the git setting that lets students pull
the teacher's clone), prints the link to hand out, then becomes JupyterHub (exec)."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

from tools.teaching import classroom

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


def _prepare(s: classroom.Settings) -> list[str]:
    """HUB_SRV's folders and files, root-owned; what was done, as lines to print."""
    done = []
    if not s.srv.exists():
        s.srv.mkdir(mode=0o755, parents=True)
        done.append(f"made {s.srv} for the hub's files")
    for folder, mode in ((s.state_dir, 0o700), (s.data_dir, 0o755)):
        folder.mkdir(exist_ok=True)  # the hub's own folders: root's, whatever they were
        os.chown(folder, 0, 0)
        os.chmod(folder, mode)  # state: the database and secrets; data: students only read
    s.gitconfig.write_text(classroom.gitconfig_text(s))
    os.chmod(s.gitconfig, 0o644)
    given = os.environ.get("BLITZ_CIFAR10_SUBSET", "").strip()
    shared = s.data_dir / classroom.SUBSET_NAME
    if given and Path(given).is_file():
        if not shared.is_file() or Path(given).read_bytes() != shared.read_bytes():
            tmp = shared.with_suffix(".tmp")
            shutil.copyfile(given, tmp)
            os.chmod(tmp, 0o444)
            os.replace(tmp, shared)
            done.append(f"copied the CIFAR-10 subset {given} to {shared} (read-only)")
    if shared.is_file():
        done.append(f"notebook 04 reads the shared subset {shared} (BLITZ_CIFAR10_SUBSET)")
    else:
        done.append(
            f"no subset at {shared}: each student's notebook 04 downloads CIFAR-10 (170 MB). "
            "Give it once: BLITZ_CIFAR10_SUBSET=/path/to/cifar10-subset.npz make hub"
        )
    return done


def main() -> None:
    try:
        s = classroom.settings()
    except classroom.SettingError as err:
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
    for path, what in ((classroom.VENV_PYTHON, "the venv"), (s.lessons, "the lessons")):
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
    print(
        f"make hub: JupyterHub at {s.url} (the teacher: sign up as {s.teacher!r} first)", flush=True
    )
    print(f"make hub: students' link: {s.link()}", flush=True)
    argv = [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)]
    os.chdir(classroom.ROOT)  # the config imports tools.teaching from here
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
