"""Benchmark: what the grader's sandbox costs a submission (not in `make test`).

    sudo .venv/bin/python -m bench.sandbox_overhead --runs 3

Times, alternately, a plain Jupyter kernel (jupyter_client's ``python3`` kernel spec) and a
sandboxed one (tools/teaching/sandbox.py: a throw-away user, bubblewrap's allow-list, a
cgroup) from ``start_kernel`` through one cell (``import torch`` and a sum) to a finished
shutdown and, for the sandbox, the removal of its user, folder and cgroup. Prints the median
and every run of each. As root, with what ``check_host`` asks for.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from jupyter_client.manager import AsyncKernelManager

from tools.teaching import sandbox

CODE = "import torch; torch.ones(3).sum().item()"


async def once(sandboxed: bool) -> float:
    start = time.monotonic()
    if sandboxed:
        km = sandbox.SandboxKernelManager()
    else:
        km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        reply = await kc.execute_interactive(CODE, timeout=120, output_hook=lambda m: None)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the cell failed: {reply['content']}")
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    return time.monotonic() - start


async def main(runs: int) -> None:
    times: dict[str, list[float]] = {"plain": [], "sandboxed": []}
    for _ in range(runs):  # alternately: load from elsewhere on the machine hits both
        times["plain"].append(await once(False))
        times["sandboxed"].append(await once(True))
    for name, got in times.items():
        each = " ".join(f"{t:.2f}" for t in got)
        print(f"{name}: median {statistics.median(got):.2f} s (runs: {each})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="kernels of each kind")
    args = parser.parse_args()
    if why := sandbox.check_host():
        sys.exit(f"sandbox_overhead: {why}")
    asyncio.run(main(args.runs))
