"""Test-only wrapper: run scripts/train_ddp.py, failing one rank at one optimizer step.

``BLITZ_TEST_CRASH=RANK:STEP`` makes rank RANK raise at its STEP-th optimizer step
(counted from 0). The teaching script itself carries no test hooks; this file patches
``torch.optim.SGD.step`` and then runs the script as ``__main__``. Launched by
tests/test_ddp.py through ``utils.launch`` like the script itself.
"""

from __future__ import annotations

import os
import runpy
import sys

import torch

from utils.launch import TRAIN_DDP_SCRIPT as SCRIPT


def main() -> None:
    crash_rank, crash_step = (int(v) for v in os.environ["BLITZ_TEST_CRASH"].split(":"))
    rank = int(os.environ.get("RANK", "0"))
    original = torch.optim.SGD.step
    calls = 0

    def step(self, *args, **kwargs):
        nonlocal calls
        if rank == crash_rank and calls == crash_step:
            raise RuntimeError(f"simulated failure of rank {rank} at step {calls}")
        calls += 1
        return original(self, *args, **kwargs)

    torch.optim.SGD.step = step
    sys.argv = [str(SCRIPT), *sys.argv[1:]]
    runpy.run_path(str(SCRIPT), run_name="__main__")


if __name__ == "__main__":
    main()
