"""The kernel provisioner of ``make hub``'s students' servers: each kernel forked from the
hub's fork server, which has already imported PyTorch (``tools/teaching/kernelfork.py`` says
why and how). Here is only what a student's server runs. The server runs isolated
(``python -I``), without the checkout's ``tools`` on its path, so this package is installed in
the venv under a name of its own, ``blitz_hubkernel`` (``pyproject.toml``), and imports nothing
but jupyter_client and the standard library: a server that imported ``utils`` (PyTorch) would
hold the 400 MiB this saves.

Where the socket is not there (no cgroups, a plain ``make lab``, the fork server not ready or
refusing), the kernel starts as jupyter_client always starts it, and the server's log says so:
the same kernel, with its own copy of PyTorch.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys

from jupyter_client.provisioning import LocalProvisioner

SOCKET_ENV = "BLITZ_KERNEL_FORK"  # the fork server's socket, in each student's environment
ASK_TIMEOUT_S = 60  # a fork answers in well under a second; a busy class server: a minute


class ForkRefused(Exception):
    """The fork server answered with a reason instead of a kernel."""


def _connection_file(cmd: list[str]) -> str | None:
    """The connection file when ``cmd`` starts this Python's ipykernel as its kernel spec does
    (``python -m ipykernel_launcher -f FILE``); None for any other kernel, which is then
    started as written."""
    if len(cmd) != 5 or cmd[1:4] != ["-m", "ipykernel_launcher", "-f"]:
        return None
    if os.path.realpath(cmd[0]) != os.path.realpath(sys.executable):
        return None
    return cmd[4]


def ask(path: str, connection_file: str, cwd: str, env: dict[str, str]) -> tuple[int, int]:
    """A kernel forked for this process: its pid and a pidfd for it (the caller closes it)."""
    request = json.dumps({"connection_file": connection_file, "cwd": cwd, "env": env}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(ASK_TIMEOUT_S)
        conn.connect(path)
        # the kernel writes where this server writes (its log), as a launched kernel would
        try:
            socket.send_fds(conn, [request + b"\n"], [sys.stdout.fileno(), sys.stderr.fileno()])
        except BrokenPipeError:  # refused before reading: the reason is waiting to be read
            pass
        data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 1)
    try:
        answer = json.loads(data or b"{}")
    except ValueError:
        answer = {}
    if "pid" not in answer or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ForkRefused(answer.get("error", "no answer"))
    return int(answer["pid"]), fds[0]


class Forked:
    """What LocalProvisioner uses of a ``subprocess.Popen``, for a kernel that is not this
    process's child: watched and signalled through a pidfd (never a reused pid). Its exit
    status is the fork server's to collect; 0 here once it has ended."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid, self._pidfd, self.returncode = pid, pidfd, None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = 0
            os.close(self._pidfd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            self.poll()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkedProvisioner(LocalProvisioner):
    """LocalProvisioner, but the kernel is forked by the hub's fork server when there is one."""

    async def launch_kernel(self, cmd, **kwargs):
        path = os.environ.get(SOCKET_ENV, "")
        connection_file = _connection_file(cmd)
        if path and connection_file:
            cwd = str(kwargs.get("cwd") or os.getcwd())
            env = dict(kwargs.get("env") or os.environ)
            try:
                pid, pidfd = await asyncio.to_thread(ask, path, connection_file, cwd, env)
            except (OSError, ForkRefused) as err:
                self.log.warning("kernel not forked (%s): started as a new Python", err)
            else:
                self.process, self.pid, self.pgid, self.cwd = Forked(pid, pidfd), pid, pid, cwd
                return self.connection_info
        return await super().launch_kernel(cmd, **kwargs)
