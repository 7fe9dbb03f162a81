"""Workers that do not outlive their launcher (``scripts/train_ddp.py``, notebook 05).

The script writes its ``torchrun`` set-up in plain code for the learner to read (``setup()``
there); the one piece it takes from here is :func:`exit_with_launcher`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path


def exit_with_launcher(poll_s: float = 1.0) -> None:
    """End this worker when the process that started it (torchrun) is gone (notebook 05).

    torchrun stops its workers when it is interrupted, but ``kill -9`` gives it no chance:
    the workers would go on training, alone, for minutes. A daemon thread notices that the
    parent process changed (the orphan was re-parented) and exits.
    """
    parent = os.getppid()
    if not _is_launcher(parent):  # it died while this worker was still starting up
        _leave(parent)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                _leave(parent)

    threading.Thread(target=watch, name="exit-with-launcher", daemon=True).start()


def _is_launcher(pid: int) -> bool:
    """Whether ``pid`` is a torchrun process (Linux: its command line; elsewhere assume so)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc").is_dir()  # no /proc: cannot tell, trust the parent
    return b"torch.distributed.run" in cmdline or b"torchrun" in cmdline


def _leave(parent: int) -> None:
    print(f"worker {os.getpid()}: its launcher (pid {parent}) is gone; exiting", file=sys.stderr,
          flush=True)  # fmt: skip
    os._exit(1)
