"""One process per device: the few helpers a ``torchrun`` training script needs.

Notebook 05's ``scripts/train_ddp.py`` writes its set-up in plain code for the learner to
read (``setup()`` there); these helpers are the reusable, checked version of the same steps,
plus :func:`exit_with_launcher` for workers that must not outlive ``torchrun``.

``torchrun`` starts one process per device and tells each one who it is through
environment variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``). :func:`init_distributed` reads them, picks the device and the
communication backend (NCCL for CUDA GPUs, gloo otherwise) and joins the process group.
Started without ``torchrun`` it returns a single-process context and joins nothing, so
the same script also runs as a plain ``python script.py``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .device import get_device, num_gpus

_ENV_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class DistContext:
    """Who this process is: its rank, the world size, its device and backend (notebook 05)."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    backend: str | None  # None when running as a single process without a group

    @property
    def distributed(self) -> bool:
        """True when a process group was joined (started by ``torchrun``)."""
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """Rank 0 logs and writes checkpoints; the others stay quiet."""
        return self.rank == 0


def backend_for(device: torch.device | str) -> str:
    """The collective backend for ``device``: ``nccl`` for CUDA, ``gloo`` otherwise (notebook 05).

    NCCL only moves CUDA tensors; gloo works on the CPU (and is the fallback everywhere
    else, e.g. several processes sharing one GPU, which NCCL refuses).
    """
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def _env_int(name: str) -> int:
    raw = os.environ[name]
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"environment variable {name}={raw!r} must be >= 0")
    return value


def torchrun_env() -> dict[str, int] | None:
    """``{"rank", "local_rank", "world_size"}`` from torchrun's variables, or None without them.

    A partial set (e.g. ``RANK`` without ``WORLD_SIZE``) is an error: it usually means a
    hand-written launcher forgot a variable, and guessing would deadlock later.
    """
    present = [v for v in _ENV_VARS if v in os.environ]
    if not present:
        return None
    missing = [v for v in _ENV_VARS if v not in os.environ]
    if missing:
        raise RuntimeError(
            f"found {', '.join(present)} but not {', '.join(missing)} in the environment: "
            "start the script with `torchrun` (or `python -m torch.distributed.run`), "
            "or unset these variables to run a single process"
        )
    env = {v.lower(): _env_int(v) for v in _ENV_VARS}
    if env["rank"] >= env["world_size"]:
        raise ValueError(f"RANK={env['rank']} must be smaller than WORLD_SIZE={env['world_size']}")
    return env


def init_distributed(force_cpu: bool | None = None, timeout_s: float = 60.0) -> DistContext:
    """Join the process group described by torchrun's environment (notebook 05).

    * Device: ``cuda:LOCAL_RANK`` when this machine has a GPU for every local rank,
      otherwise the CPU (``force_cpu=True`` or ``BLITZ_FORCE_CPU=1`` forces the CPU).
    * Backend: :func:`backend_for` the device.
    * ``timeout_s`` bounds every collective, so a vanished peer ends the job with an
      error instead of a hang.

    Without torchrun's variables nothing is joined and ``backend`` is None.
    """
    env = torchrun_env()
    if env is None:
        return DistContext(0, 0, 1, get_device(force_cpu), None)
    if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun, which is our parent
        exit_with_launcher()
    device = torch.device("cpu")
    local = env["local_rank"]
    if get_device(force_cpu).type == "cuda":
        if local >= num_gpus():
            raise RuntimeError(
                f"LOCAL_RANK={local} but only {num_gpus()} GPU(s) are visible: start at most "
                f"{num_gpus()} processes per node (--nproc-per-node) or set BLITZ_FORCE_CPU=1"
            )
        device = torch.device(f"cuda:{local}")
        torch.cuda.set_device(device)
    backend = backend_for(device)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend,
            timeout=timedelta(seconds=timeout_s),
            device_id=device if device.type == "cuda" else None,
        )
    return DistContext(env["rank"], local, env["world_size"], device, backend)


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


def cleanup_distributed() -> None:
    """Leave the process group if one was joined; safe to call in any case (notebook 05)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
