"""JupyterLab smoke test: the server `make lab` starts, its REST API, a kernel, and the UI.

One `jupyter lab` (the project venv's) runs for the whole module on 127.0.0.1, a free port
and a random token, with its config and runtime files in a temporary folder; it is shut
down through the API (then terminated, then killed) whatever the tests' outcome. The
screenshot of the notebook in Lab goes to ``build/lab/``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from tests.browser import free_port, launch_chromium

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
START_TIMEOUT_S = 120
KERNEL_TIMEOUT_S = 180
# No proxy for 127.0.0.1, whatever the environment says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Lab:
    url: str
    token: str
    proc: subprocess.Popen
    log: Path

    def api(self, method: str, path: str, body: dict | None = None, token: bool = True):
        """(status, parsed JSON or None) for one REST call."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"token {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with _OPENER.open(req, timeout=30) as res:
                raw = res.read()
                return res.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as err:
            return err.code, None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _notebooks() -> list[Path]:
    return sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _stop(lab: Lab) -> None:
    """Shut the server down: politely through the API, then SIGTERM, then SIGKILL."""
    if lab.proc.poll() is None:
        try:
            lab.api("POST", "api/shutdown")
        except OSError:
            pass
    for signal_step in (None, lab.proc.terminate, lab.proc.kill):
        if signal_step is not None:
            signal_step()
        try:
            lab.proc.wait(timeout=20)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not _notebooks():
        pytest.fail(f"no notebooks in {NOTEBOOKS_DIR}: nothing for JupyterLab to list")
    jupyter = Path(sys.executable).with_name("jupyter")
    assert jupyter.exists(), f"{jupyter} is missing: run `make venv`"
    home = tmp_path_factory.mktemp("lab")
    port, token = free_port(), secrets.token_urlsafe(24)
    cmd = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",  # fail on a taken port rather than move elsewhere
        f"--ServerApp.root_dir={NOTEBOOKS_DIR}",
        f"--IdentityProvider.token={token}",
        # Nothing may leave the machine: no news feed, no update check.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(home / "config"),  # settings and workspaces start fresh
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
    )
    log = home / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}/", token, proc, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                if server.api("GET", "api/status")[0] == 200:
                    break
            except OSError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab not up after {START_TIMEOUT_S} s:\n{server.log_tail()}")
            time.sleep(0.5)
        yield server
    finally:
        _stop(server)


def test_contents_api_lists_the_notebooks(lab: Lab) -> None:
    status, listing = lab.api("GET", "api/contents?content=1")
    assert status == 200, lab.log_tail()
    listed = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
    expected = {p.name for p in _notebooks()}
    assert expected <= listed, f"missing from Lab: {sorted(expected - listed)}"


@pytest.mark.parametrize("path", ["api/contents", "api/kernels", "api/sessions"])
def test_requests_without_the_token_are_refused(lab: Lab, path: str) -> None:
    status, body = lab.api("GET", path, token=False)
    assert status in (401, 403), f"GET /{path} without a token answered {status}: {body}"
    wrong = Lab(lab.url, "not-the-token", lab.proc, lab.log)
    assert wrong.api("GET", path)[0] in (401, 403), f"GET /{path} accepted a wrong token"


def _execute(lab: Lab, kernel_id: str, code: str) -> tuple[str, list[dict]]:
    """Run `code` over the kernel's websocket; return (stdout, error messages)."""
    import websocket  # websocket-client, a JupyterLab dependency

    ws = websocket.create_connection(
        lab.url.replace("http", "ws", 1) + f"api/kernels/{kernel_id}/channels",
        header=[f"Authorization: token {lab.token}"],
        timeout=KERNEL_TIMEOUT_S,
    )
    try:
        msg_id = uuid.uuid4().hex
        ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "test",
                        "session": uuid.uuid4().hex,
                        "version": "5.3",
                        "date": "",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": False,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        stdout, errors = [], []
        deadline = time.monotonic() + KERNEL_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream" and msg["content"]["name"] == "stdout":
                stdout.append(msg["content"]["text"])
            elif kind == "error":
                errors.append(msg["content"])
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(stdout), errors
        pytest.fail(f"the kernel did not finish within {KERNEL_TIMEOUT_S} s")
    finally:
        ws.close()


def test_a_kernel_imports_utils_and_summarises_the_device(lab: Lab) -> None:
    status, kernel = lab.api("POST", "api/kernels", {"name": "python3"})
    assert status == 201, f"starting a kernel answered {status}:\n{lab.log_tail()}"
    try:
        out, errors = _execute(lab, kernel["id"], "import utils\nprint(utils.device_summary())")
    finally:
        lab.api("DELETE", f"api/kernels/{kernel['id']}")
    assert not errors, f"the kernel raised: {errors}"
    assert re.match(r"PyTorch \d+\.\d+", out), f"unexpected summary:\n{out}"
    assert re.search(r"^selected device: (cpu|cuda|mps)$", out, re.M), out


def test_a_notebook_opens_in_chromium(lab: Lab) -> None:
    """Lab renders the first notebook's cells and its kernel reaches idle."""
    path = _notebooks()[0]
    nb = nbformat.read(path, as_version=4)
    title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
    offsite: list[str] = []
    with launch_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on(
            "request",
            lambda req: (
                None if req.url.startswith((lab.url, "data:", "blob:")) else offsite.append(req.url)
            ),
        )
        page.goto(f"{lab.url}lab/tree/{path.name}?token={lab.token}")
        panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
        page.wait_for_selector(f"{panel} .jp-Cell", timeout=120_000)
        page.wait_for_function(
            """([panel, n]) => document.querySelectorAll(panel + ' .jp-Cell').length >= n""",
            arg=[panel, len(nb.cells)],
            timeout=60_000,
        )
        page.wait_for_selector(
            f'{panel} .jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=120_000
        )
        heading = page.inner_text(f"{panel} .jp-Cell .jp-RenderedMarkdown h1")
        # Not in build/site: the site tests rebuild (and so empty) that folder.
        shots = ROOT / "build" / "lab"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"{path.stem}-in-lab.png"))
        page.close()
    assert title in heading, f"first cell rendered as {heading!r}"
    status, sessions = lab.api("GET", "api/sessions")
    states = {s["path"]: s["kernel"]["execution_state"] for s in sessions or []}
    assert states.get(path.name) == "idle", f"sessions: {states}"
    assert not offsite, f"Lab requested other hosts: {offsite[:5]}"
