"""JupyterLab as `make lab` starts it (``python -m tools.lab``): its REST API, a kernel, the UI.

One Lab runs for the module on 127.0.0.1, a free port and a random token, with its config
and runtime files in a temporary folder; it is shut down through the API (then
terminated, then killed) whatever the tests' outcome. The screenshot of the notebook in
Lab goes to ``build/lab/``. The launcher's usage errors are checked without starting Lab.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

import tools.lab
from tests.browser import launch_chromium
from tests.conftest import NOTEBOOKS, NOTEBOOKS_DIR, ROOT, free_port
from tools.lab import URL_PREFIX, lab_command

START_TIMEOUT_S = 180
KERNEL_TIMEOUT_S = 180
LAUNCHER = [sys.executable, "-m", "tools.lab"]  # what `make lab` runs
# No proxy for 127.0.0.1, whatever the environment says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Lab:
    url: str
    token: str
    proc: subprocess.Popen  # the launcher; Jupyter is its child
    log: Path
    runtime: Path

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


def _descendants(pid: int) -> list[int]:
    """The process ids below ``pid`` (Linux /proc), children first."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in path.read_text().split()] if path.exists() else []
    return kids + [d for k in kids for d in _descendants(k)]


def _stop(lab: Lab, pids: list[int]) -> None:
    """Shut the server down: through the API, then SIGTERM, then SIGKILL (stragglers too)."""
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
            break
        except subprocess.TimeoutExpired:
            continue
    for pid in pids:  # Jupyter, should the launcher have died without stopping it
        try:
            os.kill(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not NOTEBOOKS:
        pytest.fail(f"no notebooks in {NOTEBOOKS_DIR}: nothing for JupyterLab to list")
    jupyter = lab_command(8888)[0]
    assert Path(jupyter).exists(), f"{jupyter} is missing: run `make venv`"
    home = tmp_path_factory.mktemp("lab")
    port, token = free_port(), secrets.token_urlsafe(24)
    env = dict(
        os.environ,
        LAB_PORT=str(port),
        LAB_TOKEN=token,
        JUPYTER_CONFIG_DIR=str(home / "config"),  # settings and workspaces start fresh
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),  # where kernels' connection files go
    )
    log = home / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(LAUNCHER, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Lab(f"http://127.0.0.1:{port}/", token, proc, log, home / "runtime")
    pids: list[int] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (printed := re.search(re.escape(URL_PREFIX) + r"(\S+)", server.log_tail())):
            if proc.poll() is not None:
                pytest.fail(f"`make lab` exited with {proc.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no URL after {START_TIMEOUT_S} s:\n{server.log_tail()}")
            time.sleep(0.5)
        pids = _descendants(proc.pid)
        # The URL printed is the one asked for, with the token asked for.
        assert printed[1] == f"{server.url}lab?token={token}", server.log_tail()
        yield server
    finally:
        _stop(server, pids)


@pytest.mark.slow
def test_contents_api_lists_the_notebooks(lab: Lab) -> None:
    status, listing = lab.api("GET", "api/contents?content=1")
    assert status == 200, lab.log_tail()
    listed = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
    expected = {p.name for p in NOTEBOOKS}
    assert expected <= listed, f"missing from Lab: {sorted(expected - listed)}"


@pytest.mark.slow
def test_the_printed_url_opens_lab(lab: Lab) -> None:
    with _OPENER.open(f"{lab.url}lab?token={lab.token}", timeout=30) as res:
        assert res.status == 200
        assert b"JupyterLab" in res.read()


@pytest.mark.slow
@pytest.mark.parametrize("path", ["api/contents", "api/kernels", "api/sessions"])
def test_the_api_needs_the_token(lab: Lab, path: str) -> None:
    assert lab.api("GET", path)[0] == 200, lab.log_tail()
    status, body = lab.api("GET", path, token=False)
    assert status == 403, f"GET /{path} without a token answered {status}: {body}"
    wrong = Lab(lab.url, "not-the-token", lab.proc, lab.log, lab.runtime)
    assert wrong.api("GET", path)[0] == 403, f"GET /{path} accepted a wrong token"


def _execute(lab: Lab, kernel_id: str, code: str) -> tuple[str, list[dict]]:
    """Run `code` in the server's kernel through jupyter_client; (stdout, error messages)."""
    from jupyter_client import BlockingKernelClient

    connection = lab.runtime / f"kernel-{kernel_id}.json"
    assert connection.is_file(), f"no connection file {connection}: {list(lab.runtime.iterdir())}"
    client = BlockingKernelClient(connection_file=str(connection))
    client.load_connection_file()
    client.start_channels()
    stdout: list[str] = []
    errors: list[dict] = []

    def on_output(msg: dict) -> None:
        kind = msg["header"]["msg_type"]
        if kind == "stream" and msg["content"]["name"] == "stdout":
            stdout.append(msg["content"]["text"])
        elif kind == "error":
            errors.append(msg["content"])

    try:
        client.wait_for_ready(timeout=KERNEL_TIMEOUT_S)
        reply = client.execute_interactive(
            code, timeout=KERNEL_TIMEOUT_S, output_hook=on_output, allow_stdin=False
        )
    finally:
        client.stop_channels()
    assert reply["content"]["status"] in ("ok", "error"), reply
    return "".join(stdout), errors


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_notebook_opens_in_chromium(lab: Lab) -> None:
    """Lab renders the first notebook's cells and its kernel reaches idle."""
    path = NOTEBOOKS[0]
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


@pytest.mark.slow
def test_the_token_is_not_on_any_command_line(lab: Lab) -> None:
    """Any local user can read a command line (ps); the token travels in the environment."""
    pids = [lab.proc.pid, *_descendants(lab.proc.pid)]
    cmdlines = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                for pid in pids if Path(f"/proc/{pid}/cmdline").exists()}  # fmt: skip
    if not cmdlines:
        pytest.skip("no /proc on this system")
    assert any("jupyter" in c and "lab" in c for c in cmdlines.values()), cmdlines  # found it
    assert not [pid for pid, c in cmdlines.items() if lab.token in c]
    assert lab.api("GET", "api/contents")[0] == 200  # and yet it is the server's token


# --- the launcher's errors: no Lab is started -----------------------------------------------


@pytest.fixture
def no_jupyter(monkeypatch: pytest.MonkeyPatch) -> None:
    """tools.lab.main() runs in-process: make starting Jupyter a failure, not a hang."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"Jupyter was started: {args}")

    monkeypatch.setattr(tools.lab.subprocess, "Popen", refuse)


@pytest.mark.parametrize("value", ["abc", "0", "70000", "88 88"])
def test_a_bad_lab_port_is_a_usage_error(
    value: str, no_jupyter: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("LAB_PORT", value)
    assert tools.lab.main() == 2
    out, err = capsys.readouterr()
    assert f"LAB_PORT={value!r} is not a port number" in err and "http" not in out


def _assert_clear_port_error(port: int, code: int, out: str, err: str) -> None:
    assert code != 0, out + err
    assert f"port {port} on 127.0.0.1 is already in use" in err, err
    assert f"LAB_PORT={port + 1}" in err, err  # how to choose another
    assert "http://" not in out, "a URL was printed for a port Lab does not serve"


def test_a_taken_port_is_a_clear_error(
    no_jupyter: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("LAB_PORT", str(port))
        code = tools.lab.main()
    _assert_clear_port_error(port, code, *capsys.readouterr())


@pytest.mark.slow
def test_a_port_taken_after_the_check_is_a_clear_error_too() -> None:
    """The race: the port is taken once the launcher checked it; Jupyter must not move on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        seems_free_once = (
            "import sys, tools.lab as lab; answers = iter([True]); "
            "lab.port_is_free = lambda port: next(answers, False); sys.exit(lab.main())"
        )
        proc = subprocess.run(
            [sys.executable, "-c", seems_free_once],
            cwd=ROOT,
            env={**os.environ, "LAB_PORT": str(port)},
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    _assert_clear_port_error(port, proc.returncode, proc.stdout, proc.stderr)
