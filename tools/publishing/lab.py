"""``make lab``: JupyterLab on ``notebooks/`` at 127.0.0.1:``LAB_PORT`` (default 8888).

A taken or forbidden port is said in one line first. The token stays in the environment
(``ps`` shows any command line): ``LAB_TOKEN`` becomes ``JUPYTER_TOKEN``, and the URL is
printed with it (Jupyter shows ``...``). Then this process becomes Jupyter (exec)."""

from __future__ import annotations

import errno
import os
import socket
import sys
from pathlib import Path
from urllib.parse import quote

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NEVER_CHECK = "jupyterlab.NeverCheckForUpdate"
# Lab's defaults for a classroom (a user's own settings win): no Jupyter news prompt, and
# → / ← in a RISE slideshow step through cells as in a deck (Lab binds them to "next heading"
# in a notebook, and RISE's slideshow is one: it skipped the code). Lab and RISE's app read
# them from here as <config dir>/labconfig/default_setting_overrides.json
# (jupyterlab_server.settings_utils._get_overrides) once this folder is on
# JUPYTER_CONFIG_PATH: nothing is written anywhere, so nothing outside the project changes
# (JUPYTERLAB_DIR may be a user's global Lab) and nothing is left behind.
CONFIG_DIR = Path(__file__).resolve().parent / "lab_settings"
DEFAULTS = CONFIG_DIR / "labconfig" / "default_setting_overrides.json"
# nbgrader (the teacher's grader, tools/teaching/) comes with a Lab extension: its panels
# (assignments, formgrader, course list) stay out of a learner's Lab (labconfig/page_config.json).


def config_path(environ: dict[str, str]) -> str:
    """JUPYTER_CONFIG_PATH with CONFIG_DIR first (the user's own config dir still wins)."""
    given = [p for p in environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    return os.pathsep.join([str(CONFIG_DIR), *(p for p in given if p != str(CONFIG_DIR))])


def main() -> None:
    raw = os.environ.get("LAB_PORT", "").strip() or "8888"
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        sys.exit(f"make lab: LAB_PORT={raw!r} is not a port number (1-65535)")
    port = int(raw)
    try:  # bound as Jupyter binds (SO_REUSEADDR): a port in TIME_WAIT counts as free
        socket.create_server(("127.0.0.1", port)).close()
    except OSError as err:
        token = "LAB_TOKEN=... " if os.environ.get("LAB_TOKEN", "").strip() else ""
        if err.errno == errno.EADDRINUSE:
            sys.exit(
                f"make lab: port {port} on 127.0.0.1 is already in use (another JupyterLab?). "
                f"Stop that program or choose another port: {token}LAB_PORT={port + 1} make lab"
            )
        if err.errno in (errno.EACCES, errno.EPERM) and port < 1024:
            sys.exit(
                f"make lab: port {port} is privileged (below 1024): only root may open it. "
                f"Choose a port from 1024 up: {token}LAB_PORT=8888 make lab"
            )
        other = 8888 if port != 8888 else 8890
        sys.exit(  # not "in use": blocked by a policy, no loopback interface, ...
            f"make lab: cannot open port {port} on 127.0.0.1: {err.strerror}. "
            f"Try another port ({token}LAB_PORT={other} make lab) or ask your administrator"
        )
    env = {name: value for name, value in os.environ.items() if name != "JUPYTER_TOKEN"}
    env["JUPYTER_CONFIG_PATH"] = config_path(env)
    if token := os.environ.get("LAB_TOKEN", "").strip():
        env["JUPYTER_TOKEN"] = token
        url = f"http://127.0.0.1:{port}/lab?token={quote(token, safe='')}"  # & # + % / ...
        print(f"make lab: JupyterLab at {url}", flush=True)
    # This interpreter's JupyterLab, whatever PATH holds and whether or not its scripts
    # (bin/jupyter, Scripts\jupyter.exe) exist: its kernels then run this Python too.
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    argv += ["--ServerApp.port_retries=0", f"--ServerApp.root_dir={NOTEBOOKS_DIR}"]
    # Classrooms are often offline, and nothing should leave the machine anyway (the news
    # prompt itself comes from Lab's announcements plugin, which only DEFAULTS silences).
    argv += ["--LabApp.news_url=None", f"--LabApp.check_for_updates_class={NEVER_CHECK}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # Jupyter refuses to run as root without it
    os.execve(sys.executable, argv, env)


if __name__ == "__main__":
    main()
