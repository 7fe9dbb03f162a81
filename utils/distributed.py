"""Workers that end with their launcher and wait for their master within a bound, which no
lesson teaches (notebook 05 teaches DDP): scripts/train_ddp.py calls check_torchrun_env, then
exit_with_launcher (``kill -9`` gives torchrun no chance to stop its workers)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

# What torchrun tells each worker; scripts/train_ddp.py needs all of them.
TORCHRUN_VARS = "RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT".split()


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
    """Exit with one line, before joining the process group, where it could not work: one of
    torchrun's variables missing (RANK alone: a plain start) or out of range, or the master
    (rank 0) not listening within ``timeout_s`` seconds (torch's own wait ends with ~80 lines
    of C++ stack; a rank out of range would wait for its master, then blame it)."""
    if missing := [name for name in TORCHRUN_VARS if name not in os.environ]:
        raise SystemExit(
            f"RANK is set but not {', '.join(missing)}: start the script with torchrun, "
            "or unset RANK"
        )
    names = [k for k in TORCHRUN_VARS if k != "MASTER_ADDR"]
    text = {k: os.environ[k].strip() for k in names}
    n = {k: int(v) for k, v in text.items() if v.isascii() and v.isdigit()}
    why = [f"{k}={os.environ[k]!r} is not a whole number of 0 or more" for k in names if k not in n]
    for r, s in (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE")):
        if r in n and s in n and n[r] >= n[s]:
            top = f"0 to {n[s] - 1}" if n[s] else "none: it is 0"
            why.append(f"{r}={n[r]} is not below {s}={n[s]} (ranks: {top})")
    if not 0 < n.get("MASTER_PORT", 1) < 65536:
        why.append(f"MASTER_PORT={n['MASTER_PORT']} is not a TCP port (1 to 65535)")
    if why:
        raise SystemExit(f"{why[0]}: start the script with torchrun, which sets them, or fix them")
    rank, host, port = (os.environ[k] for k in ("RANK", "MASTER_ADDR", "MASTER_PORT"))
    if rank != "0" and not reachable(host, int(port), timeout_s):
        raise SystemExit(
            f"rank {rank}: its master (rank 0) at {host}:{port} did not come within "
            f"{timeout_s:.0f} s: start it, or check MASTER_ADDR and MASTER_PORT"
        )


def exit_with_launcher(poll_s: float = 1.0) -> None:
    """End this worker within ``poll_s`` seconds of the end of the process that started it, any
    launcher: a daemon thread sees the parent pid change when init or a "subreaper" adopts the
    orphan. Not Linux's ``PR_SET_PDEATHSIG``: it fires when the *thread* that started the worker
    ends. Windows does not re-parent orphans: nothing is detected there."""
    parent = os.getppid()

    def leave() -> None:
        sys.stderr.write(f"worker {os.getpid()}: its launcher (pid {parent}) is gone; exiting\n")
        sys.stderr.flush()
        os._exit(1)  # from any thread, whatever the main thread is blocked in

    if parent == 1 and not _in_a_container():  # adopted: the launcher died while it started
        leave()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        leave()

    threading.Thread(target=watch, name="exit-with-launcher", daemon=True).start()


def _in_a_container() -> bool:
    """In a PID namespace of its own, pid 1 may be the launcher itself (the entrypoint), whose
    end ends the namespace, this worker included: then pid 1 proves nothing."""
    status = Path("/proc/self/status")  # NSpid: this pid in each nested namespace (Linux)
    lines = status.read_text().splitlines() if status.exists() else []
    return any(line.startswith("NSpid:") and len(line.split()) > 2 for line in lines)
