"""Build and run ``torchrun`` commands: the one launcher of notebook 05, its tests and its bench.

Taught in ``notebooks/05_data_parallel.ipynb`` (section "DistributedDataParallel").

``torchrun`` (the same program as ``python -m torch.distributed.run``) starts
``--nproc-per-node`` copies of a script and tells each one who it is through environment
variables. :func:`torchrun_argv` writes the command, :func:`worker_env` the environment
(threads per process, CPU or GPU), :func:`launch` runs it with a time limit and
:func:`start` starts it without waiting (for several launchers at once, as on several
machines). ``nproc_per_node=0`` means: no ``torchrun``, the script as one plain process.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

# What a previous launcher may have left in the environment: a child must not inherit it.
_TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                  "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_RUN_ID")  # fmt: skip


# Below every system's range of ephemeral ports (Linux 32768-60999, macOS and Windows
# 49152-65535): no outgoing connection is given such a port meanwhile, and a client that
# retries connecting to it before its server listens cannot connect to itself.
_PORTS = range(20000, 32000)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range."""
    rng = random.Random()  # not the seeded global generator: parallel runs must differ
    for port in rng.sample(_PORTS, 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {_PORTS.start}-{_PORTS.stop - 1}")


def torchrun_argv(
    script: str | Path,
    script_args: Sequence[str] = (),
    *,
    nproc_per_node: int,
    nnodes: int = 1,
    node_rank: int = 0,
    endpoint: str | None = None,
    rdzv_timeout_s: int = 60,
) -> list[str]:
    """The command that runs ``script`` with ``nproc_per_node`` processes on this machine.

    * ``nproc_per_node=0``: ``python script ...``, one ordinary process (no ``torchrun``);
    * one node: ``--standalone`` (torchrun picks a free port on this machine); the
      rendezvous -- the processes meeting before they start -- waits at most
      ``rdzv_timeout_s`` seconds;
    * ``nnodes > 1``: the static rendezvous at ``endpoint`` (``host:port``) with this
      launcher's ``node_rank``, on 127.0.0.1; the wait for the other nodes is bounded too.
    """
    if nproc_per_node < 0 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"bad launch: nproc_per_node={nproc_per_node}, nnodes={nnodes}, "
                         f"node_rank={node_rank}")  # fmt: skip
    if nproc_per_node == 0:
        if nnodes != 1:
            raise ValueError("several nodes need torchrun: pass nproc_per_node >= 1")
        return [sys.executable, str(script), *script_args]
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if nnodes == 1:
        argv += ["--standalone", f"--rdzv-conf=join_timeout={rdzv_timeout_s}"]
    else:
        if endpoint is None:
            raise ValueError("several nodes need the rendezvous endpoint host:port")
        argv += [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=static",
                 f"--rdzv-endpoint={endpoint}", f"--rdzv-conf=timeout={rdzv_timeout_s}",
                 "--local-addr=127.0.0.1"]  # fmt: skip
    return [*argv, "--max-restarts=0", str(script), *script_args]


def worker_env(threads: int = 1, force_cpu: bool = True) -> dict[str, str]:
    """This process's environment for the workers: ``threads`` CPU threads each, CPU or GPUs.

    ``torchrun`` sets ``OMP_NUM_THREADS=1`` only when the variable is unset; here it is
    always set, so a 1-process run and a 2-process run use exactly the threads asked for.
    """
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = str(threads)
    env["BLITZ_FORCE_CPU"] = "1" if force_cpu else "0"
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo talks over loopback only
    return env


def start(argv: Sequence[str], env: dict[str, str] | None = None, **popen_kwargs):
    """Start a launch without waiting for it; the caller must bound the wait."""
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(list(argv), env=env or worker_env(), text=True, **popen_kwargs)


def finish(procs: Sequence[subprocess.Popen], timeout_s: float = 300) -> list[tuple[str, str]]:
    """Wait for launches started with :func:`start`, all of them within ``timeout_s`` seconds.

    Returns each one's ``(stdout, stderr)``. At the deadline every launch still running is
    killed (its workers exit with it) and ``TimeoutError`` says which ones were waiting.
    """
    deadline = time.monotonic() + timeout_s
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=max(deadline - time.monotonic(), 0.1)))
    except subprocess.TimeoutExpired:
        waiting = [i for i, p in enumerate(procs) if p.poll() is None]
        raise TimeoutError(
            f"launches {waiting} still ran after {timeout_s:.0f} s; killed them"
        ) from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return outputs


def launch(
    argv: Sequence[str],
    env: dict[str, str] | None = None,
    timeout_s: float = 300,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run a launch to the end, at most ``timeout_s`` seconds; output captured.

    ``check=True`` turns a non-zero exit code into a ``RuntimeError`` with the end of the
    error output (torchrun prints there which rank failed and why).
    """
    proc = subprocess.run(list(argv), env=env or worker_env(), capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip
    if check and proc.returncode != 0:
        raise RuntimeError(f"exit code {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc
