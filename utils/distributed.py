"""Workers that end with their launcher, and wait for their master within a bound, which no
lesson teaches: notebook 05 teaches DDP.

torchrun stops its workers when it is interrupted, but ``kill -9`` gives it no chance: they
would go on training alone, for minutes. scripts/train_ddp.py calls exit_with_launcher, and
check_torchrun_env before it joins the process group.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

# What torchrun tells each worker; scripts/train_ddp.py needs all of them.
TORCHRUN_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


def reachable(host: str, port: int, timeout_s: float) -> bool:
    """Whether something listens at ``host:port`` within ``timeout_s`` seconds (tried twice a
    second). Probing costs a TCP store nothing: it counts only clients that say who they are."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            left = max(deadline - time.monotonic(), 0.1)
            with socket.create_connection((host, port), timeout=min(left, 5)):
                return True
        except OSError:  # refused, unreachable, unknown host, timed out
            if time.monotonic() + 0.5 > deadline:
                return False
            time.sleep(0.5)


def check_torchrun_env(timeout_s: float) -> None:
    """Exit with one line, before joining the process group, when it could not work: some of
    torchrun's variables are missing (RANK alone: a plain start), or the master (rank 0) does
    not listen within ``timeout_s`` seconds. (torch's own wait for a master ends with ~80
    lines of C++ stack.)"""
    if missing := [name for name in TORCHRUN_VARS if name not in os.environ]:
        raise SystemExit(
            f"RANK is set but not {', '.join(missing)}: start the script with torchrun, "
            "or unset RANK"
        )
    if why := _bad_numbers():
        raise SystemExit(f"{why}: start the script with torchrun, which sets them, or fix them")
    rank, host, port = (os.environ[k] for k in ("RANK", "MASTER_ADDR", "MASTER_PORT"))
    if rank != "0" and not (port.isdigit() and reachable(host, int(port), timeout_s)):
        raise SystemExit(
            f"rank {rank}: its master (rank 0) at {host}:{port} did not come within "
            f"{timeout_s:.0f} s: start it, or check MASTER_ADDR and MASTER_PORT"
        )


def _bad_numbers() -> str | None:
    """What is wrong with torchrun's numbers in the environment; None: nothing. (A rank out of
    range would otherwise wait for its master, then blame it.)"""
    values = {}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        text = os.environ[name].strip()
        if not (text.isascii() and text.isdigit()):
            return f"{name}={os.environ[name]!r} is not a whole number of 0 or more"
        values[name] = int(text)
    for rank, size in (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE")):
        if not values[rank] < values[size]:
            top = f"0 to {values[size] - 1}" if values[size] else "none: it is 0"
            return f"{rank}={values[rank]} is not below {size}={values[size]} (ranks: {top})"
    if not 0 < values["MASTER_PORT"] < 65536:
        return f"MASTER_PORT={values['MASTER_PORT']} is not a TCP port (1 to 65535)"
    return None


def exit_with_launcher(poll_s: float = 1.0) -> None:
    """End this worker within ``poll_s`` seconds of the end of the process that started it.

    Any launcher: no command line is read. A daemon thread sees the parent pid change when
    init (pid 1) or a "subreaper" adopts the orphan. Already adopted by init, the worker exits
    at once: its launcher died while it started (a subreaper's adoption before this call goes
    unnoticed; DDP's own timeouts end such a worker). Not Linux's ``PR_SET_PDEATHSIG``: it
    fires when the *thread* that started the worker ends, cannot say why, and needs this
    start-up check too. Windows does not re-parent orphans: nothing is detected there.
    """
    parent = os.getppid()
    if parent == 1 and not _in_a_container():
        _leave(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        _leave(parent)

    threading.Thread(target=watch, name="exit-with-launcher", daemon=True).start()


def _in_a_container() -> bool:
    """In a PID namespace of its own, pid 1 may be the launcher itself (the entrypoint), whose
    end ends the namespace, this worker included: then pid 1 proves nothing."""
    status = Path("/proc/self/status")  # NSpid: this pid in each nested namespace (Linux)
    lines = status.read_text().splitlines() if status.exists() else []
    return any(line.startswith("NSpid:") and len(line.split()) > 2 for line in lines)


def _leave(parent: int) -> None:
    print(
        f"worker {os.getpid()}: its launcher (pid {parent}) is gone; exiting",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)  # from any thread, whatever the main thread is blocked in
