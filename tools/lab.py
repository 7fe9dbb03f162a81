"""``make lab``: JupyterLab on ``notebooks/``, the one definition of how it starts.

Listens on 127.0.0.1 only, with a token that stays out of the process list (it reaches
Jupyter through the ``JUPYTER_TOKEN`` environment variable, which jupyter_server's
``IdentityProvider.token`` defaults to and other users cannot read, unlike the command
line that ``ps`` shows to everyone). Nothing leaves the machine: no news feed, no update
check. A taken port is an error, never a silent move to another port, and the URL is
printed only once Jupyter answers on it with that token. The tests start Lab through
:func:`main` too (``python -m tools.lab``, what ``make lab`` runs).

    LAB_PORT=8890 LAB_TOKEN=secret python -m tools.lab
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
DEFAULT_PORT = 8888
# A first start on a slow laptop (cold disk cache, extensions) takes tens of seconds.
START_TIMEOUT_S = 300
# What the tests look for in the output: the line that carries the served URL.
URL_PREFIX = "JupyterLab is serving at "
# No proxy for 127.0.0.1, whatever the environment says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def lab_command(port: int, root_dir: Path = NOTEBOOKS_DIR) -> list[str]:
    """The ``jupyter lab`` argv: no token in it (see :func:`lab_env`)."""
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [
        str(jupyter), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        "--ServerApp.port_retries=0",  # a taken port fails instead of moving elsewhere
        f"--ServerApp.root_dir={root_dir}",
        # Classrooms are often offline, and nothing should leave the machine anyway.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # Jupyter refuses to run as root without it
    return cmd


def lab_env(token: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment that hands Jupyter its token (``JUPYTER_TOKEN``)."""
    return {**(os.environ if base is None else base), "JUPYTER_TOKEN": token}


def port_is_free(port: int) -> bool:
    """Whether Jupyter could listen on 127.0.0.1:``port`` now."""
    with socket.socket() as s:
        # As tornado binds: a port whose last connection lingers in TIME_WAIT is usable.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def lab_url(port: int, token: str) -> str:
    return f"http://127.0.0.1:{port}/lab?token={token}"


def is_serving(port: int, token: str) -> bool:
    """True when a Jupyter server on ``port`` accepts ``token`` (so it is ours)."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"}
    )
    try:
        with _OPENER.open(req, timeout=5) as res:
            return res.status == 200
    except OSError:  # refused, reset, or an HTTP error status (HTTPError is one too)
        return False


def wait_until_serving(
    proc: subprocess.Popen, port: int, token: str, timeout_s: float = START_TIMEOUT_S
) -> bool:
    """Poll until Jupyter serves on ``port``; False once it exited or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        if is_serving(port, token):
            return True
        time.sleep(0.25)
    return False


def _taken(port: int) -> str:
    return (
        f"make lab: port {port} on 127.0.0.1 is already in use (another JupyterLab?). "
        f"Stop that program or choose another port: make lab LAB_PORT={port + 1}"
    )


def _stop(proc: subprocess.Popen) -> int:
    """Ask Jupyter to shut down (SIGTERM: it stops its kernels), then insist."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def main() -> int:
    raw = os.environ.get("LAB_PORT", "").strip() or str(DEFAULT_PORT)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        print(f"make lab: LAB_PORT={raw!r} is not a port number (1-65535)", file=sys.stderr)
        return 2
    port = int(raw)
    if not port_is_free(port):
        print(_taken(port), file=sys.stderr)
        return 2
    token = os.environ.get("LAB_TOKEN", "").strip() or secrets.token_urlsafe(24)
    proc = subprocess.Popen(lab_command(port), env=lab_env(token), cwd=ROOT)
    # Ctrl-C reaches Jupyter too (same process group), which asks to confirm or stops on a
    # second one; this launcher waits for it. SIGTERM (kill, CI) is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    if wait_until_serving(proc, port, token):
        print(f"\n{URL_PREFIX}{lab_url(port, token)}\n", flush=True)
        return proc.wait()
    if proc.poll() is None:
        print(f"make lab: Jupyter did not answer on port {port} within {START_TIMEOUT_S} s; "
              "stopping it (its messages are above)", file=sys.stderr)  # fmt: skip
        _stop(proc)
        return 1
    # Exited before serving: most likely another program took the port in the meantime.
    reason = _taken(port) if not port_is_free(port) else "see its messages above"
    print(f"make lab: JupyterLab exited with {proc.returncode}; {reason}", file=sys.stderr)
    return proc.returncode or 1


if __name__ == "__main__":
    sys.exit(main())
