"""`make lab` (tools/publishing/lab.py): one JupyterLab for the session, started as the README says
(``LAB_TOKEN=... make lab LAB_PORT=...``) from the shell's environment (tests/lab.py); its
kernels against the test kernels; then the wrapper's own checks and the command it execs,
in-process, without Jupyter."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import psutil
import pytest

from tests.lab import TIMEOUT_S, Lab
from tools.publishing import lab as launcher
from utils.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # none for 127.0.0.1


@pytest.mark.e2e
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


@pytest.mark.e2e
def test_lab_lists_the_notebooks_and_runs_utils_in_a_kernel(lab: Lab) -> None:
    listed = {item["name"] for item in lab.api("GET", "contents")["content"]}
    expected = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} | {"zh"}
    assert expected <= listed, f"missing from Lab: {sorted(expected - listed)}"
    with lab.kernel() as client:
        # Also: torchvision's CIFAR10 is torchvision's own (nothing patches it in a kernel).
        code = "import utils\nfrom torchvision import datasets"
        where = "datasets.CIFAR10.__module__"
        reply = client.execute_interactive(
            code, user_expressions={"file": "utils.__file__", "where": where}, timeout=TIMEOUT_S
        )["content"]
    assert reply["status"] == "ok", reply
    found = reply["user_expressions"]["file"]
    assert str(ROOT / "utils") in found.get("data", {}).get("text/plain", ""), found
    where = reply["user_expressions"]["where"]
    assert where.get("data", {}).get("text/plain") == "'torchvision.datasets.cifar'", where


# What a kernel knows once a lesson's first cell imported PyTorch: its environment,
# interpreter, import machinery and the lines IPython ran first. Printed as JSON. (Importing
# torchvision sets TORCHINDUCTOR_CACHE_DIR, and the pytest process that starts nbval's kernels
# imported it: compared after the import, both must hold the same value.)
_PROBE = """
import json, os, sys
import torch, torchvision
print(json.dumps({
    "env": dict(os.environ),
    "executable": sys.executable,
    "path": [p for p in sys.path if p not in ("", os.getcwd())],
    "meta_path": [type(f).__name__ for f in sys.meta_path],
    "exec_lines": list(get_ipython().config.InteractiveShellApp.get("exec_lines", [])),
    "project_modules": sorted(m for m in sys.modules if m.split(".")[0] in {"utils", "tools"}),
}))
"""
# Where a test kernel may differ from a kernel of `make lab`: the test contract's variables
# (documented; a learner sets them the same way: README), and what Jupyter, make, pytest and
# the fixture tell their own children.
_DOCUMENTED = {
    "OMP_NUM_THREADS",
    "BLITZ_CIFAR10",
    "BLITZ_CIFAR10_SUBSET",
    "BLITZ_FORCE_CPU",
    "CUDA_VISIBLE_DEVICES",
    "IPYTHONDIR",  # macOS only, with the CPU forced: the contract's one way to hide MPS
}
_PLUMBING = ("JPY_", "JUPYTER_", "MAKE", "MFLAGS", "PYTEST_", "PYDEVD_")
_MAKE_LAB = {"LAB_TOKEN", "LAB_PORT", "BIN"}  # make's command line exports its variables


def _probe(client) -> dict:
    printed: list[str] = []

    def collect(msg: dict) -> None:
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            printed.append(msg["content"]["text"])

    reply = client.execute_interactive(_PROBE, timeout=TIMEOUT_S, output_hook=collect)
    assert reply["content"]["status"] == "ok", reply["content"]
    return json.loads("".join(printed))


@pytest.mark.e2e
def test_a_test_kernel_starts_as_a_kernel_of_make_lab_does(lab: Lab) -> None:
    """A notebook passes `make test` only where it would run for a learner: a kernel nbval
    starts (this process's environment, the test contract applied) and one a click in
    `make lab` starts differ in the contract's documented variables and nothing else --
    PATH included (a test-only PATH once hid a `!torchrun` that failed in class)."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel

    with lab.kernel("01_tensors.ipynb") as client:
        learner = _probe(client)
    tested = RunningKernel(CURRENT_ENV_KERNEL_NAME, cwd=str(ROOT / "notebooks"))
    try:
        test = _probe(tested.kc)
    finally:
        tested.stop()

    def kept(env: dict) -> dict:
        return {
            k: v
            for k, v in env.items()
            if k not in _DOCUMENTED | _MAKE_LAB and not k.startswith(_PLUMBING)
        }

    learner_env, test_env = kept(learner.pop("env")), kept(test.pop("env"))
    names = learner_env.keys() | test_env.keys()
    differ = sorted(k for k in names if learner_env.get(k) != test_env.get(k))
    assert not differ, {k: (learner_env.get(k), test_env.get(k)) for k in differ}
    assert learner == test
    assert not test["exec_lines"] and not test["project_modules"], "a kernel starts clean"


# --- the wrapper's own decisions, in-process: no Jupyter is started --------------------------


def test_make_lab_writes_its_defaults_nowhere_and_lab_reads_them(
    tmp_path: Path, handed_over: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 17: with JUPYTERLAB_DIR set to a user's global Lab, and a defaults file there
    linked elsewhere, `make lab` writes into neither; Lab (and RISE's app, which reads the same
    overrides) sees the classroom defaults through JUPYTER_CONFIG_PATH, after the user's own."""
    from jupyterlab_server.settings_utils import _get_overrides

    global_lab, elsewhere = tmp_path / "global-lab", tmp_path / "elsewhere.json"
    (global_lab / "settings" / "overrides.d").mkdir(parents=True)
    elsewhere.write_text("{}")
    (global_lab / "settings" / "overrides.d" / "pytorch-blitz.json").symlink_to(elsewhere)
    monkeypatch.setenv("JUPYTERLAB_DIR", str(global_lab))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(tmp_path / "mine"))
    monkeypatch.setenv("LAB_PORT", str(free_port()))
    launcher.main()
    [(argv, env)] = handed_over
    assert elsewhere.read_text() == "{}"
    assert sorted(p.name for p in global_lab.rglob("*")) == [
        "overrides.d",
        "pytorch-blitz.json",
        "settings",
    ]
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [
        str(launcher.CONFIG_DIR),
        str(tmp_path / "mine"),
    ]
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", env["JUPYTER_CONFIG_PATH"])
    overrides, error = _get_overrides(str(global_lab / "settings"))
    assert not error and overrides == json.loads(launcher.DEFAULTS.read_text())


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


@pytest.mark.parametrize(
    ("port", "code", "said"),
    [
        (
            80,
            errno.EACCES,
            "port 80 is privileged (below 1024): only root may open it. Choose a "
            "port from 1024 up: LAB_PORT=8888 make lab",
        ),
        (8888, errno.EACCES, "make lab: cannot open port 8888 on 127.0.0.1: Permission denied"),
        (8888, errno.EADDRNOTAVAIL, "cannot open port 8888 on 127.0.0.1: Cannot assign"),
    ],
    ids=["privileged", "forbidden", "no-loopback"],
)
def test_a_port_that_cannot_be_opened_is_not_called_in_use(
    port: int, code: int, said: str, handed_over: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rule: one line that says what is wrong, never a wrong diagnosis ("already in use").
    def refuse(address: tuple[str, int]) -> socket.socket:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(launcher.socket, "create_server", refuse)  # a user who is not root
    monkeypatch.setenv("LAB_PORT", str(port))
    with pytest.raises(SystemExit) as exited:
        launcher.main()
    message = str(exited.value.code)
    assert not handed_over and "\n" not in message and "in use" not in message, message
    assert said in message and message.endswith(("make lab", "administrator")), message


def _once_settled(page, script: str, arg, settled) -> object:
    """What ``script(arg)`` returns in the page once ``settled`` holds for it (Lab applies a
    notebook's stored fold state after it renders the cells), or what it returns when
    TIMEOUT_S has passed without that: the caller's assertion then says what Lab showed."""
    deadline = time.monotonic() + TIMEOUT_S
    while not settled(value := page.evaluate(script, arg)) and time.monotonic() < deadline:
        page.wait_for_timeout(100)  # poll the page's state, bounded by the deadline
    return value


@pytest.mark.e2e
def test_deep_dives_open_folded_in_lab(lab: Lab, browser) -> None:
    """A deep dive's heading is stored collapsed (tools/authoring/lesson_size.py write): Lab
    shows the
    heading and hides the section's cells until the learner unfolds it."""
    import nbformat

    from tools.authoring import lesson_size

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
        # the solution's heading, not the question's ("Exercise 1. ..." holds the same words)
        starts = re.compile("^" + re.escape(heading))
        shown = page.locator(".jp-MarkdownOutput").filter(has_text=starts).first
        shown.wait_for(state="attached", timeout=TIMEOUT_S * 1000)
        shown.scroll_into_view_if_needed()  # Lab renders the cells near the viewport only
        # The cell after the heading (whatever its type): present, and hidden by the fold
        # once Lab has applied the stored collapse state (waited for, then read).
        below = _once_settled(
            page,
            """(heading) => {
                const cells = [...document.querySelectorAll(".jp-Notebook .jp-Cell")];
                const i = cells.findIndex((c) => {
                    const out = c.querySelector(".jp-MarkdownOutput");
                    return out && out.textContent.trim().startsWith(heading);
                });
                if (i < 0 || i + 1 >= cells.length) return null;
                return cells[i + 1].checkVisibility();
            }""",
            heading,
            settled=lambda below: below is False,
        )
        assert below is not None, f"{path.name}: Lab shows no cell after {heading!r}"
        assert below is False, f"{path.name}: the deep dive under {heading!r} is not folded"
    finally:
        page.close()


@pytest.mark.e2e
def test_lab_starts_without_asking_about_news_or_fetching_it(lab: Lab, browser) -> None:
    """A classroom's Lab asks nothing on start: no "Would you like to get notified about
    official Jupyter news?" (JupyterLab's announcements plugin asks it on every load until it
    is answered; tools/publishing/lab_settings/labconfig/default_setting_overrides.json
    answers it), and it calls no other host for news or updates. Settings the user changes
    still win over these defaults."""
    url = (
        f"http://127.0.0.1:{lab.port}/lab/api/settings/@jupyterlab/apputils-extension:notification"
    )
    req = urllib.request.Request(url, headers={"Authorization": f"token {lab.token}"})
    with _OPENER.open(req, timeout=60) as res:
        reply = json.loads(res.read())  # the schema's defaults carry the overrides
    defaults = {k: v.get("default") for k, v in reply["schema"]["properties"].items()}
    wanted = {"fetchNews": "false", "checkForUpdates": False}
    assert {k: defaults[k] for k in wanted} == wanted and not reply["settings"], reply
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    elsewhere: list[str] = []
    page.on("request", lambda r: r.url.startswith("http://127.0.0.1") or elsewhere.append(r.url))
    try:
        page.goto(f"http://127.0.0.1:{lab.port}/lab?reset&token={quote(lab.token, safe='')}")
        page.locator("#jp-main-dock-panel").wait_for(timeout=TIMEOUT_S * 1000)
        toasts: list[str] = []
        for _ in range(20):  # without the settings it showed within 0.2 s of the shell (measured)
            toasts = page.evaluate(
                "[...document.querySelectorAll('.Toastify__toast')].map(t => t.innerText)"
            )
            if toasts:
                break
            time.sleep(0.5)
        assert not toasts, f"Lab greets the class with: {toasts}"
        assert not elsewhere, f"Lab called other hosts: {elsewhere}"
    finally:
        page.close()


@pytest.mark.e2e
def test_solutions_open_folded_in_lab(lab: Lab, browser) -> None:
    """A solution's code is stored folded (jupyter.source_hidden,
    tools/authoring/lesson_size.py write):
    Lab shows the solution's heading and a placeholder, not the answer, until the learner
    clicks it open."""
    import nbformat

    path = ROOT / "notebooks" / "01_tensors.ipynb"
    nb = nbformat.read(path, as_version=4)
    first = next(
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])
    )
    heading = nb.cells[first - 1].source.splitlines()[0].lstrip("#").strip().replace("`", "")
    page = browser.new_page()
    try:
        token = quote(lab.token, safe="")
        page.goto(f"http://127.0.0.1:{lab.port}/lab/tree/{path.name}?reset&token={token}")
        # the solution's heading, not the question's ("Exercise 1. ..." holds the same words)
        starts = re.compile("^" + re.escape(heading))
        shown = page.locator(".jp-MarkdownOutput").filter(has_text=starts).first
        shown.wait_for(state="attached", timeout=TIMEOUT_S * 1000)
        shown.scroll_into_view_if_needed()  # Lab renders the cells near the viewport only
        state = _once_settled(
            page,
            """(heading) => {
                const cells = [...document.querySelectorAll(".jp-Notebook .jp-Cell")];
                const i = cells.findIndex((c) => {
                    const out = c.querySelector(".jp-MarkdownOutput");
                    return out && out.textContent.trim().startsWith(heading);
                });
                const code = cells[i + 1];
                if (i < 0 || !code || !code.classList.contains("jp-CodeCell")) return null;
                const editor = code.querySelector(".jp-InputArea");
                return {
                    editorShown: editor !== null && editor.checkVisibility(),
                    placeholder: code.querySelector(".jp-InputPlaceholder") !== null,
                };
            }""",
            heading,
            settled=lambda state: state == {"editorShown": False, "placeholder": True},
        )
        assert state is not None, f"{path.name}: no code cell after {heading!r} in Lab"
        assert state == {"editorShown": False, "placeholder": True}, state
    finally:
        page.close()


# Console errors of RISE's slideshow app itself (jupyterlab-rise 0.43.1 in JupyterLab 4.6),
# named in README's "Teaching site" section; any other error fails the test.
RISE_UPSTREAM_ERRORS = (
    # RISE's app bundles JupyterLab 4.3's packages: ipywidgets' Lab extension needs one it lacks
    "Shared module @jupyterlab/console doesn't exist in shared scope",
    # two versions of @jupyter/web-components (Lab's and RISE's) register the same elements
    "RangeError: Maximum call stack size exceeded",
    # RISE asks for an optional <notebook>.css beside each notebook; we ship rise.css only
    "Refused to apply style from",
    # RISE's app loads every Lab extension, also nbgrader's, which Lab's page_config.json
    # disables for learners; it fails to load in RISE's 4.3 scope (the message varies), so it
    # stays off there too
    "/lab/extensions/@jupyter/nbgrader/",
)


PRESS_S = 5  # longest a press of → may take to show what it shows (they take milliseconds)


def _open_slideshow(page, lab: Lab, notebook: str):
    """Open ``notebook`` in Lab and click "Render as slideshow": RISE's frame, once a slide
    shows."""
    token = quote(lab.token, safe="")
    # ?reset: a workspace of its own, without the tabs other tests opened
    page.goto(f"http://127.0.0.1:{lab.port}/lab/tree/{notebook}?reset&token={token}")
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.locator(".jp-Cell").first.wait_for(timeout=180_000)
    # RISE opens the slideshow with the notebook's kernel: wait until it is started and idle
    idle = panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    idle.wait_for(timeout=180_000)
    panel.locator('[title^="Render the current notebook as Reveal Slideshow"]').click()
    frame = page.frame_locator("iframe[src*='/rise/']").first
    frame.locator(".reveal .slides section.present").first.wait_for(timeout=120_000)
    return frame


@pytest.mark.e2e
def test_the_arrow_key_walks_a_rise_slideshow_and_shows_every_code_cell(lab, browser) -> None:
    """A teacher clicks "Render as slideshow" and presses → only: each press shows the next
    code cell or slide, in reading order, until the last; every code cell of the core path
    appears. (JupyterLab binds → in a notebook to "next heading", which moved RISE from heading
    to heading past the code: tools/publishing/lab_settings/labconfig/default_setting_overrides.json
    unbinds it in RISE.) No console error but RISE's own (RISE_UPSTREAM_ERRORS)."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text[:300]))
    page.on("pageerror", lambda e: errors.append(str(e)[:300]))
    try:
        _open_slideshow(page, lab, "03_neural_networks.ipynb")
        frame = next(f for f in page.frames if "/rise/" in f.url)
        # reveal.js marks its root "ready" once it has laid out the slides and taken keys
        frame.wait_for_function("() => !!document.querySelector('.reveal.ready')")
        shown = """() => {
            const cells = [...document.querySelectorAll('.reveal .jp-CodeCell:not(.reveal-skip)')];
            const on = c => c.closest('section.present') && !c.closest('.fragment:not(.visible)');
            return [cells.length, cells.map((c, i) => on(c) ? i : -1).filter(i => i >= 0)];
        }"""
        at_end = """() => {
            const slides = [...document.querySelectorAll('.reveal .slides > section')];
            return slides.at(-1).classList.contains('present') &&
                !document.querySelector('section.present .fragment:not(.visible)');
        }"""
        state = """() => [[...document.querySelectorAll('section.present')].at(-1).id,
            document.querySelectorAll('section.present .fragment.visible').length]"""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        changed = f"before => JSON.stringify(({state})()) !== JSON.stringify(before)"
        total, seen = frame.evaluate(shown)
        seen, steps, idle = set(seen), 0, []
        while not frame.evaluate(at_end) and steps < 4 * total + 40:
            before = frame.evaluate(state)
            page.keyboard.press("ArrowRight")  # where a teacher's key goes: the focused cell
            steps += 1
            try:  # the next slide or fragment shows; a press that changes nothing has a bound
                frame.wait_for_function(changed, arg=before, timeout=PRESS_S * 1000)
            except PlaywrightTimeout:
                idle.append((steps, before))
            seen.update(frame.evaluate(shown)[1])
        assert frame.evaluate(at_end), f"→ did not reach the last slide in {steps} presses"
        assert seen == set(range(total)), f"→ showed code cells {sorted(seen)} of {total}"
        assert not idle, f"presses of → that changed nothing (of {steps}; press, slide): {idle}"
    finally:
        page.close()
    ours = [e for e in errors if not any(known in e for known in RISE_UPSTREAM_ERRORS)]
    assert not ours, ours


@pytest.mark.e2e
def test_lab_presents_a_notebook_as_slides_and_runs_code_there(lab, browser) -> None:
    """`make lab` brings RISE: "Render as slideshow" (Alt+R) opens the core path as slides;
    space moves on (fragments, then slides); a code cell run on its slide gets a fresh
    execution count and no error.
    The slideshow is saved as build/screenshots/lab-slideshow.png."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        frame = _open_slideshow(page, lab, "03_neural_networks.ipynb")
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


# --- make lab's token: on no command line, and in a URL that works -----------------------

HOSTILE_TOKEN = "a&b#c%d+e/f=g?h"  # what a URL would cut or misread


def _make(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``make -n`` (prints the commands, runs none; the environment counts as installed) with
    a copy of the Makefile."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    environ = {"PATH": "/usr/bin:/bin", **env}
    return subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", *args],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_lab_refuses_a_token_on_its_command_line(tmp_path: Path) -> None:
    refused = _make(["lab", "LAB_PORT=8890", f"LAB_TOKEN={HOSTILE_TOKEN}"], tmp_path)
    message = refused.stderr.strip()
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert "\n" not in message and HOSTILE_TOKEN not in message, message
    assert "LAB_TOKEN on make's command line is visible to every user (ps)" in message, message
    assert message.endswith("in the environment instead: LAB_TOKEN=... make lab.  Stop."), message

    # The environment form is the way, and then the token is in no command make runs.
    allowed = _make(["lab", "LAB_PORT=8890"], tmp_path, LAB_TOKEN=HOSTILE_TOKEN)
    assert allowed.returncode == 0, allowed.stderr
    assert "tools.publishing.lab" in allowed.stdout and HOSTILE_TOKEN not in allowed.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_help_shows_the_token_in_the_environment(tmp_path: Path) -> None:
    shown = _make(["help"], tmp_path)
    assert "LAB_TOKEN=... make lab" in shown.stdout.replace("@echo", ""), shown.stdout
    assert "make lab LAB_TOKEN" not in (ROOT / "Makefile").read_text()


def test_any_token_prints_a_url_that_carries_it(
    handed_over: list, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    port = free_port()
    monkeypatch.setenv("LAB_PORT", str(port))
    monkeypatch.setenv("LAB_TOKEN", HOSTILE_TOKEN)
    launcher.main()
    [(argv, env)] = handed_over
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"make lab: JupyterLab at http://127.0.0.1:{port}/lab?token=")
    url = urlparse(printed.split(" at ", 1)[1])
    assert url.fragment == "" and parse_qs(url.query) == {"token": [HOSTILE_TOKEN]}, url
    assert env["JUPYTER_TOKEN"] == HOSTILE_TOKEN, "Jupyter gets the token itself, not encoded"
    assert not [arg for arg in argv if HOSTILE_TOKEN in arg], argv


def test_a_taken_port_suggests_the_environment_form(
    handed_over: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_TOKEN", HOSTILE_TOKEN)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setenv("LAB_PORT", str(port))
        with pytest.raises(SystemExit) as exited:
            launcher.main()
    message = str(exited.value.code)
    assert not handed_over and "\n" not in message and HOSTILE_TOKEN not in message, message
    assert message.endswith(f"choose another port: LAB_TOKEN=... LAB_PORT={port + 1} make lab")
