"""Kernels forked from the hub's fork server (tools/teaching/kernelfork.py; the servers' side:
tools/teaching/hubkernel, installed as blitz_hubkernel): a student's server, confined in the
student's cgroups as the hub confines it, gets a kernel that runs as the student, in the
student's cgroups, with PyTorch already imported, and that the server interrupts and shuts
down as any kernel; a process the hub did not confine gets none. Needs root and writable
cgroups (as make hub does); skipped elsewhere."""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.test_hub import _students_python
from tools.teaching import classroom, kernelfork

ROOT = Path(__file__).resolve().parents[1]

# What the student's "server" runs: jupyter_client's KernelManager, with the hub's provisioner,
# as jupyter_server's kernel manager does; it prints what the kernel says of itself.
# A process's own memory, MiB: the pages no other process shares (smaps_rollup's Private_*)
PRIVATE = (
    "import numpy, torch, torchvision\n"
    "rollup = open('/proc/self/smaps_rollup').read().splitlines()\n"
    "print(sum(int(l.split()[1]) for l in rollup if l.startswith('Private_')) // 1024)"
)
SERVER = (
    "PRIVATE = "
    + repr(PRIVATE)
    + r"""
import json, os, sys, time
import logging; logging.basicConfig(level=logging.WARNING)  # a server logs its warnings
sys.stdin.readline()  # the test has confined this process (or chosen not to)
from jupyter_client.manager import KernelManager
from jupyter_client.provisioning import KernelProvisionerFactory
from traitlets.config import Config
config = Config()
config.KernelProvisionerFactory.default_provisioner_name = "blitz-forked"  # as the hub's
KernelProvisionerFactory.instance(config=config)  # jupyter_server: from its command line
km = KernelManager(kernel_name="python3")
km.start_kernel(cwd=os.path.expanduser("~"), env={**os.environ, "KF_MARK": "from the request"})
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)
def run(code, timeout=60):
    out = []
    def keep(msg):
        if msg["msg_type"] == "stream": out.append(msg["content"]["text"])
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=keep)
    return reply["content"]["status"], "".join(out)
said = {"server_pid": os.getpid(), "forked": type(km.provisioner.process).__name__ == "Forked"}
said["first"] = run(
    "import os, sys; print(repr(dict(preloaded='torch' in sys.modules, uid=os.getuid(),"
    " cwd=os.getcwd(), ppid=os.getppid(), mark=os.environ.get('KF_MARK'),"
    " cgroup=open('/proc/self/cgroup').read())))")
said["torch"] = run("import torch; print(torch.get_num_threads(), torch.ones(3).sum().item())")
said["private_mib"] = run(PRIVATE)[1]
msg = kc.execute("import time; time.sleep(60)")
time.sleep(1); km.interrupt_kernel()
reply = kc.get_shell_msg(timeout=30)
said["interrupted"] = reply["content"].get("ename")
pid = km.provisioner.pid
kc.stop_channels(); km.shutdown_kernel(now=False)
said["alive_after"] = km.is_alive()
try:
    os.kill(pid, 0); said["pid_after"] = "running"
except ProcessLookupError:
    said["pid_after"] = "gone"
print("RESULT " + json.dumps(said), flush=True)
"""
)


@pytest.fixture(scope="module")
def class_server():
    """A fork server for a class whose cgroups are this test's, and one student account."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd, as make hub does")
    tag = secrets.token_hex(3)
    groups, line = classroom.class_cgroups(f"blitz-kf-{tag}", classroom.mem_total())
    if groups is None:
        pytest.skip(line)
    name = f"kf{tag}"
    subprocess.run(
        ["useradd", "--create-home", "-K", "HOME_MODE=0700", "--shell", "/bin/bash", name],
        check=True,
    )
    top = Path(tempfile.mkdtemp(prefix="kf-"))
    os.chmod(top, 0o755)
    python = str(_students_python(top))  # the hub's test does the same
    (top / "kernels").mkdir(mode=0o755)
    sock = top / "kernels" / "fork.sock"
    env = {**os.environ, kernelfork.CGROUPS_ENV: kernelfork.cgroups_json(groups)}
    env["OMP_NUM_THREADS"] = "1"
    server = subprocess.Popen(
        [python, "-m", "tools.teaching.kernelfork", str(sock)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # ready when it says so (it imports PyTorch first); bounded
        ready, _, _ = select.select([server.stderr], [], [], 120)
        said = server.stderr.readline() if ready else ""
        assert "imported; at" in said, f"fork server did not start: {said!r}"
        yield groups, name, sock, python
    finally:
        server.kill()
        server.wait()
        groups.kill(name)
        groups.remove()
        subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
        shutil.rmtree(top, ignore_errors=True)


def _student_server(name: str, sock: Path, groups, python: str, confine: bool) -> dict:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.path.expanduser(f"~{name}"),
        "OMP_NUM_THREADS": "1",
        "JUPYTER_RUNTIME_DIR": os.path.expanduser(f"~{name}/.local/share/jupyter/runtime"),
        "BLITZ_KERNEL_FORK": str(sock),
    }
    server = subprocess.Popen(
        [python, "-I", "-c", SERVER],
        user=name,
        cwd=env["HOME"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if confine:  # as ClassSpawner.start does for a student's server
        groups.confine(name, server.pid, classroom.mem_total())
    out, err = server.communicate("go\n", timeout=240)
    result = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert result, f"the student's server failed:\n{out}\n{err[-3000:]}"
    return {**json.loads(result[0][7:]), "log": err}


@pytest.mark.e2e
def test_a_confined_server_gets_a_forked_kernel_as_its_student(class_server):
    groups, name, sock, python = class_server
    said = _student_server(name, sock, groups, python, confine=True)
    assert said["forked"], said["log"][-3000:]
    status, text = said["first"]
    assert status == "ok", text
    kernel = eval(text)  # the repr of a dict of plain values, printed by the kernel
    assert kernel["preloaded"] is True  # forked after import torch: nothing to import again
    assert kernel["uid"] == int(subprocess.check_output(["id", "-u", name]))
    assert kernel["ppid"] != said["server_pid"]  # the fork server's child, not the server's
    assert kernel["cwd"] == os.path.expanduser(f"~{name}")
    assert kernel["mark"] == "from the request"  # the environment the server gave it
    assert f"memory:/{groups.base.name}/{name}" in kernel["cgroup"]  # the student's cap
    assert said["torch"] == ["ok", "1 3.0\n"]  # OMP_NUM_THREADS of its environment
    assert said["interrupted"] == "KeyboardInterrupt"  # the server's signals reach it
    assert said["alive_after"] is False and said["pid_after"] == "gone"
    # what forking saves: the kernel's own memory against a fresh Python's after the same imports
    forked = int(said["private_mib"])
    fresh = int(subprocess.check_output([python, "-c", PRIVATE], text=True))
    print(f"own memory after import torch: forked kernel {forked} MiB, fresh Python {fresh} MiB")
    assert forked < fresh / 2, (forked, fresh)


@pytest.mark.e2e
def test_a_process_the_hub_did_not_confine_gets_no_kernel(class_server):
    groups, name, sock, python = class_server
    said = _student_server(name, sock, groups, python, confine=False)
    # the server still gets its kernel, started as usual, and its log says why
    assert not said["forked"]
    assert "is not a server this hub confined" in said["log"]
    status, text = said["first"]
    assert status == "ok" and eval(text)["ppid"] == said["server_pid"]


@pytest.mark.e2e
def test_root_is_refused(class_server):
    from blitz_hubkernel import ForkRefused, ask

    sock = class_server[2]
    with pytest.raises(ForkRefused, match="root"):
        ask(str(sock), "/nonexistent.json", "/", {})


def test_only_this_pythons_ipykernel_is_forked():
    from blitz_hubkernel import _connection_file

    me = sys.executable
    assert _connection_file([me, "-m", "ipykernel_launcher", "-f", "k.json"]) == "k.json"
    assert _connection_file(["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "k"]) is None
    assert _connection_file([me, "-m", "other_kernel", "-f", "k.json"]) is None
    assert _connection_file([me, "-m", "ipykernel_launcher", "-f", "k", "--debug"]) is None


def test_forked_reports_an_ended_process():
    from blitz_hubkernel import Forked

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    watched = Forked(child.pid, os.pidfd_open(child.pid))
    assert watched.poll() is None
    watched.terminate()
    child.wait(timeout=30)  # reaped by its parent, as the fork server reaps its kernels
    started = time.monotonic()
    assert watched.wait(timeout=30) == 0 and time.monotonic() - started < 30
    watched.kill()  # ended: nothing to signal, no error
