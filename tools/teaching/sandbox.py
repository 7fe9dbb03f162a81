"""Where a submitted notebook runs while it is graded: a kernel under a throw-away Unix user.

nbgrader executes a submission in a Jupyter kernel; the notebook is a student's, so its code
is untrusted. The grader (tools/teaching/grade.py, as root) hands nbgrader
:class:`SandboxedExecute` in place of its ``Execute`` step, whose kernels
:class:`SandboxKernelManager` starts like this, one per submission:

- **its own user**: ``useradd`` makes a system user ``bgr<8 hex>`` with its own group and no
  login; ``setpriv`` drops to it (no supplementary groups, no capabilities, no new
  privileges) before Python starts. ``userdel`` removes it afterwards.
- **its own folder**: a fresh folder owned by that user (mode 0700) is the kernel's working
  folder, ``HOME`` and ``TMPDIR``; the connection file and the kernel's sockets (ZeroMQ over
  Unix sockets, ``ipc``) are there too. The folder is removed afterwards, never through a link.
- **its own namespaces** (``unshare``): a private mount namespace where ``/tmp``,
  ``/var/tmp``, ``/dev/shm`` and ``/run/lock`` (the machine's world-writable folders) are empty
  size-limited tmpfs that vanish with the kernel, and where the nbgrader course (gradebook,
  source notebooks with the hidden tests), the submissions folder and the output folder are
  covered by an empty tmpfs as well (they are root's, mode 0700, besides); a private PID
  namespace, whose first process is the kernel: killing it ends every process the
  submission started, however it forked; a network namespace without any interface up (no
  network at all); private IPC and host name.
- **bounds**: at most ``nproc`` processes and threads for the user, ``memory`` bytes of
  address space per process (16 GiB by default: 4 GiB was too little once for torch with its
  threads and CUDA libraries mapped, though nothing was used), files of
  at most ``fsize`` bytes, no core files (``prlimit``); each cell at most ``timeout`` seconds (then
  an interrupt), the whole submission at most ``submission_timeout`` seconds: what is not
  run by then gets an error and no points, what finished keeps its points; output kept of a
  cell at most ``max_output_bytes``.
- **cleanup**: the kernel is killed (SIGKILL to the namespace's first process, then to every
  process still running as the user), the folder and the user are removed, and anything
  the user owns in the machine's world-writable folders (there should be none) is removed
  and named in the log. A ledger file lists each user before it exists, so the grader
  removes what a crashed run left.

What this does not protect: the hidden tests run in the submission's own kernel (that is how
nbgrader grades), so a submission that deliberately tampers with the interpreter (IPython's
input transformers, patching torch) can fool the score, though never the machine, the other
submissions or the gradebook; the teacher reads its feedback. The checks are re-imported
from their files before each test (tools/teaching/assignments.py), so overwriting ``ex`` or
a check function does not change a score. The lessons' solutions are public (a self-learner
has them folded), so they are not hidden from the kernel.

Linux only, as root (creating users and namespaces needs it): ``check_host`` says so in one
line otherwise.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer, List, Unicode

USER_PREFIX = "bgr"  # "blitz grader": the throw-away users' names begin so
# The world-writable folders on a Debian machine: covered inside the kernel's namespace,
# searched for the user's files afterwards all the same.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
HOLD = "/mnt"  # where the sandbox's script holds paths aside (a tmpfs in its own namespace)
TOOLS = ("useradd", "userdel", "setpriv", "unshare", "prlimit", "mount", "ip")


def check_host() -> str | None:
    """Why submissions cannot be isolated here (one line), or None when they can."""
    if sys.platform != "linux":
        return "the grader isolates each submission with Linux users and namespaces: use Linux"
    if os.geteuid() != 0:
        return (
            "the grader creates a throw-away user per submission, which needs root: "
            "run it as root (sudo make grade ..., or in a container or VM)"
        )
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        needs = ", ".join(missing)
        return f"the grader needs {needs} (Debian: apt-get install util-linux passwd iproute2)"
    return None


def _users_processes(uid: int) -> list[int]:
    """The live processes running as ``uid`` (a zombie has ended: only its parent can reap it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            found.append(int(entry))
    return found


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``/proc/<pid>/.../children`` is not always
    compiled in, so the status files are read)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == pid:
                            found.append(int(entry))
                        break
        except OSError:
            continue
    return found


def kill_user(uid: int, wait_s: float = 10.0) -> int:
    """SIGKILL every process running as ``uid`` until none is left; how many were seen."""
    seen: set[int] = set()
    deadline = time.monotonic() + wait_s
    while pids := _users_processes(uid):
        seen.update(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of uid {uid} still running: {pids}")
        time.sleep(0.05)
    return len(seen)


def create_user(ledger: Path | None) -> pwd.struct_passwd:
    """A fresh system user and group, no home, no login; named in ``ledger`` first."""
    name = f"{USER_PREFIX}{secrets.token_hex(4)}"
    if ledger is not None:
        with ledger.open("a", encoding="ascii") as f:
            f.write(name + "\n")
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
        + ["--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(name)


def remove_user(name: str, log=None) -> None:
    """Kill the user's processes, remove its files in the shared writable folders, then the
    user and its group. A name that is not one of ours, or no longer exists: nothing."""
    if not name.startswith(USER_PREFIX):
        return
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        return
    kill_user(user.pw_uid)
    for folder in SHARED_WRITABLE:
        for leftover in _owned_in(Path(folder), user.pw_uid):
            if log is not None:
                log.warning("removing %s, left by the submission's user %s", leftover, name)
            _remove(leftover)
    subprocess.run(["userdel", name], check=True, capture_output=True)


def _owned_in(folder: Path, uid: int) -> list[Path]:
    """What ``uid`` owns directly in ``folder`` (not following links)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    return [p for p in entries if _owner(p) == uid]


def _owner(path: Path) -> int | None:
    try:
        return path.lstat().st_uid
    except OSError:
        return None


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)  # removes links it meets, never what they point to


def _closed_ancestor(path: Path) -> Path | None:
    """The highest folder above ``path`` that other users cannot enter (no o+x), or None."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not parent.stat().st_mode & 0o001:
            return parent
    return None


def needed_paths(project: Path) -> list[Path]:
    """What the kernel must read: the project (its ``utils``) and the Python running it."""
    found = []
    for path in (project, Path(sys.prefix), Path(sys.base_prefix)):
        real = path.resolve()
        if real not in found:
            found.append(real)
    return found


def _sandbox_script(box: Path, needed: list[Path], hidden: list[str]) -> str:
    """The shell lines run as root inside the new namespaces before dropping to the user.

    A needed path below a folder closed to other users (a Python installed under /root, say)
    is shown there alone: the closed folder is covered by an empty tmpfs in which only that
    path reappears (bind-mounted), so the rest of it stays out of sight."""
    # The new network namespace has only a loopback, and it starts down: up, it is the
    # submission's own (notebook 05 launches torchrun on 127.0.0.1); nothing else is reachable.
    lines = ["set -e", "umask 022", "ip link set lo up"]
    covered: list[Path] = []
    for i, path in enumerate(needed):
        closed = _closed_ancestor(path)
        if closed is None:
            continue
        stage = shlex.quote(str(box / f".stage{i}"))
        lines += [f"mkdir {stage}", f"mount --bind {shlex.quote(str(path))} {stage}"]
        if closed not in covered:
            lines.append(f"mount -t tmpfs -o size=64k,mode=755 tmpfs {shlex.quote(str(closed))}")
            covered.append(closed)
        lines += [
            f"mkdir -p {shlex.quote(str(path))}",
            f"mount --move {stage} {shlex.quote(str(path))}",
        ]
        lines.append(f"rmdir {stage}")
    # A needed path inside a shared writable folder (a checkout under /tmp) is held aside on a
    # tmpfs of this namespace's own while that folder is covered, then put back in the new one.
    inside = [p for p in needed if any(p.is_relative_to(f) for f in SHARED_WRITABLE)]
    if inside:
        lines.append(f"mount -t tmpfs -o size=64k,mode=700 tmpfs {HOLD}")
    for i, path in enumerate(inside):
        lines += [f"mkdir {HOLD}/{i}", f"mount --bind {shlex.quote(str(path))} {HOLD}/{i}"]
    for folder in SHARED_WRITABLE:
        lines.append(
            f"if [ -d {folder} ]; then mount -t tmpfs -o nosuid,nodev,size=256m,mode=1777 "
            f"tmpfs {folder}; fi"
        )
    for i, path in enumerate(inside):
        q = shlex.quote(str(path))
        lines += [f"mkdir -p {q}", f"mount --move {HOLD}/{i} {q}"]
    if inside:
        lines.append(f"umount {HOLD}")
    for folder in hidden:
        q = shlex.quote(folder)
        lines.append(f"if [ -d {q} ]; then mount -t tmpfs -o size=64k,mode=000 tmpfs {q}; fi")
    lines.append('exec "$@"')
    return "\n".join(lines)


class SandboxKernelManager(AsyncKernelManager):
    """Starts a Python kernel as a fresh throw-away user in fresh namespaces (module docstring);
    removes the user and its folder when the kernel is cleaned up."""

    work_root = Unicode(help="folder (root's) in which each kernel gets its own folder").tag(
        config=True
    )
    hidden_paths = List(Unicode(), help="folders the kernel must not see").tag(config=True)
    project = Unicode(help="the project's folder (the kernel imports its utils)").tag(config=True)
    ledger = Unicode("", help="file listing every user created, before it exists").tag(config=True)
    nproc = Integer(256, help="processes and threads the user may run").tag(config=True)
    fsize = Integer(256 * 2**20, help="largest file the user may write, in bytes").tag(config=True)
    memory = Integer(16 * 2**30, help="address space of each process, in bytes").tag(config=True)
    kernel_env = List(
        Unicode(),
        help="NAME=VALUE settings for the kernel (nothing else of the grader's environment)",
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs.pop("kernel_name", None)  # the notebook's kernel name: we start our own
        super().__init__(**kwargs)
        self.user: pwd.struct_passwd | None = None
        self.box: Path | None = None
        # interrupt by a signal to the kernel itself (its process group is unshare's)
        self._kernel_spec = KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name="Python 3 (sandboxed)",
            language="python",
            interrupt_mode="signal",
        )
        self.transport = "ipc"

    @property
    def ipykernel(self) -> bool:
        return True

    async def _async_pre_start_kernel(self, **kw):
        if not self.work_root:
            raise RuntimeError("SandboxKernelManager.work_root is not set")
        self.user = create_user(Path(self.ledger) if self.ledger else None)
        self.box = Path(self.work_root) / self.user.pw_name
        self.box.mkdir(mode=0o700)
        os.chown(self.box, self.user.pw_uid, self.user.pw_gid)
        self.connection_file = str(self.box / "kernel.json")
        self.ip = str(self.box / "ipc")
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.box),
            "TMPDIR": str(self.box),
            "USER": self.user.pw_name,
            "LOGNAME": self.user.pw_name,
            "LANG": "C.UTF-8",
            "MPLBACKEND": "agg",
        }
        env.update(item.split("=", 1) for item in self.kernel_env if "=" in item)
        kw["env"] = env
        kw["cwd"] = str(self.box)
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        os.chown(self.connection_file, self.user.pw_uid, self.user.pw_gid)
        uid, gid = self.user.pw_uid, self.user.pw_gid
        script = _sandbox_script(self.box, self._needed(), list(self.hidden_paths))
        wrapped = [
            "unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child",
            "--mount-proc", "--propagation", "private", "--",
            "/bin/sh", "-c", script, "sandbox",
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--",
            "prlimit", f"--nproc={self.nproc}", f"--fsize={self.fsize}", f"--as={self.memory}",
            "--core=0", "--",
            *cmd,
        ]  # fmt: skip
        return wrapped, kw

    def _needed(self) -> list[Path]:
        return needed_paths(Path(self.project or Path(__file__).resolve().parents[2]))

    def _kernel_pid(self) -> int | None:
        """The kernel: the one child of ``unshare`` (the first process of its namespace)."""
        process = getattr(self.provisioner, "process", None)
        if process is None:
            return None
        children = _children(process.pid)
        return children[0] if children else None

    async def _async_interrupt_kernel(self) -> None:
        pid = self._kernel_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        if self.user is not None:
            kill_user(self.user.pw_uid)  # the namespace's first process, so all of it
        await super()._async_kill_kernel(restart=restart)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:
            self.remove_sandbox()

    def remove_sandbox(self) -> None:
        """Kill what runs as the user, remove its folder, then the user."""
        if self.user is None:
            return
        kill_user(self.user.pw_uid)
        if self.box is not None and not self.box.is_symlink() and self.box.is_dir():
            shutil.rmtree(self.box)
        remove_user(self.user.pw_name, self.log)
        self.user, self.box = None, None


def _error(ename: str, message: str):
    return new_output("error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class SandboxedExecute(Execute):
    """nbgrader's Execute step with a time bound for the whole submission, bounded output,
    and a kernel that crashes or hangs costing only the cells it did not finish."""

    submission_timeout = Integer(600, help="seconds for the whole submission").tag(config=True)
    max_output_bytes = Integer(1_000_000, help="output kept of one cell").tag(config=True)

    def __init__(self, **kwargs):
        kwargs["kernel_manager_class"] = SandboxKernelManager  # Execute's own default wins else
        super().__init__(**kwargs)

    report_dir = Unicode("", help="folder for <student>.txt: why cells were not run").tag(
        config=True
    )

    def preprocess(self, nb, resources, km=None):
        self._deadline = time.monotonic() + self.submission_timeout
        self._stopped: str | None = None
        self._interrupted: list[int] = []  # code cells (counted from 1) cut by their limit
        self.timeout_func = self._cell_timeout
        self.shutdown_kernel = "immediate"
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            student = resources.get("nbgrader", {}).get("student")
            said = [self._stopped] if self._stopped else []
            if self._interrupted:
                cells = ", ".join(map(str, self._interrupted))
                said.insert(0, f"interrupted after {self.timeout} s: code cell {cells}")
            if said and self.report_dir and student:
                report = Path(self.report_dir) / f"{student}.txt"
                report.write_text("; ".join(said), encoding="utf-8")

    def _cell_timeout(self, cell) -> int:
        left = self._deadline - time.monotonic()
        return max(1, int(min(self.timeout, left) + 0.999))

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
        if self._stopped is None and time.monotonic() >= self._deadline:
            self._stopped = f"the submission's time limit ({self.submission_timeout} s) ran out"
        if self._stopped is not None:
            cell.outputs = [_error("NotRun", f"not run: {self._stopped}")]
            return cell
        try:
            cell = await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
        except DeadKernelError:
            self._stopped = "the kernel stopped (the code above crashed or exited)"
            cell.outputs.append(_error("DeadKernelError", self._stopped))
        except CellTimeoutError:
            self._stopped = f"a cell did not stop within {self.timeout} s, even when interrupted"
            cell.outputs.append(_error("CellTimeoutError", self._stopped))
        if self._stopped is None and time.monotonic() >= self._deadline:
            self._stopped = f"the submission's time limit ({self.submission_timeout} s) ran out"
            if not any(o.output_type == "error" for o in cell.outputs):
                cell.outputs.append(_error("TimeLimit", self._stopped))
        elif self._stopped is None and any(
            o.get("ename") == "CellTimeoutError" for o in cell.outputs
        ):  # cut by its own limit, and the kernel went on
            self._interrupted.append(self.code_cells_executed)
        return cell

    # nbclient binds its synchronous wrapper to its own coroutine: bind it to ours
    execute_cell = run_sync(async_execute_cell)

    def output(self, outs, msg, display_id, cell_index):
        # counted as it arrives: a cell printing in a loop until its timeout would otherwise
        # fill the grader's memory before nbgrader's LimitOutput trims it
        if getattr(self, "_counted_cell", None) != cell_index:
            self._counted_cell, self._counted = cell_index, 0
        self._counted += len(str(msg.get("content", "")))
        if self._counted > self.max_output_bytes:
            if self._counted - len(str(msg.get("content", ""))) <= self.max_output_bytes:
                outs.append(new_output("stream", name="stdout", text="\n[output cut]\n"))
            return None
        return super().output(outs, msg, display_id, cell_index)
