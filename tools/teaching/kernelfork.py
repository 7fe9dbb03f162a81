"""Students' kernels forked from one Python that has already imported PyTorch (``make hub``).

A kernel started as ``python -m ipykernel_launcher`` spends about 370 MiB of memory of its
own on ``import torch`` and torchvision before its first cell: Python objects and PyTorch's
tables, written once and then only read (measured with ``/proc/<pid>/smaps_rollup``). Forty
kernels would hold forty copies. Here one process, the *fork server*, imports them once, as
root, and each student's kernel is a ``fork()`` of it: the pages it never writes stay shared
(copy-on-write; ``gc.freeze()`` keeps the garbage collector from writing to them).

The hub runs the fork server as a managed service (``jupyterhub_config.py``). A student's
server asks it for a kernel through a Unix socket (``tools/teaching/hubkernel``, installed as
``blitz_hubkernel``: jupyter_client's kernel provisioner interface, named in
``pyproject.toml``). Its rules:

* it forks only for a process the hub put in a student's cgroups (``SO_PEERCRED``: the asking
  process, its user, and that user's folders listing it), never for root;
* the new process joins that student's cgroups and becomes that student (groups, gid, uid)
  before it reads a byte of the request; the fork server itself reads nothing a student sent;
* the kernel then takes the request's working folder, environment and standard output as
  the server would have given them to ``python -m ipykernel_launcher -f <connection file>``,
  and answers with its pid and a pidfd (the server watches and signals it through that).
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import pwd
import signal
import socket
import struct
import sys
from pathlib import Path

from blitz_hubkernel import ASK_TIMEOUT_S, ForkRefused

CGROUPS_ENV = "BLITZ_KERNEL_CGROUPS"  # the class's cgroups (JSON), in the fork server's
# What the fork server imports once: what every lesson imports, and the kernel itself. Not
# matplotlib: it reads its settings from the importing user's home at import.
PRELOAD = ("numpy", "torch", "torchvision", "ipykernel.kernelapp")
REQUEST_LIMIT = 1 << 20  # a kernel's environment and folder; more is refused


def _cgroups_from(text: str):
    from tools.teaching.classroom import Cgroups

    spec = json.loads(text)
    return Cgroups(Path(spec["base"]), int(spec["version"]), tuple(map(Path, spec["others"])))


def cgroups_json(groups) -> str:
    return json.dumps(
        {
            "base": str(groups.base),
            "version": groups.version,
            "others": list(map(str, groups.others)),
        }
    )


def _student(conn: socket.socket, groups) -> str:
    """The name of the student whose confined process is at the other end of ``conn``."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    if uid == 0:
        raise ForkRefused("root's kernels are started as usual")
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        raise ForkRefused(f"uid {uid} has no account") from None
    if pid not in groups.processes(name):
        raise ForkRefused(f"pid {pid} is not a server this hub confined for {name}")
    return name


def _become(name: str, groups) -> None:
    """This process: in ``name``'s cgroups, then ``name`` (groups, gid, uid), in a session of
    its own (the server signals the kernel's group)."""
    for folder in groups.folders(name):
        (folder / "cgroup.procs").write_text(str(os.getpid()))
    account = pwd.getpwnam(name)
    os.initgroups(name, account.pw_gid)
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
    if os.getuid() == 0 or os.geteuid() == 0:
        raise PermissionError("still root")
    os.setsid()


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 2)
    while not data.endswith(b"\n"):
        if len(data) > REQUEST_LIMIT:
            raise ValueError("request too long")
        more = conn.recv(65536)
        if not more:
            raise ValueError("request cut short")
        data += more
    request = json.loads(data)
    if not (
        isinstance(request.get("connection_file"), str)
        and isinstance(request.get("cwd"), str)
        and isinstance(request.get("env"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in request["env"].items())
    ):
        raise ValueError("request is not {connection_file, cwd, env}")
    return request, fds


def _kernel(conn: socket.socket, name: str, groups) -> None:
    """The forked child: become the student, take the request, answer, run the kernel; never
    returns to the fork server's loop (the interpreter exits as a kernel's does)."""
    atexit._clear()  # the fork server's exit handlers are not the kernel's
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(
            signum, signal.SIG_DFL if signum != signal.SIGINT else signal.default_int_handler
        )
    try:
        _become(name, groups)
        conn.settimeout(ASK_TIMEOUT_S)
        request, fds = _read_request(conn)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for target, fd in zip((1, 2), fds, strict=False):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:  # the pool was not started: set as at import
            import torch

            torch.set_num_threads(int(threads))
        # sys.path as `python -m ipykernel_launcher` has it: PYTHONPATH, then the venv's
        # (the server's folder is not the kernel's; IPython adds the working folder back)
        sys.path[:] = [
            *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p),
            *(p for p in sys.path[1:] if p),
        ]
        pidfd = os.pidfd_open(os.getpid())
        socket.send_fds(conn, [json.dumps({"pid": os.getpid()}).encode()], [pidfd])
        os.close(pidfd)
        conn.close()
    except Exception as err:  # told to the server, which starts the kernel as usual
        try:
            conn.sendall(json.dumps({"error": f"{type(err).__name__}: {err}"}).encode())
        finally:
            os._exit(1)
    import ipykernel_launcher
    from ipykernel.kernelapp import IPKernelApp

    sys.argv = [ipykernel_launcher.__file__, "-f", request["connection_file"]]
    IPKernelApp.launch_instance(argv=sys.argv[1:])
    sys.exit(0)


def serve(path: Path, groups) -> None:
    """Import PRELOAD, then fork a kernel for each confined student who asks at ``path``."""
    for module in PRELOAD:
        importlib.import_module(module)
    gc.collect()
    gc.freeze()  # collections then leave the imported objects' pages alone (shared)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels are reaped as they end
    from tools import owned

    if problem := owned.root_folder(path.parent, 0o755):
        raise SystemExit(f"kernel fork server: {problem}")
    if path.is_socket():
        path.unlink()  # a socket left by an earlier server, in the hub's own folder
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o666)  # any student may ask; _student decides who gets a kernel
    listener.listen(64)
    print(f"kernel fork server: {', '.join(PRELOAD)} imported; at {path}", file=sys.stderr)
    while True:
        conn, _addr = listener.accept()
        try:
            name = _student(conn, groups)
        except (ForkRefused, OSError) as err:
            try:
                conn.setblocking(False)
                conn.send(json.dumps({"error": str(err)}).encode())
            except OSError:
                pass
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            _kernel(conn, name, groups)
        conn.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]), _cgroups_from(os.environ[CGROUPS_ENV]))
