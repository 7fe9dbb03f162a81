"""Workers that end with their launcher, which no lesson teaches: notebook 05 teaches DDP.

torchrun stops its workers when it is interrupted, but ``kill -9`` gives it no chance: they
would go on training alone, for minutes. scripts/train_ddp.py calls exit_with_launcher.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path


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
