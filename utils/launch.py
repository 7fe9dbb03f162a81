"""Running ``torchrun`` from Python, which no lesson teaches: notebook 05 teaches DDP itself.

Notebook 05, tests/test_ddp.py and bench/ddp_scaling.py launch ``scripts/train_ddp.py``
(:data:`TRAIN_DDP_SCRIPT`) with these; :func:`start` and :func:`finish` run several launchers
at once (as on several machines). Every wait is bounded, and a rendezvous that fails ends
with one line (:func:`torchrun`).
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

from . import distributed

# The DDP training script of notebook 05's deep dives, the tests and the bench.
TRAIN_DDP_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "train_ddp.py"
# What a previous launcher may have left in the environment: a child must not inherit it.
_TORCHRUN_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
)
# Below every system's ephemeral ports (Linux 32768-60999, macOS and Windows 49152-65535): no
# outgoing connection takes such a port meanwhile, nor connects to itself while retrying.
_PORTS = range(20000, 32000)
# Several nodes: torchrun run by torchrun() below, in the launcher's own process.
_TORCHRUN = "import sys, utils.launch; utils.launch.torchrun(sys.argv[1:])"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range."""
    for port in random.Random().sample(_PORTS, 200):  # not the seeded global generator
        with socket.socket() as sock:
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
    """The command running ``script`` in ``nproc_per_node`` processes (0: one plain process).

    One node: ``--standalone``; several: the static rendezvous at ``endpoint`` (``host:port``)
    on 127.0.0.1 as node ``node_rank``, through :func:`torchrun`. The rendezvous waits
    ``rdzv_timeout_s`` at most."""
    if nproc_per_node < 0 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(
            f"bad launch: nproc_per_node={nproc_per_node}, nnodes={nnodes}, node_rank={node_rank}"
        )
    if nnodes > 1 and (nproc_per_node == 0 or endpoint is None):
        raise ValueError("several nodes need torchrun (nproc_per_node >= 1) and an endpoint")
    if nproc_per_node == 0:
        return [sys.executable, str(script), *script_args]
    if nnodes == 1:
        argv = [sys.executable, "-m", "torch.distributed.run"]
        argv += [f"--nproc-per-node={nproc_per_node}", "--standalone"]
        argv += [f"--rdzv-conf=join_timeout={rdzv_timeout_s}"]
    else:
        argv = [sys.executable, "-c", _TORCHRUN, f"--nproc-per-node={nproc_per_node}"]
        argv += [
            f"--nnodes={nnodes}",
            f"--node-rank={node_rank}",
            "--rdzv-backend=static",
            f"--rdzv-endpoint={endpoint}",
            f"--rdzv-conf=timeout={rdzv_timeout_s}",
            "--local-addr=127.0.0.1",
        ]
    return [*argv, "--max-restarts=0", str(script), *script_args]


def torchrun(args: Sequence[str]) -> None:
    """``torchrun ARGS`` in this process, as :func:`torchrun_argv` runs it for several nodes,
    except that a node whose master or peers never come to the rendezvous ends with one line
    (which node, where, how long) instead of torch's C++ and Python stacks."""
    from torch.distributed import DistError
    from torch.distributed.run import main, parse_args

    opts, start = parse_args(list(args)), time.monotonic()
    conf = dict(kv.split("=", 1) for kv in opts.rdzv_conf.split(",") if "=" in kv)
    timeout_s, endpoint, node = int(conf.get("timeout", 600)), opts.rdzv_endpoint, opts.node_rank
    host, _, port = endpoint.rpartition(":")
    if node != 0 and not distributed.reachable(host, int(port), timeout_s):
        sys.exit(
            f"node {node}: its master (node 0) at {endpoint} did not come within {timeout_s} s:"
            " start it, or check --rdzv-endpoint"
        )
    try:
        main(list(args))
    except DistError as err:  # node 0: the others never came (the first line says how many)
        sys.exit(
            f"node {node}: the rendezvous at {endpoint} failed after "
            f"{time.monotonic() - start:.0f} s: {str(err).strip().splitlines()[0]} Start every "
            "node with the same --rdzv-endpoint, within the --rdzv-conf timeout."
        )


def worker_env(threads: int = 1, force_cpu: bool = True) -> dict[str, str]:
    """This process's environment for the workers: ``threads`` CPU threads each, no GPU with
    ``force_cpu`` (``CUDA_VISIBLE_DEVICES=""``, as a learner would hide them), and gloo on the
    loopback interface where :func:`loopback_interface` names one (a value already set wins).

    ``OMP_NUM_THREADS`` always (torchrun sets it only when unset): every run gets what it asks."""
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARS}
    env["OMP_NUM_THREADS"] = str(threads)
    if force_cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if "GLOO_SOCKET_IFNAME" not in env and (loopback := loopback_interface()):
        env["GLOO_SOCKET_IFNAME"] = loopback  # gloo talks over loopback only
    return env


# The loopback interface's name where gloo takes one (GLOO_SOCKET_IFNAME): Linux's tcp
# transport and macOS's libuv transport look the name up in the system's interface list.
_LOOPBACK = {"linux": "lo", "darwin": "lo0"}


def loopback_interface(
    platform: str | None = None, interfaces: Sequence[str] | None = None
) -> str | None:
    """The loopback interface for gloo on ``platform`` (Linux ``lo``, macOS ``lo0``), if this
    machine has one of that name; None elsewhere (Windows names interfaces otherwise), and then
    gloo picks its device from the host name, PyTorch's default."""
    platform = sys.platform if platform is None else platform
    name = next((n for prefix, n in _LOOPBACK.items() if platform.startswith(prefix)), None)
    if name is None:
        return None
    if interfaces is None:
        try:
            interfaces = [iface for _, iface in socket.if_nameindex()]
        except OSError:
            return None
    return name if name in interfaces else None


def start(argv: Sequence[str], env: dict[str, str] | None = None, **popen_kwargs):
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
