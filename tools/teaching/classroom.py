"""What ``make hub`` decides for a class, in one place: the settings (from ``HUB_*`` variables),
each student's threads and memory, how many servers may run at once, the nbgitpuller link, and
the memory cgroup that enforces a student's limit (LocalProcessSpawner enforces none).
``tools/teaching/jupyterhub_config.py`` and ``tools/teaching/hub.py`` (the launcher) read it."""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = Path(sys.prefix) / "bin" / "python"  # the project's venv: every student's kernel
PROXY = ROOT / "tools" / "teaching" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
SUBSET_NAME = "cifar10-subset.npz"
STUDENTS_GROUP = "blitz-students"  # every account the hub creates, and only those, is in it
# In HUB_SRV, written when the hub makes the folder: a folder without it is not the hub's (it
# never writes into, or re-owns, a folder someone else made: /, /etc, /home).
SRV_MARK = ".made-by-make-hub"
ACCOUNTS_FILE = "accounts"  # in the state folder: the Unix accounts this hub made, one a line
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TLS_PROXY_ENV = "HUB_TLS_PROXY"  # =1: a reverse proxy in front terminates TLS (README)
COURSES = ("practice", "graded")  # HUB_COURSE: what the link hands out (Settings.pulled)
GIB = 1024**3
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": GIB, "T": 1024**4}


class SettingError(ValueError):
    """A HUB_* variable that cannot be used; the message is the one line to print."""


def _bytes(name: str, raw: str) -> int:
    match = _SIZE.match(raw)
    if not match:
        raise SettingError(f"make hub: {name}={raw!r} is not a size (e.g. 2G, 1536M)")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def _positive_bytes(name: str, raw: str) -> int:
    if (size := _bytes(name, raw)) <= 0:
        raise SettingError(f"make hub: {name}={raw!r} must be more than 0 (e.g. 2G, 1536M)")
    return size


def _int(name: str, raw: str, low: int, high: int) -> int:
    if not raw.strip().isdigit() or not low <= int(raw) <= high:
        raise SettingError(f"make hub: {name}={raw!r} is not a whole number from {low} to {high}")
    return int(raw)


# What a student typically holds (a server and one open lesson's kernel), from bench.classroom
# (TEACHING.md, "How many students one machine holds"): less where kernels are forked from the
# hub's fork server, which has imported PyTorch once for all (tools/teaching/kernelfork.py).
MEM_PER_STUDENT = {"forked": "512M", "own": "1G"}


def forks_kernels() -> bool:
    """Whether make hub here forks students' kernels: it needs the memory cgroup it confines
    each student in (root, a writable memory controller), as class_cgroups does."""
    root = Path("/sys/fs/cgroup")
    if os.geteuid() != 0:
        return False
    if (root / "memory" / "memory.limit_in_bytes").exists():
        return os.access(root / "memory", os.W_OK)
    try:
        return "memory" in (root / "cgroup.controllers").read_text().split()
    except OSError:
        return False


def mem_total() -> int:
    """Bytes of memory this machine (or the memory cgroup the hub runs in) has."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def cores() -> int:
    """CPU cores this process may run on (a container's or taskset's share, not the host's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@dataclass(frozen=True)
class Settings:
    ip: str  # where the proxy listens (students' browsers)
    port: int
    hub_port: int  # the hub's own API, on 127.0.0.1 only
    proxy_api_port: int  # the proxy's REST API, on 127.0.0.1 only
    teacher: str  # the only admin
    class_size: int
    srv: Path  # root-owned: hub/ (private state), data/ (read-only data), gitconfig,
    # exchange/ (nbgrader's homework exchange), jupyter/ (the students' servers' settings)
    lessons: Path  # the teacher's git clone: the link pulls it, or its class copy (graded)
    branch: str
    course: str  # practice (the lessons as they are) or graded (a copy without the solutions)
    mem_limit: int  # one student's hard cap (bytes), enforced by a memory cgroup
    mem_per_student: int  # what a student who has trained notebook 04 holds (bytes)
    mem_reserve: int  # kept for the hub, the proxy and the system
    active_limit: int  # servers running at once; the next student is refused with a message
    spawn_limit: int  # servers starting at once (a start costs a few CPU-seconds)
    threads: int  # OMP/MKL/torch threads per kernel
    cull_timeout: int  # seconds idle before the culler stops a server
    authenticator: str  # native (sign-up approved by the teacher) or dummy (tests, loopback)
    ssl_cert: str
    ssl_key: str

    @property
    def state_dir(self) -> Path:
        return self.srv / "hub"

    @property
    def data_dir(self) -> Path:
        return self.srv / "data"

    @property
    def gitconfig(self) -> Path:
        return self.srv / "gitconfig"

    @property
    def exchange_dir(self) -> Path:
        """nbgrader's exchange: homework out (outbound), hand-ins (inbound), feedback."""
        return self.srv / "exchange"

    @property
    def jupyter_dir(self) -> Path:
        """Settings every student's server reads (JUPYTER_CONFIG_PATH): nbgrader's exchange
        and its Lab Assignments panel, without the teacher's tools."""
        return self.srv / "jupyter"

    @property
    def kernel_socket(self) -> Path:
        """Where students' servers ask for a kernel forked with PyTorch imported (kernelfork)."""
        return self.srv / "kernels" / "fork.sock"

    @property
    def class_dir(self) -> Path:
        """The class copies (tools/teaching/classcopy.py), for a graded course."""
        return self.srv / "class"

    @property
    def pulled(self) -> Path:
        """The repository the link pulls: the teacher's clone, or for a graded course its
        class copy without the solutions (of the same name: the same folder in each home)."""
        return self.class_dir / self.lessons.name if self.course == "graded" else self.lessons

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_cert else "http"
        return f"{scheme}://{self.ip}:{self.port}"

    def link(self, notebook: str = "notebooks/01_tensors.ipynb", host: str = "") -> str:
        """The nbgitpuller link a teacher hands out: sign in, start the server, pull, open."""
        query = urlencode(
            {
                "repo": self.pulled.as_uri(),  # file:///...: a local clone, no network needed
                "urlpath": f"lab/tree/{self.pulled.name}/{notebook}",
                "branch": self.branch,
            },
            quote_via=quote,
        )
        return f"{host or self.url}/hub/user-redirect/git-pull?{query}"


def settings(environ: os._Environ | dict = os.environ) -> Settings:
    """The class's settings from HUB_* variables (defaults for a class of 40 on this machine);
    a bad value raises SettingError with the one line to print."""

    def get(name: str, default: str) -> str:
        return environ.get(name, "").strip() or default

    port = _int("HUB_PORT", get("HUB_PORT", "8000"), 1, 65535)
    # the hub's and the proxy's APIs default to HUB_PORT+1 and +2: those must be ports too
    own = [name for name in ("HUB_INTERNAL_PORT", "HUB_PROXY_API_PORT") if not get(name, "")]
    if own and port > 65533:
        raise SettingError(
            f"make hub: HUB_PORT={port} leaves no room for the hub's own ports (HUB_PORT+1 and "
            f"+2, up to 65535): choose HUB_PORT up to 65533, or set {' and '.join(own)}"
        )
    class_size = _int("HUB_CLASS_SIZE", get("HUB_CLASS_SIZE", "40"), 1, 10000)
    mem_limit = _positive_bytes("HUB_MEM_LIMIT", get("HUB_MEM_LIMIT", "2G"))
    own = MEM_PER_STUDENT["forked" if forks_kernels() else "own"]
    per_student = _positive_bytes("HUB_MEM_PER_STUDENT", get("HUB_MEM_PER_STUDENT", own))
    reserve = _bytes("HUB_MEM_RESERVE", get("HUB_MEM_RESERVE", "2G"))
    if mem_limit > (total := mem_total()):
        raise SettingError(
            f"make hub: HUB_MEM_LIMIT ({mib(mem_limit)}) is above this machine's memory "
            f"({mib(total)}): a student's cap must fit the machine"
        )
    if per_student > mem_limit:
        raise SettingError(
            f"make hub: HUB_MEM_PER_STUDENT ({per_student / GIB:.1f} GiB) is above "
            f"HUB_MEM_LIMIT ({mem_limit / GIB:.1f} GiB): a student's cap must hold what one uses"
        )
    # As many servers as the memory holds at what a student typically uses, never more than
    # the class; each is capped at HUB_MEM_LIMIT and all of them together at total - reserve
    # (cgroups), so a few heavy users can slow the class but not take the machine down.
    fits = max(1, (mem_total() - reserve) // per_student)
    active = _int("HUB_ACTIVE_LIMIT", get("HUB_ACTIVE_LIMIT", str(min(class_size, fits))), 1, 10000)
    # Threads: the cores shared by the students who may train at once (every running server),
    # at least one. OpenMP threads spin-wait, so kernels that each take every core of a shared
    # machine are slower than kernels with one thread each (TEACHING.md).
    threads = max(1, cores() // min(class_size, active))
    authenticator = get("HUB_AUTHENTICATOR", "native")
    if authenticator not in ("native", "dummy"):
        raise SettingError(
            f"make hub: HUB_AUTHENTICATOR={authenticator!r} is neither native (students sign up, "
            "the teacher approves) nor dummy (tests only, on 127.0.0.1)"
        )
    ip = get("HUB_IP", "127.0.0.1")
    if authenticator == "dummy" and ip not in ("127.0.0.1", "localhost", "::1"):
        raise SettingError(
            f"make hub: HUB_AUTHENTICATOR=dummy lets anyone in with one shared password; it is "
            f"refused on HUB_IP={ip}. Use the default (native) to open the hub to a network"
        )
    teacher = get("HUB_TEACHER", "teacher").lower()
    if not re.fullmatch(r"[a-z][a-z0-9_-]{0,30}", teacher) or teacher == "root":
        raise SettingError(
            f"make hub: HUB_TEACHER={teacher!r} is not a login name the hub may create "
            "(a letter, then letters, digits, - or _; not root)"
        )
    ssl_cert, ssl_key = get("HUB_SSL_CERT", ""), get("HUB_SSL_KEY", "")
    if bool(ssl_cert) != bool(ssl_key):
        raise SettingError("make hub: give both HUB_SSL_CERT and HUB_SSL_KEY, or neither")
    for name, value in (("HUB_SSL_CERT", ssl_cert), ("HUB_SSL_KEY", ssl_key)):
        if value and not Path(value).is_file():
            raise SettingError(f"make hub: {name}={value} is not a file; name the PEM file")
    if ip not in LOOPBACK and not ssl_cert and get(TLS_PROXY_ENV, "") != "1":
        raise SettingError(
            f"make hub: HUB_IP={ip} without TLS would send passwords in clear text: give "
            f"HUB_SSL_CERT and HUB_SSL_KEY, or {TLS_PROXY_ENV}=1 if a proxy in front terminates TLS"
        )
    course = get("HUB_COURSE", "practice")
    if course not in COURSES:
        raise SettingError(
            f"make hub: HUB_COURSE={course!r}: use practice (the lessons with their solutions) "
            "or graded (the link hands out a copy without them)"
        )
    srv = Path(get("HUB_SRV", "/srv/blitz")).resolve()
    if srv.exists() and not srv.is_dir():
        raise SettingError(f"make hub: HUB_SRV={srv} is not a folder; name a new folder")
    return Settings(
        ip=ip,
        port=port,
        hub_port=_int("HUB_INTERNAL_PORT", get("HUB_INTERNAL_PORT", str(port + 1)), 1, 65535),
        proxy_api_port=_int(
            "HUB_PROXY_API_PORT", get("HUB_PROXY_API_PORT", str(port + 2)), 1, 65535
        ),
        teacher=teacher,
        class_size=class_size,
        srv=srv,
        lessons=Path(get("HUB_LESSONS", str(ROOT))).resolve(),
        branch=get("HUB_BRANCH", "main"),
        course=course,
        mem_limit=mem_limit,
        mem_per_student=per_student,
        mem_reserve=reserve,
        active_limit=active,
        spawn_limit=max(2, 2 * cores()),
        threads=threads,
        cull_timeout=_int("HUB_CULL_TIMEOUT", get("HUB_CULL_TIMEOUT", "3600"), 60, 10**7),
        authenticator=authenticator,
        ssl_cert=ssl_cert,
        ssl_key=ssl_key,
    )


def student_environment(s: Settings) -> dict[str, str]:
    """What every student's server and kernels get (JupyterHub's Spawner.environment)."""
    from tools.publishing.lab import config_path

    threads = str(s.threads)
    env = {
        # the kernels' threads (torch reads OMP_NUM_THREADS for its intra-op pool)
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        # the venv first, as an activated venv: `!pip`, `!python` are the kernel's
        "PATH": f"{VENV_PYTHON.parent}:/usr/local/bin:/usr/bin:/bin",
        # make lab's Lab defaults (no news prompt, no update check, RISE keys): nothing written
        # and, first (it re-enables nbgrader's Lab extension, which make lab's disables), the
        # hub's: nbgrader's exchange and the Assignment List (tools/teaching/homework.py)
        "JUPYTER_CONFIG_PATH": os.pathsep.join([str(s.jupyter_dir), config_path({})]),
        # git refuses to read a repository another user owns ("dubious ownership"); this file
        # trusts the teacher's clone only and includes the student's own ~/.gitconfig
        "GIT_CONFIG_GLOBAL": str(s.gitconfig),
    }
    subset = s.data_dir / SUBSET_NAME
    if subset.is_file():  # notebook 04 reads the shared copy instead of downloading
        env["BLITZ_CIFAR10_SUBSET"] = str(subset)
    return env


def gitconfig_text(s: Settings) -> str:
    return (
        "# Written by make hub (tools/teaching/classroom.py): students may pull the lessons\n"
        "# (the teacher's clone or its class copy), which another user owns; their own settings\n"
        "# still apply.\n"
        f"[safe]\n\tdirectory = {s.pulled / '.git'}\n\tdirectory = {s.pulled}\n"
        "[include]\n\tpath = ~/.gitconfig\n"
    )


def made_accounts(s: Settings) -> set[str]:
    """The Unix accounts this hub made (its record in the state folder)."""
    try:
        return set((s.state_dir / ACCOUNTS_FILE).read_text(encoding="utf-8").split())
    except FileNotFoundError:
        return set()


def record_account(s: Settings, name: str) -> None:
    """Add ``name`` to the accounts this hub made (root-only, in the state folder)."""
    fd = os.open(s.state_dir / ACCOUNTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(name + "\n")


def is_student_or_teacher(
    name: str, teacher: str, made: set[str] | frozenset = frozenset()
) -> bool:
    """Whether the hub may sign ``name`` in: the teacher, a name no account has yet (the hub
    creates it), or an account this hub created (recorded in ``made``, and in STUDENTS_GROUP).
    Never root, a system account, another person's account on this machine, or another hub's
    or term's student, whose files the spawner would open."""
    import grp

    if name == teacher:
        return True
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        return True
    if name not in made:
        return False
    try:
        group = grp.getgrnam(STUDENTS_GROUP)
    except KeyError:
        return False
    return name in group.gr_mem or account.pw_gid == group.gr_gid


def add_user_cmd() -> list[str]:
    """useradd for a new student: a home only they can open (0700), the students' group."""
    return ["useradd", "--create-home", "-K", "HOME_MODE=0700", "--shell", "/bin/bash"] + [
        "--groups",
        STUDENTS_GROUP,
    ]


def ensure_students_group() -> None:
    import grp

    try:
        grp.getgrnam(STUDENTS_GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", STUDENTS_GROUP], check=True)


# cgroups. cgroup v1 (one hierarchy per controller) or v2 (a unified tree): a folder per student
# under one folder for the class, in the memory, pids and cpu controllers. The class folder's
# memory limit is the machine less the reserve, each student's is HUB_MEM_LIMIT; the kernel's OOM
# killer then ends the largest process inside the cgroup that is over its limit (a student's
# kernel), never the hub or another student's work. pids bounds a student's processes together;
# cpu gives each student's folder the same weight, so CPU is shared per student, not per process.
# Stopping a server kills everything in the student's folders (detached processes too). None of
# this exists where cgroups are not writable.
PIDS_MAX = 256  # a student's processes and threads together (a server and kernels use ~100)
CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class Cgroups:
    base: Path  # the class's memory folder
    version: int
    others: tuple[Path, ...] = ()  # the class's pids and cpu folders on v1 (v2: base holds all)

    def _limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    def student(self, name: str) -> Path:
        return self.base / name

    def folders(self, name: str) -> list[Path]:
        return [self.base / name] + [other / name for other in self.others]

    def usage(self, name: str) -> int:
        f = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return int((self.student(name) / f).read_text())

    def confine(self, name: str, pid: int, limit: int, pids: int = PIDS_MAX) -> None:
        """Put ``pid`` (a student's server; its kernels and every child follow) under ``limit``
        bytes and ``pids`` processes, with one student's share of the CPU (the default weight,
        the same for every student's folder)."""
        for folder in self.folders(name):
            folder.mkdir(exist_ok=True)
            limits = {
                self._limit_file(): limit,
                "memory.swap.max": 0,  # v2: swap would let a kernel outgrow its cap slowly
                "pids.max": pids,
            }
            for file, value in limits.items():
                if (folder / file).exists():
                    (folder / file).write_text(str(value))
            (folder / "cgroup.procs").write_text(str(pid))

    def processes(self, name: str) -> set[int]:
        found: set[int] = set()
        for folder in self.folders(name):
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except FileNotFoundError:
                pass
        return found

    def kill(self, name: str) -> None:
        """End every process of the student, detached ones too: v2's cgroup.kill where the
        kernel has it (5.14+), else SIGKILL to each process listed until none is left (the pids
        limit bounds how many a fork loop can make meanwhile)."""
        for folder in self.folders(name):
            if (folder / "cgroup.kill").exists():
                (folder / "cgroup.kill").write_text("1")
        for _ in range(200):
            left = self.processes(name)
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        raise OSError(f"processes {sorted(left)} of {name} outlived SIGKILL")

    def release(self, name: str) -> None:
        """Kill what is left of a stopped student's processes and remove their folders."""
        from tools.teaching.sandbox import Cgroup  # the grader's removal, retried while busy

        if not self.base.joinpath(name).exists():
            return
        self.kill(name)
        for folder in self.folders(name):
            Cgroup.remove_folder(folder)

    def remove(self) -> None:
        """Release every student's folders, then the class's (the hub stops)."""
        for base in (self.base, *self.others):
            if base.is_dir():
                for folder in base.iterdir():
                    if folder.is_dir():
                        self.release(folder.name)
        from tools.teaching.sandbox import Cgroup

        for base in (self.base, *self.others):
            Cgroup.remove_folder(base)


def class_cgroup_name(s: Settings) -> str:
    return f"blitz-hub-{s.port}"  # one per hub: a test's hub beside a class's does not meet it


def class_cgroups(name: str, total_limit: int) -> tuple[Cgroups | None, str]:
    """The class's cgroup ``name``, memory limited to ``total_limit`` bytes, and a line saying
    what enforces the students' limits (or why nothing does)."""
    root = Path("/sys/fs/cgroup")
    try:
        if (root / "memory" / "memory.limit_in_bytes").exists():
            version, limit_file = 1, "memory.limit_in_bytes"
            base = root / "memory" / name
            others = tuple(
                root / c / name for c in CONTROLLERS[1:] if (root / c / "cgroup.procs").exists()
            )
        elif "memory" in (root / "cgroup.controllers").read_text().split():
            version, limit_file, base, others = 2, "memory.max", root / name, ()
        else:
            return None, "no memory cgroup controller on this machine: no per-student cap"
        for folder in (base, *others):
            folder.mkdir(exist_ok=True)
        if version == 2:  # the class's folder hands its controllers down to the students'
            have = set((root / "cgroup.controllers").read_text().split())
            enable = " ".join(f"+{c}" for c in CONTROLLERS if c in have)
            (root / "cgroup.subtree_control").write_text(enable)
            (base / "cgroup.subtree_control").write_text(enable)
            have = set((base / "cgroup.controllers").read_text().split())
        else:
            have = {"memory", *(folder.parent.name for folder in others)}
        (base / limit_file).write_text(str(total_limit))
    except OSError as err:
        return None, f"cgroups not writable here ({err.strerror}): no per-student cap"
    missing = [c for c in CONTROLLERS if c not in have]
    also = f"no {', '.join(missing)} controller: not bounded" if missing else "pids and cpu too"
    return Cgroups(base, version, others), f"memory cgroup v{version} at {base} ({also})"


def remove_class_cgroups(name: str) -> None:
    """What a hub left in the cgroup trees (its students' folders and the class's), gone: make
    hub calls it once JupyterHub has ended, however it ended (its own exit removes them too)."""
    root = Path("/sys/fs/cgroup")
    if any((root / c / name).is_dir() for c in ("memory", "")):
        groups, _ = class_cgroups(name, mem_total())
        if groups is not None:
            groups.remove()


def mib(n: int) -> str:
    return f"{n / 1024**2:,.0f} MiB" if n < GIB else f"{n / GIB:.1f} GiB"


def capacity_lines(s: Settings) -> list[str]:
    """What the launcher prints about the class's share of the machine."""
    total = mem_total()
    return [
        f"{cores()} cores, {mib(total)} memory; class size {s.class_size}",
        f"servers at once: {s.active_limit} = min(class size, (memory - {mib(s.mem_reserve)}"
        f" reserve) / {mib(s.mem_per_student)} a student); the next one is refused, with a"
        " message, until one stops",
        f"threads per kernel: {s.threads} = max(1, cores // servers at once)",
        f"a student's memory cap: {mib(s.mem_limit)}; the class's: "
        f"{mib(max(0, total - s.mem_reserve))}",
        f"servers idle for {s.cull_timeout} s are stopped (their files stay)",
        f"at most {math.floor(s.spawn_limit)} servers start at once",
    ]


# Disk. The machine's filesystem (ext4 on / here, mounted without usrquota) has no quota to set,
# so the teacher sees who uses what instead: `make hub-disk`.
def disk_usage(
    names: set[str], tmp: Path = Path("/tmp"), exchange: Path | None = None
) -> list[tuple[str, int, int, int]]:
    """(student, bytes in their home, bytes they own under ``tmp``, bytes they own under the
    homework ``exchange``: every hand-in is kept there), largest first."""
    owners: dict[int, str] = {}
    homes: dict[str, Path] = {}
    for name in names:
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            owners[entry.pw_uid], homes[name] = name, Path(entry.pw_dir)

    def walk(top: Path | None, only: str = "") -> dict[str, int]:
        count: dict[str, int] = {}
        for folder, dirs, files in os.walk(top, onerror=lambda _err: None) if top else ():
            for item in dirs + files:
                with contextlib.suppress(OSError):
                    st = os.lstat(os.path.join(folder, item))
                    owner = only or owners.get(st.st_uid, "")
                    if owner:
                        count[owner] = count.get(owner, 0) + st.st_blocks * 512
        return count

    home_bytes = {name: walk(home, only=name).get(name, 0) for name, home in homes.items()}
    tmp_bytes, exchange_bytes = walk(tmp), walk(exchange)
    rows = [(n, home_bytes[n], tmp_bytes.get(n, 0), exchange_bytes.get(n, 0)) for n in homes]
    return sorted(rows, key=lambda row: (-sum(row[1:]), row[0]))


def main(argv: list[str]) -> int:
    if argv != ["disk"]:
        print("usage: python -m tools.teaching.classroom disk", file=sys.stderr)
        return 2
    s = settings()
    rows = disk_usage(made_accounts(s), exchange=s.exchange_dir)
    print(f"{'student':<32} {'home':>10} {'/tmp':>10} {'hand-ins':>10}")
    for name, home, tmp, handed_in in rows:
        print(f"{name:<32} {mib(home):>10} {mib(tmp):>10} {mib(handed_in):>10}")
    if not rows:
        print(f"no student accounts recorded in {s.state_dir / ACCOUNTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
