"""Where a submitted notebook runs while it is graded: a kernel under a throw-away Unix user.

nbgrader executes a submission in a Jupyter kernel; the notebook is a student's, so its code
is untrusted. The grader (tools/teaching/grade.py, as root) hands nbgrader
:class:`SandboxedExecute` in place of its ``Execute`` step, whose kernels
:class:`SandboxKernelManager` starts like this, one per submission:

- **its own user**: ``useradd`` makes a system user ``bgr<8 hex>`` with its own group and no
  login; ``setpriv`` drops to it (no supplementary groups, no capabilities, no new
  privileges) before Python starts. ``userdel`` removes it afterwards.
- **its own folder, in a short path**: ``/run/bgr-<random>/`` (``tempfile.mkdtemp``: root's,
  mode 0700; ``/tmp`` where there is no ``/run``) holds the submission's folder ``box`` (the
  user's, 0700: working folder and ``HOME``, the connection file and the kernel's ZeroMQ Unix
  sockets) and the short ``passwd``/``group`` files the kernel sees. A Unix socket's path is
  at most 107 bytes, so nothing here depends on the checkout's path (a kernel's sockets under
  a deep checkout could not be bound and every submission scored 0). Removed afterwards,
  never through a link.
- **an allow-list file system** (bubblewrap, ``bwrap``): the kernel's root is an empty tmpfs
  into which only these are mounted: ``/usr`` (and the ``/bin``, ``/lib``... links or folders
  beside it) and the Python running the grader (its venv and base install) read-only, the
  project's ``utils`` and ``scripts`` read-only (the lessons' code and checks, the script
  lesson 05 launches), the paths named in
  ``read_only_paths`` and absolute paths in ``kernel_env`` (the CIFAR-10 subset) read-only,
  a few files of ``/etc`` that programs read (the loader's cache, time zone, certificates;
  not ``passwd``: the kernel gets one naming root and its own user), its own folder
  read-write, a fresh ``/proc`` and ``/dev``, and empty private tmpfs ``/tmp``, ``/var/tmp``,
  ``/dev/shm``. Nothing else exists there: no ``/home``, ``/srv``, ``/root``, no ``build/``
  (grades, gradebook, other submissions), no other file of the checkout, no ``/run`` or any
  other Unix socket of the machine. Namespaces: PID (killing the kernel's namespace ends
  every process it started), network (only a loopback of its own: notebook 05 runs torchrun
  on 127.0.0.1), IPC, host name, cgroup.
- **bounds for the submission in total** (a cgroup, v2 or v1, ``blitz-grade/<user>``): at
  most ``memory`` bytes of memory for all its processes together (no swap: the kernel's OOM
  killer ends the largest of them) and at most ``pids`` processes and threads together (a
  fork bomb stops there). Per process (``prlimit``): ``address_space`` bytes of address space
  (torch maps far more than it uses), files of at most ``fsize`` bytes, no core files, and
  ``nproc`` processes for the user. Each cell at most ``timeout`` seconds (then an
  interrupt), the whole submission at most ``submission_timeout`` seconds: what is not run
  by then gets an error and no points, what finished keeps its points; output kept of a cell
  at most ``max_output_bytes``.
- **cleanup**: the kernel is killed (SIGKILL to every process running as the user), the
  cgroup, the folder and the user are removed, and anything the user owns in the machine's
  world-writable folders (there can be none: the kernel never sees them) is removed and
  named in the log. A ledger file lists each user before it exists, so the grader removes
  what a crashed run left.

What this does not protect: the submission's kernel is its own, so its code can change
anything in it (IPython's input transformers, ``print``, import hooks, patching torch); the
grader therefore judges the checks in its own process on values the kernel hands over as data
(tools/teaching/judge.py), where such code cannot reach the verdict. It cannot reach the
machine, the other submissions or the gradebook either. The lessons' solutions are
public (a self-learner has them folded), so they are not hidden from the kernel.

Linux only, as root (creating users, namespaces and cgroups needs it), with bubblewrap
installed and cgroups writable: ``check_host`` says what is missing in one line otherwise.
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
import tempfile
import time
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer, List, Unicode

from tools.teaching.words import in_lang

USER_PREFIX = "bgr"  # "blitz grader": the throw-away users' names begin so
# The world-writable folders on a Debian machine: private tmpfs inside the kernel's sandbox,
# searched for the user's files afterwards all the same.
SHARED_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
TOOLS = ("bwrap", "useradd", "userdel", "setpriv", "prlimit")
# Where each kernel's folder is made: short, so that its Unix sockets' paths stay far below
# the 107 bytes a socket path may have, wherever the checkout is.
SHORT_ROOTS = ("/run", "/tmp")
CGROUP_NAME = "blitz-grade"  # the cgroup folder under which each submission gets its own
# What programs read in /etc (the loader's cache, time zone, certificates, alternatives' links);
# passwd, group and hosts are written for each kernel (naming no account or host of the
# machine).
ETC_READ = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "ssl",
    "ca-certificates", "fonts", "nsswitch.conf", "mime.types", "matplotlibrc",
)  # fmt: skip
INSTALL = "make grade-tools, or apt-get install bubblewrap util-linux passwd"


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
        return f"the grader needs {', '.join(missing)} to isolate submissions (Debian: {INSTALL})"
    try:
        Cgroup.parents()
    except OSError as err:
        return (
            f"the grader caps each submission's memory and processes with a cgroup, and "
            f"cgroups are not writable here ({err}): run it where /sys/fs/cgroup is writable"
        )
    return None


class Cgroup:
    """One submission's cgroup: memory (no swap) and processes of all its processes together.
    cgroup v2 (one tree with the memory and pids controllers) or v1 (one tree per controller)."""

    V2 = Path("/sys/fs/cgroup")

    @classmethod
    def parents(cls) -> list[Path]:
        """The grader's cgroup folders (made if needed): one on v2, memory and pids on v1."""
        v2 = cls.V2
        controllers = v2 / "cgroup.controllers"
        if controllers.exists() and {"memory", "pids"} <= set(controllers.read_text().split()):
            parent = v2 / CGROUP_NAME
            parent.mkdir(exist_ok=True)
            for folder in (v2, parent):  # hand both controllers down to the submissions
                (folder / "cgroup.subtree_control").write_text("+memory +pids")
            return [parent]
        found = []
        for controller in ("memory", "pids"):
            if not (v2 / controller / "cgroup.procs").exists():
                raise OSError(f"no {controller} cgroup controller")
            parent = v2 / controller / CGROUP_NAME
            parent.mkdir(exist_ok=True)
            found.append(parent)
        return found

    def __init__(self, name: str, memory: int, pids: int):
        self.folders = [parent / name for parent in self.parents()]
        for folder in self.folders:
            folder.mkdir()
            limits = {
                "memory.max": memory,
                "memory.swap.max": 0,
                "memory.limit_in_bytes": memory,
                "memory.memsw.limit_in_bytes": memory,  # memory and swap together: no swap
                "pids.max": pids,
            }
            for file, value in limits.items():
                if (folder / file).exists():
                    (folder / file).write_text(str(value))

    def ran_out_of_memory(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this cgroup (v2: memory.events;
        v1: memory.oom_control), so a note can name the memory limit rather than a crash."""
        for folder in self.folders:
            for file in ("memory.events", "memory.oom_control"):
                try:
                    text = (folder / file).read_text()
                except OSError:
                    continue
                counts = dict(line.split()[:2] for line in text.splitlines() if line.strip())
                if int(counts.get("oom_kill", 0)) > 0:
                    return True
        return False

    def join_command(self) -> list[str]:
        """A command prefix that moves itself into the cgroup, then runs the rest."""
        procs = [shlex.quote(str(folder / "cgroup.procs")) for folder in self.folders]
        moves = " && ".join(f"echo $$ > {file}" for file in procs)
        return ["/bin/sh", "-c", f'{moves} && exec "$@"', "cgroup"]

    def remove(self) -> None:
        for folder in self.folders:
            self.remove_folder(folder)

    @staticmethod
    def remove_folder(folder: Path) -> None:
        """Remove a submission's cgroup folder, if there (its processes have been killed; the
        kernel may take a moment to let go of them)."""
        for _ in range(100):
            try:
                folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        folder.rmdir()  # still busy: say so


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
    _remove_leftovers(name)
    for folder in SHARED_WRITABLE:
        for leftover in _owned_in(Path(folder), user.pw_uid):
            if log is not None:
                log.warning("removing %s, left by the submission's user %s", leftover, name)
            _remove(leftover)
    subprocess.run(["userdel", name], check=True, capture_output=True)


def _remove_leftovers(name: str) -> None:
    """The short folders and the cgroup a kernel of user ``name`` had, if a run cut short left
    them (the folders are root's: mkdtemp made them)."""
    for root in SHORT_ROOTS:
        for folder in Path(root).glob(f"{name}-*"):
            if not folder.is_symlink() and folder.is_dir() and _owner(folder) == 0:
                shutil.rmtree(folder)
    try:
        parents = Cgroup.parents()
    except OSError:
        return
    for parent in parents:
        Cgroup.remove_folder(parent / name)


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


def _binds(paths: list[Path], flag: str) -> list[str]:
    """``flag`` (a bind) for each path, after the folders above it, made searchable: bwrap
    would make them 0700, root's, where the user could not pass."""
    args: list[str] = []
    made: set[Path] = {Path("/")}
    for path in paths:
        for parent in reversed(path.parents):
            if parent not in made:
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        args += [flag, str(path), str(path)]
    return args


def _system_mounts() -> list[str]:
    """``/usr`` and the folders or links beside it that programs need, read-only; a few files
    of ``/etc``; fresh ``/proc``, ``/dev``; private, empty ``/tmp``-like folders."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/var"]
    for name in ETC_READ:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        args += ["--tmpfs", folder]
    return args


def needed_paths(project: Path, extra: list[str] = ()) -> list[Path]:
    """What the kernel may read: the Python running the grader (venv and base install), the
    project's ``utils`` (the lessons' code and their checks) and ``scripts`` (the script
    lesson 05 launches) and ``extra``; resolved, without repeats, and none that the system
    mounts hold already."""
    found: list[Path] = []
    wanted = [Path(sys.prefix), Path(sys.base_prefix), project / "utils", project / "scripts"]
    wanted += map(Path, extra)
    for path in wanted:
        real = path.resolve()
        if real.exists() and real not in found and not real.is_relative_to("/usr"):
            found.append(real)
    return found


class SandboxKernelManager(AsyncKernelManager):
    """Starts a Python kernel as a fresh throw-away user in a bubblewrap sandbox and a cgroup
    of its own (module docstring); removes all of it when the kernel is cleaned up."""

    work_root = Unicode(
        help="not used: each kernel's folder is made in a short folder of the grader's own "
        "(SHORT_ROOTS), whatever the checkout's path; kept so that configurations naming it load"
    ).tag(config=True)
    hidden_paths = List(
        Unicode(),
        help="not needed: the sandbox mounts only what it allows (module docstring); a path "
        "named here that the allow-list would show is refused",
    ).tag(config=True)
    read_only_paths = List(Unicode(), help="more paths the kernel may read").tag(config=True)
    project = Unicode(help="the project's folder (the kernel imports its utils)").tag(config=True)
    ledger = Unicode("", help="file listing every user created, before it exists").tag(config=True)
    nproc = Integer(256, help="processes and threads the user may run").tag(config=True)
    pids = Integer(256, help="processes and threads of the submission in total").tag(config=True)
    fsize = Integer(256 * 2**20, help="largest file the user may write, in bytes").tag(config=True)
    memory = Integer(
        16 * 2**30, help="memory of the submission, all its processes together, in bytes"
    ).tag(config=True)
    address_space = Integer(
        16 * 2**30,
        help="address space of each process, in bytes (torch maps far more than it uses)",
    ).tag(config=True)
    kernel_env = List(
        Unicode(),
        help="NAME=VALUE settings for the kernel (nothing else of the grader's environment); "
        "a value that is an existing absolute path is readable in the sandbox",
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs.pop("kernel_name", None)  # the notebook's kernel name: we start our own
        super().__init__(**kwargs)
        self.user: pwd.struct_passwd | None = None
        self.base: Path | None = None  # the short folder, root's
        self.box: Path | None = None  # the submission's folder in it, the user's
        self.cgroup: Cgroup | None = None
        # interrupt by a signal to the kernel itself (_async_interrupt_kernel)
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
        self.user = create_user(Path(self.ledger) if self.ledger else None)
        uid, gid, name = self.user.pw_uid, self.user.pw_gid, self.user.pw_name
        short = next(r for r in SHORT_ROOTS if os.path.isdir(r))
        self.base = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=short))  # 0700, root's
        self.box = self.base / "box"
        self.box.mkdir(mode=0o700)
        os.chown(self.box, uid, gid)
        etc = self.base / "etc"
        etc.mkdir()
        (etc / "passwd").write_text(
            f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{name}:x:{uid}:{gid}::{self.box}:/usr/sbin/nologin\n",
            encoding="ascii",
        )
        (etc / "group").write_text(f"root:x:0:\n{name}:x:{gid}:\n", encoding="ascii")
        # the loopback names a learner's machine resolves (torchrun --standalone rendezvous at
        # localhost; without them each try waits 60 s for a name no one answers)
        (etc / "hosts").write_text(
            "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
            encoding="ascii",
        )
        for file in etc.iterdir():
            file.chmod(0o644)  # whatever the grader's umask
        self.connection_file = str(self.box / "kernel.json")
        self.ip = str(self.box / "ipc")
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.box),
            "TMPDIR": str(self.box),
            "USER": name,
            "LOGNAME": name,
            "LANG": "C.UTF-8",
            "MPLBACKEND": "agg",
            # the project's utils, mounted at its place: before the venv's own link to a
            # checkout (an editable install may point at another one, outside the sandbox)
            "PYTHONPATH": str(self._project()),
        }
        env.update(item.split("=", 1) for item in self.kernel_env if "=" in item)
        kw["env"] = env
        kw["cwd"] = str(self.box)
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        os.chown(self.connection_file, uid, gid)
        self.cgroup = Cgroup(name, self.memory, self.pids)
        wrapped = [
            *self.cgroup.join_command(),
            *self.bwrap_args(),
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--",
            "prlimit", f"--nproc={self.nproc}", f"--fsize={self.fsize}",
            f"--as={self.address_space}", "--core=0", "--",
            *cmd,
        ]  # fmt: skip
        return wrapped, kw

    def bwrap_args(self) -> list[str]:
        """bubblewrap's command line up to the ``--`` before the command (module docstring)."""
        readable = self._needed()
        for hidden in map(Path, self.hidden_paths):
            shown = [p for p in readable if hidden.resolve().is_relative_to(p)]
            if shown:
                raise RuntimeError(f"{hidden} must be hidden but is inside {shown[0]}, allowed")
        etc = self.base / "etc"
        return [
            "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            "--hostname", "sandbox",
            # ipykernel would take the namespace's init (its parent) for a dead grader and
            # exit; parent 1 is "never polled" to it. --die-with-parent ends the sandbox with
            # the grader instead
            "--setenv", "JPY_PARENT_PID", "1",
            *_system_mounts(),
            "--ro-bind", str(etc / "passwd"), "/etc/passwd",
            "--ro-bind", str(etc / "group"), "/etc/group",
            "--ro-bind", str(etc / "hosts"), "/etc/hosts",
            *_binds(readable, "--ro-bind"),
            *_binds([self.box], "--bind"),
            "--chdir", str(self.box),
            "--",
        ]  # fmt: skip

    def _needed(self) -> list[Path]:
        values = [item.split("=", 1)[1] for item in self.kernel_env if "=" in item]
        paths = [v for v in values if v.startswith("/") and os.path.exists(v)]
        return needed_paths(self._project(), [*self.read_only_paths, *paths])

    def _project(self) -> Path:
        return Path(self.project or Path(__file__).resolve().parents[2]).resolve()

    def _kernel_pid(self) -> int | None:
        """The kernel: the first process running as the user below the one we started
        (below it: the cgroup's shell became bwrap, which runs the namespace's init)."""
        process = getattr(self.provisioner, "process", None)
        if process is None or self.user is None:
            return None
        level = [process.pid]
        while level:
            for pid in level:
                if _owner(Path(f"/proc/{pid}")) == self.user.pw_uid:
                    return pid
            level = [child for pid in level for child in _children(pid)]
        return None

    async def _async_interrupt_kernel(self) -> None:
        pid = self._kernel_pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    # AsyncKernelManager binds its public name to its own method: bind it to ours (bwrap's
    # --new-session puts the kernel out of the process group its signal would go to)
    interrupt_kernel = _async_interrupt_kernel

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        if self.user is not None:
            kill_user(self.user.pw_uid)  # the kernel and whatever it started
        await super()._async_kill_kernel(restart=restart)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        try:
            await super()._async_cleanup_resources(restart=restart)
        finally:
            self.remove_sandbox()

    def remove_sandbox(self) -> None:
        """Kill what runs as the user, remove its cgroup and folder, then the user."""
        if self.user is None:
            return
        kill_user(self.user.pw_uid)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.base is not None and not self.base.is_symlink() and self.base.is_dir():
            shutil.rmtree(self.base)  # removes links it meets, never what they point to
        remove_user(self.user.pw_name, self.log)
        self.user, self.base, self.box, self.cgroup = None, None, None, None


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

    lang = Unicode("en", help="the language of the notes (tools/teaching/words.py)").tag(
        config=True
    )
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
                said.insert(
                    0,
                    in_lang(
                        self.lang,
                        "interrupted after {s} s: code cell {cells}",
                        s=self.timeout,
                        cells=cells,
                    ),
                )
            if said and self.report_dir and student:
                report = Path(self.report_dir) / f"{student}.txt"
                report.write_text("; ".join(said), encoding="utf-8")

    def _time_ran_out(self) -> str:
        return in_lang(
            self.lang, "the submission's time limit ({s} s) ran out", s=self.submission_timeout
        )

    def _code_cell(self, cell_index: int) -> int:
        """The cell's number among the notebook's code cells, counted from 1 as a teacher
        counts them (cells the grader did not run included)."""
        return sum(c.cell_type == "code" for c in self.nb.cells[: cell_index + 1])

    def _cell_timeout(self, cell) -> int:
        left = self._deadline - time.monotonic()
        return max(1, int(min(self.timeout, left) + 0.999))

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
        if self._stopped is None and time.monotonic() >= self._deadline:
            self._stopped = self._time_ran_out()
        if self._stopped is not None:
            cell.outputs = [
                _error("NotRun", in_lang(self.lang, "not run: {why}", why=self._stopped))
            ]
            return cell
        try:
            cell = await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
        except DeadKernelError:
            cgroup = getattr(self.km, "cgroup", None)
            if cgroup is not None and cgroup.ran_out_of_memory():
                self._stopped = in_lang(
                    self.lang,
                    "code cell {n} used up the submission's memory (--memory-gb {gb:g}) and "
                    "the kernel was stopped",
                    n=self._code_cell(cell_index),
                    gb=self.km.memory / 2**30,
                )
            else:
                self._stopped = in_lang(
                    self.lang, "the kernel stopped (the code above crashed or exited)"
                )
            cell.outputs.append(_error("DeadKernelError", self._stopped))
        except CellTimeoutError:
            self._stopped = in_lang(
                self.lang, "a cell did not stop within {s} s, even when interrupted", s=self.timeout
            )
            cell.outputs.append(_error("CellTimeoutError", self._stopped))
        if self._stopped is None and time.monotonic() >= self._deadline:
            self._stopped = self._time_ran_out()
            if not any(o.output_type == "error" for o in cell.outputs):
                cell.outputs.append(_error("TimeLimit", self._stopped))
        elif self._stopped is None and any(
            o.get("ename") == "CellTimeoutError" for o in cell.outputs
        ):  # cut by its own limit, and the kernel went on
            self._interrupted.append(self._code_cell(cell_index))
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
