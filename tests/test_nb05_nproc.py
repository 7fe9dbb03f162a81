"""Notebook 05 launches its DDP script with one process per GPU, and two on the CPU; on this
machine only (gloo on loopback), and on Windows with a store its PyTorch has.

Its header says that with several GPUs ``torchrun`` uses them all, so the launch cell takes
the count from ``torch.cuda.device_count()``, never a fixed ``--nproc-per-node=2``. The cell
runs here in IPython, as in the notebook, with the number of GPUs pretended: first stopped
at the shell command it runs (any count, no launch), then once launched for real with three
pretended GPUs, whose processes (seeing none) train on the CPU and report their world size.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import nbformat
import pytest
import torch
from IPython.core import interactiveshell

from tools.authoring import lesson_size

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_data_parallel.ipynb"


class Stopped(Exception):
    """Raised instead of running the shell command."""


def _cells() -> tuple[str, str, str]:
    """The set-up cell, the cell that writes ddp_minimal.py and the core cell that launches it."""
    code = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"]
    writes = [c.source for c in code if c.source.startswith("%%writefile ddp_minimal.py")]
    launches = [
        c.source
        for c in code
        if "torch.distributed.run" in c.source and lesson_size.part_of(c) == "core"
    ]
    assert len(writes) == 1 and len(launches) == 1, "expected one script cell, one launch cell"
    return code[0].source, writes[0], launches[0]


def _run(cells: list[str], gpus: int, monkeypatch, launch: bool) -> tuple[list[str], object]:
    """Run ``cells`` in a fresh IPython with ``gpus`` GPUs pretended: the shell commands they
    ran (stopped before running unless ``launch``) and the last cell's result."""
    commands: list[str] = []
    real = interactiveshell.getoutput

    def getoutput(cmd: str) -> str:
        commands.append(cmd)
        if not launch:
            raise Stopped(cmd)
        return real(cmd)

    monkeypatch.setattr(interactiveshell, "getoutput", getoutput)
    shell = interactiveshell.InteractiveShell.instance(colors="nocolor")
    try:
        result = None
        for i, source in enumerate(cells):
            if i == 1:  # after the set-up cell, which must still see the real machine
                monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
            result = shell.run_cell(source, store_history=False)
        return commands, result
    finally:
        interactiveshell.InteractiveShell.clear_instance()


def _nproc(command: str) -> int:
    found = re.findall(r"--nproc[-_]per[-_]node[= ](\S+)", command)
    assert len(found) == 1, command
    return int(found[0])


# One GPU: two processes on the CPU, so that the demo shows two ranks at work.
@pytest.mark.parametrize("gpus, expected", [(0, 2), (1, 2), (2, 2), (8, 8)])
def test_the_launch_starts_one_process_per_gpu_and_two_without(
    gpus: int, expected: int, monkeypatch, tmp_path: Path
) -> None:
    setup, _, launch = _cells()
    monkeypatch.chdir(tmp_path)
    commands, result = _run([setup, launch], gpus, monkeypatch, launch=False)
    assert isinstance(result.error_in_exec, Stopped), result.error_in_exec  # stopped there
    assert len(commands) == 1 and "torch.distributed.run" in commands[0]
    assert _nproc(commands[0]) == expected


@pytest.mark.e2e  # three torchrun workers: 20-60 s on the shared 2-core CPU
def test_three_gpus_launch_three_processes(monkeypatch, tmp_path: Path) -> None:
    setup, write, launch = _cells()
    monkeypatch.chdir(tmp_path)  # the script and its checkpoint go here
    commands, result = _run([setup, write, launch], 3, monkeypatch, launch=True)
    assert result.success, result.error_in_exec  # the cell asserts "(world size 3)" itself
    assert [_nproc(c) for c in commands] == [3]
    assert (tmp_path / ".runs" / "05" / "ddp_minimal.pt").is_file()


@pytest.mark.parametrize(
    "platform, interfaces, expected",
    [
        ("linux", [(1, "lo"), (2, "eth0")], {"GLOO_SOCKET_IFNAME": "lo"}),
        ("darwin", [(1, "lo0"), (4, "en0")], {"GLOO_SOCKET_IFNAME": "lo0"}),
        # Windows: gloo finds its device itself; torchrun's default libuv store is missing there
        ("win32", [(1, "Loopback Pseudo-Interface 1")], {"USE_LIBUV": "0"}),
        ("linux", [(2, "eth0")], {}),  # no loopback by that name: PyTorch's default
    ],
)
def test_the_launch_keeps_gloo_on_loopback_and_needs_no_libuv_on_windows(
    platform: str, interfaces: list, expected: dict, monkeypatch, tmp_path: Path
) -> None:
    setup, _, launch = _cells()
    monkeypatch.chdir(tmp_path)
    for name in ("GLOO_SOCKET_IFNAME", "USE_LIBUV"):
        monkeypatch.setenv(name, "")  # so that monkeypatch restores them after the cell
        monkeypatch.delenv(name)
    monkeypatch.setattr(socket, "if_nameindex", lambda: interfaces)
    shell_env: list[dict] = []
    monkeypatch.setattr(  # the environment the launch would get, read as it starts
        interactiveshell,
        "getoutput",
        lambda cmd: shell_env.append(dict(os.environ)) or (_ for _ in ()).throw(Stopped(cmd)),
    )
    shell = interactiveshell.InteractiveShell.instance(colors="nocolor")
    try:
        assert shell.run_cell(setup, store_history=False).success
        monkeypatch.setattr(sys, "platform", platform)
        result = shell.run_cell(launch, store_history=False)
    finally:
        interactiveshell.InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, Stopped), result.error_in_exec
    got = {k: shell_env[0][k] for k in ("GLOO_SOCKET_IFNAME", "USE_LIBUV") if k in shell_env[0]}
    assert got == expected


def test_ddp_minimal_uses_nccl_only_where_it_exists() -> None:
    """Windows' PyTorch has no NCCL: a GPU per process is not enough to ask for it.
    (scripts/train_ddp.py, the same choice: tests/test_train_ddp.py runs it with mocks.)"""
    _, write, _ = _cells()
    nccl = write.index('init_process_group("nccl"')
    assert "dist.is_nccl_available()" in write[:nccl], write[:nccl]
