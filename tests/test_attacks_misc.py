"""Issue 18's smaller attacks: arguments the device helpers do not understand, and Lab's
token on a command line or in a URL. (The site's, the download's and the bands' are in
tests/test_site.py, tests/test_data.py and tests/test_nbval_bands.py.)"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import torch

import utils
from tools import lab as launcher
from utils.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
HOSTILE_TOKEN = "a&b#c%d+e/f=g?h"  # what a URL would cut or misread


# --- get_device / try_gpu ---------------------------------------------------------------------


@pytest.mark.parametrize("arg", ["cuda", "false"])
def test_get_device_takes_no_argument(arg: str) -> None:
    """It picks the best device itself: an argument is a TypeError, never a silent CPU."""
    with pytest.raises(TypeError, match=r"get_device\(\) takes 0 positional arguments"):
        utils.get_device(arg)  # type: ignore[call-arg]


@pytest.mark.parametrize("arg", ["0", -1, 1.5, None])
def test_try_gpu_rejects_what_is_not_a_gpu_number(arg) -> None:
    with pytest.raises(ValueError) as info:
        utils.try_gpu(arg)
    assert str(info.value) == f"try_gpu: i must be a GPU number (0, 1, ...), got {arg!r}"


def test_try_gpu_still_answers_for_gpu_numbers() -> None:
    gpus = torch.cuda.device_count()
    assert utils.try_gpu() == utils.try_gpu(0) == torch.device("cuda:0" if gpus else "cpu")
    assert utils.try_gpu(gpus) == torch.device("cpu"), "a GPU this machine lacks: the CPU"


# --- make lab: the token on no command line, and in a URL that works --------------------------


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
    assert "tools.lab" in allowed.stdout and HOSTILE_TOKEN not in allowed.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_help_shows_the_token_in_the_environment(tmp_path: Path) -> None:
    shown = _make(["help"], tmp_path)
    assert "LAB_TOKEN=... make lab" in shown.stdout.replace("@echo", ""), shown.stdout
    assert "make lab LAB_TOKEN" not in (ROOT / "Makefile").read_text()


@pytest.fixture
def handed_over(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict]]:
    """What tools.lab.main() execs, as (argv, environment), recorded instead."""
    calls: list[tuple[list[str], dict]] = []
    monkeypatch.setattr(launcher.os, "execve", lambda path, argv, env: calls.append((argv, env)))
    monkeypatch.setattr(launcher, "remove_old_kernel_hook", lambda: None)
    # writes into the environment, tested on its own (test_lab.py)
    monkeypatch.setattr(launcher, "install_defaults", lambda: None)
    return calls


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
