"""JupyterLab started the way a learner starts it: ``make lab`` from the shell's own
environment (tools/contract.SHELL_ENVIRON: the test contract's variables are not there, and
PATH is the shell's, without the virtual environment), its files in a temporary folder.
Shared by tests/test_lab.py and tests/test_lab_notebooks.py (``make test-e2e``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tools.harness import contract
from utils.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 180
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # none for 127.0.0.1


class LabNotServing(RuntimeError):
    """`make lab` ended or did not serve in time; the message holds the end of its output."""


@dataclass
class Lab:
    url: str  # printed by `make lab`
    port: int
    token: str
    proc: subprocess.Popen  # make; its child, tools/publishing/lab.py, becomes Jupyter
    runtime: Path  # where the kernels' connection files go

    def api(self, method: str, path: str, body: dict | None = None) -> Any:
        headers = {"Authorization": f"token {self.token}", "Content-Type": "application/json"}
        data = json.dumps(body or {}).encode() if method == "POST" else None
        url = f"http://127.0.0.1:{self.port}/api/{path}"
        req = urllib.request.Request(url, data, headers, method=method)
        with OPENER.open(req, timeout=60) as res:
            return json.loads(res.read() or "null")

    @contextmanager
    def kernel(self, notebook: str | None = None) -> Iterator[Any]:
        """A client of a new kernel of this Lab: as a click on ``notebook`` (a path under
        notebooks/) starts one (a session: the kernel runs in the notebook's folder), or a bare
        kernel. Shut down on exit."""
        from jupyter_client import BlockingKernelClient

        if notebook is None:
            kernel_id, session_id = self.api("POST", "kernels")["id"], None
        else:
            body = {"path": notebook, "type": "notebook", "name": Path(notebook).name}
            session = self.api("POST", "sessions", {**body, "kernel": {"name": "python3"}})
            kernel_id, session_id = session["kernel"]["id"], session["id"]
        connection = self.runtime / f"kernel-{kernel_id}.json"
        client = BlockingKernelClient(connection_file=str(connection))
        client.load_connection_file()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=TIMEOUT_S)
            yield client
        finally:
            client.stop_channels()
            if session_id is not None:
                self.api("DELETE", f"sessions/{session_id}")
            else:
                self.api("DELETE", f"kernels/{kernel_id}")


@contextmanager
def started(
    home: Path, python: Path | None = None, cwd: Path = ROOT, **env_vars: str
) -> Iterator[Lab]:
    """``LAB_TOKEN=... make lab LAB_PORT=...`` in the shell's environment (plus ``env_vars``),
    until the block ends; with ``python``: the README's command without make,
    ``python -m tools.publishing.lab``, in ``cwd`` (an unpacked zip)."""
    # & # % + / mean something in a URL: the printed one must still work (it is encoded)
    port, token = free_port(), secrets.token_urlsafe(24) + "&#%+/"
    env = dict(contract.SHELL_ENVIRON or os.environ, LAB_TOKEN=token, **env_vars)
    env["JUPYTER_CONFIG_DIR"], env["JUPYTER_RUNTIME_DIR"] = str(home / "config"), str(home / "rt")
    if python is None:
        # `make lab` as the README has it, never reinstalling (-o: the stamp is up to date).
        argv = [shutil.which("make") or "make", "-o", ".venv/.installed", "lab"]
        argv += [f"LAB_PORT={port}", f"BIN={Path(sys.executable).parent}"]  # this environment
    else:
        argv, env["LAB_PORT"] = [str(python), "-m", "tools.publishing.lab"], str(port)
    home.mkdir(parents=True, exist_ok=True)
    log = home / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/lab?token={quote(token, safe='')}"
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while url not in (text := log.read_text()) or "Jupyter Server" not in text:
            if proc.poll() is not None or time.monotonic() > deadline:
                shown = " ".join(argv[:3])
                raise LabNotServing(f"`{shown}` (exit code {proc.poll()}):\n{text[-3000:]}")
            time.sleep(0.5)
        yield Lab(url, port, token, proc, home / "rt")
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # make and Jupyter, then what is left
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


def run_cell(client: Any, code: str, timeout_s: float) -> tuple[dict, list[str]]:
    """Execute ``code`` as a notebook cell: the reply's content, and the error outputs
    (tracebacks) it printed."""
    errors: list[str] = []

    def collect(msg: dict) -> None:
        if msg["msg_type"] == "error":
            errors.append("\n".join(msg["content"]["traceback"]))

    reply = client.execute_interactive(code, timeout=timeout_s, output_hook=collect)
    return reply["content"], errors
