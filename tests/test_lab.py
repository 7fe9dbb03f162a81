"""`make lab` (tools/lab.py): one JupyterLab for the module, started as the README says
(``LAB_TOKEN=... make lab LAB_PORT=...``), its files in a temporary folder; then the wrapper's
own checks and the command it execs, in-process, without Jupyter."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest

from tools import lab as launcher
from utils.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 180
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # none for 127.0.0.1


@dataclass
class Lab:
    url: str  # printed by `make lab`
    port: int
    token: str
    proc: subprocess.Popen  # make; its child, tools/lab.py, becomes Jupyter
    runtime: Path  # where the kernels' connection files go

    def api(self, method: str, path: str):
        headers = {"Authorization": f"token {self.token}"}
        data = b"{}" if method == "POST" else None
        url = f"http://127.0.0.1:{self.port}/api/{path}"
        req = urllib.request.Request(url, data, headers, method=method)
        with _OPENER.open(req, timeout=60) as res:
            return json.loads(res.read() or "null")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    home = tmp_path_factory.mktemp("lab")
    # & # % + / mean something in a URL: the printed one must still work (it is encoded)
    port, token = free_port(), secrets.token_urlsafe(24) + "&#%+/"
    env = dict(os.environ, LAB_TOKEN=token, JUPYTER_CONFIG_DIR=str(home / "config"))
    env["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    # `make lab` as the README has it, never reinstalling (-o: the stamp counts as up to date).
    make = ["make", "-o", ".venv/.installed", "lab", f"LAB_PORT={port}"]
    make.append(f"BIN={Path(sys.executable).parent}")  # with this interpreter's environment
    log = home / "lab.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            make, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}/lab?token={quote(token, safe='')}"
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while url not in (text := log.read_text()) or "Jupyter Server" not in text:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`make lab` (exit code {proc.poll()}) is not serving:\n{text[-3000:]}")
            time.sleep(0.5)
        yield Lab(url, port, token, proc, home / "runtime")
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # make and Jupyter, then what is left
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


@pytest.mark.slow
def test_the_printed_url_serves_lab_on_loopback_only(lab: Lab) -> None:
    """Also: the token is on no command line (any local user can read those with ps)."""
    with _OPENER.open(lab.url, timeout=60) as res:
        assert res.status == 200 and b"JupyterLab" in res.read()
    procs = [psutil.Process(lab.proc.pid), *psutil.Process(lab.proc.pid).children(recursive=True)]
    assert not [p for p in procs if lab.token in " ".join(p.cmdline())]
    [jupyter] = [p for p in procs if "--no-browser" in p.cmdline()]
    flags = set(jupyter.cmdline())
    assert {"--ip=127.0.0.1", f"--port={lab.port}", "--ServerApp.port_retries=0"} <= flags
    assert ("--allow-root" in flags) == (os.geteuid() == 0)
    never = f"--LabApp.check_for_updates_class={launcher.NEVER_CHECK}"
    assert {"--LabApp.news_url=None", never} <= flags  # nothing leaves: no news, no update check
    listening = {c.laddr for c in jupyter.net_connections() if c.status == psutil.CONN_LISTEN}
    assert {(ip, port) for ip, port in listening} == {("127.0.0.1", lab.port)}, listening


@pytest.mark.slow
def test_lab_lists_the_notebooks_and_runs_utils_in_a_kernel(lab: Lab) -> None:
    from jupyter_client import BlockingKernelClient

    listed = {item["name"] for item in lab.api("GET", "contents")["content"]}
    expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} | {"zh"}
    assert expected <= listed, f"missing from Lab: {sorted(expected - listed)}"
    kernel_id = lab.api("POST", "kernels")["id"]
    client = BlockingKernelClient(connection_file=str(lab.runtime / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=TIMEOUT_S)
        # Also: torchvision's CIFAR10 is served offline in Lab's kernels (utils.data's hook).
        code = "import utils\nimport utils.data\nfrom torchvision import datasets"
        served = "bool(utils.data._ORIGINAL) and datasets.CIFAR10 is not utils.data._ORIGINAL[0]"
        reply = client.execute_interactive(
            code, user_expressions={"file": "utils.__file__", "served": served}, timeout=TIMEOUT_S
        )["content"]
    finally:
        client.stop_channels()
        lab.api("DELETE", f"kernels/{kernel_id}")
    assert reply["status"] == "ok", reply
    found = reply["user_expressions"]["file"]
    assert str(ROOT / "utils") in found.get("data", {}).get("text/plain", ""), found
    served = reply["user_expressions"]["served"]
    assert served.get("data", {}).get("text/plain") == "True", served


# --- the wrapper's own decisions, in-process: no Jupyter is started --------------------------


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict]]:
    """What tools.lab.main() execs, as (argv, environment), recorded instead."""
    calls: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(launcher.os, "execve", lambda path, argv, env: calls.append((argv, env)))
    monkeypatch.setenv("JUPYTER_TOKEN", "stray")  # LAB_TOKEN is the one way to choose it
    return calls


def test_without_lab_token_jupyter_makes_up_the_token(
    handed_over: list, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("LAB_PORT", str(free_port()))
    monkeypatch.delenv("LAB_TOKEN", raising=False)
    launcher.main()
    [(argv, env)] = handed_over
    assert "JUPYTER_TOKEN" not in env and not [arg for arg in argv if "token" in arg.lower()]
    assert capsys.readouterr().out == "", "Jupyter prints the URL with the token it made up"


@pytest.mark.parametrize("value", ["taken", "abc", "0", "70000"])
def test_a_taken_or_bad_port_is_one_clear_line(
    value: str, handed_over: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setenv("LAB_PORT", str(port) if value == "taken" else value)
        with pytest.raises(SystemExit) as exited:
            launcher.main()
    message = str(exited.value.code)  # what Python prints on stderr, with exit status 1
    assert not handed_over and "\n" not in message, message
    if value == "taken":  # names the port, and how to choose another
        assert f"port {port} on 127.0.0.1 is already in use" in message, message
        assert f"choose another port: LAB_PORT={port + 1} make lab" in message, message
    else:
        assert f"make lab: LAB_PORT={value!r} is not a port number" in message, message


@pytest.mark.slow
def test_deep_dives_open_folded_in_lab(lab: Lab, browser) -> None:
    """A deep dive's heading is stored collapsed (tools/lesson_size.py write): Lab shows the
    heading and hides the section's cells until the learner unfolds it."""
    import nbformat

    from tools import lesson_size

    path = ROOT / "notebooks" / "01_tensors.ipynb"
    nb = nbformat.read(path, as_version=4)
    dives = lesson_size.deep_dives(nb)
    assert dives, f"{path.name} has no deep dive"
    heading = nb.cells[dives[0].start].source.splitlines()[0].lstrip("#").strip().replace("`", "")
    page = browser.new_page()
    try:
        page.goto(
            f"http://127.0.0.1:{lab.port}/lab/tree/{path.name}?token={quote(lab.token, safe='')}"
        )
        shown = page.locator(f".jp-MarkdownOutput:has-text({json.dumps(heading)})").first
        shown.wait_for(state="attached", timeout=TIMEOUT_S * 1000)
        shown.scroll_into_view_if_needed()  # Lab renders the cells near the viewport only
        time.sleep(2)  # let Lab apply the stored collapse state to the cells below
        # The cell after the heading (whatever its type): present, and hidden by the fold.
        below = page.evaluate(
            """(heading) => {
                const cells = [...document.querySelectorAll(".jp-Notebook .jp-Cell")];
                const i = cells.findIndex((c) => {
                    const out = c.querySelector(".jp-MarkdownOutput");
                    return out && out.textContent.includes(heading);
                });
                if (i < 0 || i + 1 >= cells.length) return null;
                return cells[i + 1].checkVisibility();
            }""",
            heading,
        )
        assert below is not None, f"{path.name}: Lab shows no cell after {heading!r}"
        assert below is False, f"{path.name}: the deep dive under {heading!r} is not folded"
    finally:
        page.close()


@pytest.mark.slow
def test_lab_presents_a_notebook_as_slides_and_runs_code_there(lab, browser) -> None:
    """`make lab` brings RISE: "Render as slideshow" (Alt+R) opens the core path as slides;
    space moves on (fragments, then slides); a code cell run on its slide gets a fresh
    execution count and no error.
    The slideshow is saved as build/screenshots/lab-slideshow.png."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        notebook = "03_neural_networks.ipynb"
        token = quote(lab.token, safe="")
        # ?reset: a workspace of its own, without the tabs other tests opened
        page.goto(f"http://127.0.0.1:{lab.port}/lab/tree/{notebook}?reset&token={token}")
        panel = page.locator(".jp-NotebookPanel:visible")
        panel.locator(".jp-Cell").first.wait_for(timeout=180_000)
        time.sleep(2)  # let Lab settle the notebook's toolbar and kernel
        panel.locator('[title^="Render the current notebook as Reveal Slideshow"]').click()
        frame = page.frame_locator("iframe[src*='/rise/']").first
        frame.locator(".reveal .slides section").first.wait_for(timeout=120_000)
        present = frame.locator(".reveal section.present:not(.stack)")  # innermost

        code = ".fragment.visible > .jp-CodeCell:not(.reveal-skip)"  # skipped cells stay hidden

        def heading() -> str:
            return present.locator("h1, h2").first.inner_text()

        def show_code(elsewhere_than: str = "") -> None:
            """Press space (next fragment or slide; → skips fragments) until a code cell shows,
            on a slide whose heading is not the given one."""
            for _ in range(12):
                shown = present.locator(code).count()
                if shown and heading() != elsewhere_than:
                    return
                frame.locator(".reveal").press("Space")
                time.sleep(0.5)
            pytest.fail("no code cell appeared on the slides")

        def run_shown(expected: str) -> None:
            cell = present.locator(code).last
            cell.locator(".jp-InputArea-editor").click()
            page.keyboard.press("Control+Enter")  # run in place (Shift+Enter moves on too)
            prompt = cell.locator(".jp-InputPrompt")
            for _ in range(120):
                if prompt.inner_text().strip() == expected:
                    break
                time.sleep(0.5)
            assert prompt.inner_text().strip() == expected, prompt.inner_text()
            error = ".jp-OutputArea-output[data-mime-type*='error']"
            errors = cell.locator(f"{error}, .jp-RenderedText[data-mime-type*='stderr']")
            assert not errors.count(), errors.all_inner_texts()

        show_code()  # the title slide's imports
        run_shown("[1]:")
        title = heading()
        show_code(elsewhere_than=title)  # the next slides: the network's definition
        run_shown("[2]:")
        shots = ROOT / "build" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "lab-slideshow.png"))
    finally:
        page.close()
