"""``make lab``: JupyterLab on ``notebooks/``, the one definition of how it starts.

Listens on 127.0.0.1 only, with a token that stays out of the process list (it reaches
Jupyter through the ``JUPYTER_TOKEN`` environment variable, which other users cannot read,
unlike the command line that ``ps`` shows to everyone). Nothing leaves the machine: no
news feed, no update check. A taken port is an error, never a silent move to another port.
The tests start Lab through :func:`lab_command` and :func:`lab_env` too.

    LAB_PORT=8890 LAB_TOKEN=secret python -m tools.lab
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
DEFAULT_PORT = 8888


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
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def main() -> int:
    raw = os.environ.get("LAB_PORT", "").strip() or str(DEFAULT_PORT)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        print(f"make lab: LAB_PORT={raw!r} is not a port number (1-65535)", file=sys.stderr)
        return 2
    port = int(raw)
    if not port_is_free(port):
        print(
            f"make lab: port {port} on 127.0.0.1 is already in use (another JupyterLab?). "
            f"Stop that program or choose another port: make lab LAB_PORT={port + 1}",
            file=sys.stderr,
        )
        return 2
    token = os.environ.get("LAB_TOKEN", "").strip() or secrets.token_urlsafe(24)
    print(f"JupyterLab: http://127.0.0.1:{port}/lab?token={token}", flush=True)
    try:
        return subprocess.run(lab_command(port), env=lab_env(token), cwd=ROOT).returncode
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
