"""Benchmark: does DDP pay off on this machine? (not part of `make test`)

    .venv/bin/python bench/ddp_scaling.py [--repeats 3] [--steps 40]

Same model (a small conv net) and the same global batch in every configuration, each run
through ``scripts/train_ddp.py``, launched by ``utils.launch`` like in notebook 05
(throughput of the second epoch: the first also pays one-time start-up costs):

* CPU: 1 process x 2 threads (no DDP) versus 2 processes x 1 thread (DDP, gloo) (the
  ratio says whether a second process beats a second thread on this machine).
* Context: the same model on 1 process x 1 thread, so the report shows how well each
  way of using the second core (a second thread, or a second DDP process) scales.
* Start-up: 1 process x 2 threads under ``torchrun --nproc-per-node=1`` versus plain
  ``python``; the script wraps the model in DDP only for 2+ processes, so this measures
  the launcher and process group, not DDP's hooks.
* With CUDA GPUs: ``nn.DataParallel`` versus DDP (one process per GPU, NCCL) on all GPUs
  (not run on the project's CPU machine: untested there).

Configurations are interleaved and repeated; the best of the repeats is reported,
because on a shared machine other work only ever slows a run down. ``--smoke`` runs every
configuration once, tiny, to check that the code path works.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from utils import launch
from utils.cli import number

SCRIPT = launch.TRAIN_DDP_SCRIPT  # scripts/train_ddp.py


def run_script(nproc: int, threads: int, args: list[str], out: Path, cpu: bool = True) -> float:
    """samples/s of the second epoch of one run; nproc=0: plain python, no torchrun."""
    argv = launch.torchrun_argv(SCRIPT, [*args, "--out-dir", str(out)], nproc_per_node=nproc)
    try:
        launch.launch(argv, launch.worker_env(threads, force_cpu=cpu), timeout_s=600)
    except RuntimeError as err:
        raise SystemExit(f"run failed: {' '.join(argv)}\n{err}") from None
    metrics = json.loads((out / "metrics.json").read_text())
    num_train = int(args[args.index("--num-train") + 1])
    return num_train / metrics["epoch_times_s"][1]


def cpu_bench(repeats: int, steps: int, batch: int, width: int) -> None:
    args = ["--model", "resnet18", "--width", str(width), "--data", "synthetic"]
    args += ["--num-train", str(batch * steps), "--num-test", str(batch)]
    args += ["--batch-size", str(batch), "--epochs", "2"]  # ``steps`` steps per epoch
    configs = {
        "bare, 1 proc x 2 threads": (0, 2),
        "DDP, 2 procs x 1 thread": (2, 1),
        "torchrun, 1 proc x 2 threads": (1, 2),
        # context: how much one core alone does, i.e. what "perfect" 2-process scaling doubles
        "bare, 1 proc x 1 thread": (0, 1),
    }
    best = dict.fromkeys(configs, 0.0)
    all_runs: dict[str, list[float]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for i, (name, (nproc, threads)) in enumerate(configs.items()):
                sps = run_script(nproc, threads, args, Path(tmp) / f"{r}-{i}")
                all_runs[name].append(sps)
                best[name] = max(best[name], sps)
                print(f"  repeat {r + 1}: {name:26s} {sps:8.1f} samples/s", flush=True)
    print(f"\nCPU, ResNet-18 width {width}, global batch {batch}, {steps} steps, best of {repeats}")
    for name in configs:
        runs = ", ".join(f"{v:.1f}" for v in all_runs[name])
        print(f"  {name:26s} {best[name]:8.1f} samples/s   (runs: {runs})")
    scale = best["DDP, 2 procs x 1 thread"] / best["bare, 1 proc x 2 threads"]
    overhead = 1 - best["torchrun, 1 proc x 2 threads"] / best["bare, 1 proc x 2 threads"]
    print(f"  2 procs x 1 thread vs 1 proc x 2 threads: {scale:.2f}x")
    print(f"  torchrun with 1 process vs plain python: overhead {100 * overhead:+.1f} %")
    per_core = best["DDP, 2 procs x 1 thread"] / best["bare, 1 proc x 1 thread"]
    threads = best["bare, 1 proc x 2 threads"] / best["bare, 1 proc x 1 thread"]
    print(f"  context: 2 procs x 1 thread vs 1 proc x 1 thread: {per_core:.2f}x;")
    print(f"           1 proc x 2 threads vs 1 proc x 1 thread: {threads:.2f}x")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"  load average after the runs: {load}", flush=True)
    if os.getloadavg()[1] > (os.cpu_count() or 1):
        # measured: with other jobs running, 2-thread runs lose far more than 1-thread ones
        print("  WARNING: the CPU was busy with other work; multi-threaded runs suffer most,")
        print("  so these ratios say more about the contention than about DDP.")


def gpu_bench(steps: int, batch: int, width: int) -> None:
    n = torch.cuda.device_count()
    print(f"\nGPU: {n} x {torch.cuda.get_device_name(0)}")
    if n < 2:
        print("  one GPU: DataParallel splits nothing, so this measures wrapper overheads only")
    from utils import ResNet18

    model = nn.DataParallel(ResNet18(width=width).cuda(), device_ids=list(range(n)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    X = torch.randn(batch, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    for i in range(steps + 5):
        if i == 5:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(model(X), y).backward()
        opt.step()
    torch.cuda.synchronize()
    dp = steps * batch / (time.perf_counter() - t0)
    args = ["--model", "resnet18", "--width", str(width), "--data", "synthetic"]
    args += ["--num-train", str(batch * steps), "--num-test", str(batch)]
    args += ["--batch-size", str(batch), "--epochs", "2"]
    with tempfile.TemporaryDirectory() as tmp:
        ddp = run_script(n, 4, args, Path(tmp), cpu=False)
    print(f"  DataParallel on {n} GPUs: {dp:10.1f} samples/s")
    print(f"  DDP, {n} processes (NCCL): {ddp:10.1f} samples/s   ratio DDP/DP {ddp / dp:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    count = number(int, least=1)
    p.add_argument("--repeats", type=count, default=3)
    p.add_argument("--steps", type=count, default=24, help="steps per epoch")
    p.add_argument("--batch-size", type=number(int, least=2), default=64, help="global, even")
    p.add_argument("--width", type=count, default=8, help="ResNet-18 base width")
    p.add_argument("--smoke", action="store_true", help="one tiny repeat: check the code path")
    args = p.parse_args()
    if args.batch_size % 2:  # train_ddp.py's rule: each of the 2 processes gets the same share
        p.error(
            f"argument --batch-size: must be even: 2 DDP processes share it (not {args.batch_size})"
        )
    if args.smoke:
        args.repeats, args.steps, args.batch_size, args.width = 1, 2, 8, 2
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    # a busy machine (load above the core count) slows multi-threaded runs most
    print(f"PyTorch {torch.__version__}, {os.cpu_count()} CPU cores, load average {load}")
    cpu_bench(args.repeats, args.steps, args.batch_size, args.width)
    if torch.cuda.is_available():  # CUDA_VISIBLE_DEVICES="" hides the GPUs
        gpu_bench(args.steps * 4, args.batch_size * 4, 64)


if __name__ == "__main__":
    main()
