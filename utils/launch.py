"""Running ``torchrun`` from Python, which no lesson teaches (notebook 05 teaches DDP itself):
for notebook 05, the tests and the bench. Every wait is bounded; :func:`start` and :func:`finish`
run several launchers at once (as on several machines); a failed rendezvous is one line."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import distributed

TRAIN_DDP_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_ddp.py"
# What a previous launcher may have left in the environment: a child must not inherit it.
_INHERITED = (*distributed.TORCHRUN_VARS, "GROUP_RANK", "TORCHELASTIC_RUN_ID")
# Below every system's ephemeral ports (Linux 32768-60999, macOS and Windows 49152-65535): no
# outgoing connection takes such a port meanwhile, nor connects to itself while retrying.
_PORTS = range(20000, 32000)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range."""
    for port in random.Random().sample(_PORTS, 200):  # not the seeded global generator
        with socket.socket() as sock, contextlib.suppress(OSError):  # taken: the next one
            sock.bind(("127.0.0.1", port))
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
    """The command running ``script`` in ``nproc_per_node`` processes (0: one plain process):
    one node ``--standalone``; several meet at the static rendezvous ``endpoint`` (``host:port``)
    on 127.0.0.1, through :func:`torchrun`. The rendezvous waits ``rdzv_timeout_s`` at most."""
    several = nnodes > 1 and (nproc_per_node == 0 or endpoint is None)
    if nproc_per_node < 0 or not 0 <= node_rank < nnodes or several:
        raise ValueError(
            f"bad launch: nproc_per_node={nproc_per_node}, nnodes={nnodes}, node_rank="
            f"{node_rank}, endpoint={endpoint} (several nodes need torchrun and an endpoint)"
        )
    if nproc_per_node == 0:
        return [sys.executable, str(script), *script_args]
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc_per_node}"]
    if nnodes == 1:
        argv += ["--standalone", f"--rdzv-conf=join_timeout={rdzv_timeout_s}"]
    else:  # run by torchrun() below: one-line errors
        argv[1:3] = ["-c", "import sys, utils.launch; utils.launch.torchrun(sys.argv[1:])"]
        argv += [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=static"]
        argv += [f"--rdzv-endpoint={endpoint}", f"--rdzv-conf=timeout={rdzv_timeout_s}"]
        argv += ["--local-addr=127.0.0.1"]
    return [*argv, "--max-restarts=0", str(script), *script_args]


def torchrun(args: Sequence[str]) -> None:
    """``torchrun ARGS``, as :func:`torchrun_argv` runs it for several nodes, but a node whose
    master or peers never come ends with one line, not torch's C++ and Python stacks."""
    from torch.distributed import DistError
    from torch.distributed.run import main, parse_args

    opts, start = parse_args(list(args)), time.monotonic()
    conf = dict(kv.split("=", 1) for kv in opts.rdzv_conf.split(",") if "=" in kv)
    timeout_s, endpoint, node = int(conf.get("timeout", 600)), opts.rdzv_endpoint, opts.node_rank
    host, _, port = endpoint.rpartition(":")
    if node != 0 and not distributed.reachable(host, int(port), timeout_s):
        why = f"its master (node 0) at {endpoint} did not come within {timeout_s} s"
        sys.exit(f"node {node}: {why}: start it, or check --rdzv-endpoint")
    try:
        main(list(args))
    except DistError as err:  # node 0: the others never came (the first line says how many)
        sys.exit(
            f"node {node}: the rendezvous at {endpoint} failed after "
            f"{time.monotonic() - start:.0f} s: {str(err).strip().splitlines()[0]} Start every "
            "node with the same --rdzv-endpoint, within the --rdzv-conf timeout."
        )


def worker_env(threads: int = 1, force_cpu: bool = True) -> dict[str, str]:
    """This process's environment for the workers: ``threads`` CPU threads each (always: torchrun
    sets it only when unset), no GPU with ``force_cpu`` (``CUDA_VISIBLE_DEVICES=""``), and
    :func:`one_machine_env` (gloo on loopback; on Windows, no libuv)."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
    env["OMP_NUM_THREADS"] = str(threads)
    if force_cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return {**env, **one_machine_env()}


def one_machine_env() -> dict[str, str]:
    """What a launch on this machine alone needs, a value already set winning: gloo on the
    loopback interface where :func:`loopback_interface` names one (else gloo picks the host
    name's address, on the network), and on Windows ``USE_LIBUV=0`` (torchrun asks for a libuv
    store by default, which PyTorch's Windows builds lack: pytorch#139990)."""
    env = {}
    if loopback := loopback_interface():
        env["GLOO_SOCKET_IFNAME"] = loopback  # gloo talks over loopback only
    if sys.platform == "win32":
        env["USE_LIBUV"] = "0"
    return {k: v for k, v in env.items() if k not in os.environ}


def loopback_interface() -> str | None:
    """The loopback interface's name for gloo (``GLOO_SOCKET_IFNAME``): Linux's ``lo``, macOS's
    ``lo0``, if this machine has it; else None (Windows names it otherwise), and gloo picks its
    device from the host name, PyTorch's default."""
    name = {"linux": "lo", "darwin": "lo0"}.get(sys.platform.rstrip("0123456789"))
    try:
        return name if name in [iface for _, iface in socket.if_nameindex()] else None
    except OSError:
        return None


def start(
    argv: Sequence[str], env: dict[str, str] | None = None, **popen_kwargs
) -> subprocess.Popen:
    """Start a launch without waiting for it (output captured); bound the wait with finish."""
    kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen_kwargs}
    return subprocess.Popen(list(argv), env=env or worker_env(), text=True, **kwargs)


def finish(procs: Sequence[subprocess.Popen], timeout_s: float = 300) -> list[tuple[str, str]]:
    """Each launch's ``(stdout, stderr)``, all within ``timeout_s`` seconds: at the deadline,
    those still running are killed (their workers exit with them) and named in a TimeoutError."""
    deadline = time.monotonic() + timeout_s
    try:
        return [p.communicate(timeout=max(deadline - time.monotonic(), 0.1)) for p in procs]
    except subprocess.TimeoutExpired:
        waiting = [i for i, p in enumerate(procs) if p.poll() is None]
        msg = f"launches {waiting} still ran after {timeout_s:.0f} s; killed them"
        raise TimeoutError(msg) from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def launch(
    argv: Sequence[str],
    env: dict[str, str] | None = None,
    timeout_s: float = 300,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run a launch to its end, at most ``timeout_s`` seconds, output captured; ``check``: a
    non-zero exit is a RuntimeError with the end of stderr (where torchrun names the rank)."""
    proc = subprocess.run(
        list(argv), env=env or worker_env(), capture_output=True, text=True, timeout=timeout_s
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"exit code {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc
