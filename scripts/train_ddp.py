"""Train a model with DistributedDataParallel: one process per device, launched by torchrun.

Taught in ``notebooks/05_data_parallel.ipynb``. Examples (from the repository root)::

    # one process, no torchrun: a plain training run
    python scripts/train_ddp.py --steps 20 --out-dir runs/single
    # two processes on this machine (gloo on the CPU, nccl on GPUs)
    python -m torch.distributed.run --standalone --nproc-per-node=2 \\
        scripts/train_ddp.py --steps 20 --out-dir runs/ddp2

``--batch-size`` is the *global* batch: every step, the ``world_size`` ranks together
process exactly the samples one process would, so runs with 1 and N processes give the
same parameters (for models without batch norm; see the notebook).

Rank 0 writes ``metrics.json`` (losses, times, throughput, accuracy), ``model.pt`` (the
final weights) and, every ``--checkpoint-every`` steps, ``checkpoint.pt``, replaced
atomically so that a crash never leaves a half-written file. ``--resume`` continues
from that checkpoint, with any number of processes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import utils

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["lenet", "resnet18"], default="lenet")
    p.add_argument("--width", type=int, default=64, help="ResNet-18 base width (64 = classic)")
    p.add_argument("--data", choices=["synthetic", "cifar10"], default="synthetic")
    p.add_argument("--num-train", type=int, default=256, help="training samples to use")
    p.add_argument("--num-test", type=int, default=0, help="test samples to evaluate on")
    p.add_argument("--batch-size", type=int, default=32, help="global batch (all ranks)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads per process (0: keep)")
    p.add_argument("--warmup-steps", type=int, default=0, help="steps left out of the timing")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--checkpoint-every", type=int, default=0, help="steps (0: never)")
    p.add_argument("--resume", action="store_true", help="continue from out-dir/checkpoint.pt")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds for any collective")
    p.add_argument("--crash-at-step", type=int, default=-1, help="testing: fail at this step")
    p.add_argument("--crash-rank", type=int, default=1, help="testing: the rank that fails")
    p.add_argument("--data-root", default="data", help="where torchvision may download CIFAR")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.num_train < args.batch_size:
        p.error(f"need 1 <= --batch-size <= --num-train, got {args.batch_size}, {args.num_train}")
    for name in ("steps", "num_test", "checkpoint_every", "warmup_steps", "threads"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(args, name)}")
    if args.epochs < 1:
        p.error(f"--epochs must be 1 or more, got {args.epochs}")
    if args.timeout <= 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    return args


def make_datasets(args: argparse.Namespace) -> tuple[TensorDataset, TensorDataset | None]:
    """Tensors in memory: the same on every rank, so the sampler alone decides who sees what."""
    if args.data == "synthetic":
        g = torch.Generator().manual_seed(1234)  # fixed: data must not depend on --seed
        n = args.num_train + args.num_test
        X = torch.randn(n, 3, 32, 32, generator=g)
        y = torch.randint(0, 10, (n,), generator=g)
        train = TensorDataset(X[: args.num_train], y[: args.num_train])
        test = TensorDataset(X[args.num_train :], y[args.num_train :]) if args.num_test else None
        return train, test
    from utils.data import load_cifar10  # notebook 04's loader: offline subset or download

    cifar = load_cifar10(root=args.data_root)

    def to_tensors(ds, n: int) -> TensorDataset:
        try:
            return TensorDataset(*utils.to_tensors(ds, CIFAR_MEAN, CIFAR_STD, n))
        except ValueError as err:
            raise SystemExit(str(err)) from None

    train = to_tensors(cifar.train, args.num_train)
    test = to_tensors(cifar.test, args.num_test) if args.num_test else None
    return train, test


def make_model(args: argparse.Namespace) -> nn.Module:
    if args.model == "resnet18":
        return utils.ResNet18(num_classes=10, width=args.width)
    return utils.LeNet(in_channels=3)


@torch.no_grad()
def evaluate(model: nn.Module, test: TensorDataset, device: torch.device) -> float:
    model.eval()
    correct = 0
    for X, y in DataLoader(test, batch_size=256):
        correct += (model(X.to(device)).argmax(1) == y.to(device)).sum().item()
    model.train()
    return correct / len(test)


def lock_out_dir(out_dir: Path):
    """Refuse a second run writing into the same folder; the lock dies with its process."""
    try:
        import fcntl
    except ImportError:  # Windows: the atomic saves still keep every file whole
        return None
    handle = open(out_dir / ".lock", "w")  # noqa: SIM115 -- must stay open: it holds the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise SystemExit(
            f"another run is writing to {out_dir}: wait for it to end, or pass another --out-dir"
        ) from None
    return handle


@record  # on failure, torchrun's summary shows this rank's exception and traceback
def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    ctx = utils.init_distributed(timeout_s=args.timeout)
    try:
        return train(args, ctx)
    finally:
        utils.cleanup_distributed()


def train(args: argparse.Namespace, ctx: utils.DistContext) -> dict:
    if args.batch_size % ctx.world_size:
        raise SystemExit(
            f"--batch-size {args.batch_size} is not divisible by the world size "
            f"{ctx.world_size}: every rank must get the same number of samples"
        )
    local_batch = args.batch_size // ctx.world_size
    out_dir = args.out_dir
    if ctx.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_out_dir(out_dir)  # noqa: F841 -- held until this process ends

    train_set, test_set = make_datasets(args)
    utils.seed_everything(args.seed)  # same initial weights on every rank ...
    model = make_model(args).to(ctx.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()

    start_step = 0
    history: list[float] = []  # the losses of the steps before a resume
    ckpt_path = out_dir / "checkpoint.pt"
    if args.resume:
        if not ckpt_path.exists():
            raise SystemExit(f"--resume given but there is no checkpoint at {ckpt_path}")
        try:  # the same checks as everywhere: integrity, weights_only, the right model
            state = utils.load_checkpoint(
                ckpt_path, model, optimizer, map_location=ctx.device, restore_rng=False
            )
        except utils.CheckpointError as err:
            raise SystemExit(f"cannot resume: {err}") from None
        if "step" not in state:
            raise SystemExit(f"cannot resume: {ckpt_path} was not written by this script")
        start_step, history = int(state["step"]), list(state.get("losses", []))

    # ... then each rank its own stream of random numbers (augmentation, dropout).
    utils.seed_everything(args.seed + ctx.rank)
    if ctx.distributed:
        # DDP broadcasts rank 0's weights and, during backward, averages the gradients.
        model = DDP(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)

    # drop_last keeps every step's global batch complete and identical for any world size.
    sampler = DistributedSampler(
        train_set,
        num_replicas=ctx.world_size,
        rank=ctx.rank,
        shuffle=True,
        seed=args.seed,
        drop_last=True,
    )
    loader = DataLoader(train_set, batch_size=local_batch, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    total_steps = args.steps or args.epochs * steps_per_epoch  # --steps wins over --epochs
    num_epochs = math.ceil(total_steps / steps_per_epoch)
    if start_step >= total_steps:
        raise SystemExit(
            f"nothing to do: the checkpoint is at step {start_step} and this run stops at step "
            f"{total_steps}; pass --steps larger than {start_step} (or more --epochs)"
        )

    losses: list[float] = []
    epoch_times: list[float] = []
    first_indices: list[int] = []
    step = start_step
    timed_samples, timed_seconds = 0, 0.0
    model.train()
    for epoch in range(start_step // steps_per_epoch, num_epochs):
        sampler.set_epoch(epoch)  # a new shuffle every epoch, the same on every rank
        skip = step - epoch * steps_per_epoch  # batches done before a resume
        if epoch == start_step // steps_per_epoch:  # which samples this rank sees first
            first_indices = list(sampler)[skip * local_batch : (skip + 1) * local_batch]
        t_epoch = time.perf_counter()
        for X, y in itertools.islice(loader, skip, None):
            if step >= total_steps:
                break
            if step == args.crash_at_step and ctx.rank == args.crash_rank:
                raise RuntimeError(f"simulated failure of rank {ctx.rank} at step {step}")
            t0 = time.perf_counter()
            X, y = X.to(ctx.device), y.to(ctx.device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(X), y)
            loss.backward()  # with DDP: gradients are all-reduced here, bucket by bucket
            optimizer.step()
            # the loss of the global batch: average the ranks' losses (for logging only)
            logged = loss.detach().clone()
            if ctx.distributed:
                dist.all_reduce(logged)
                logged /= ctx.world_size
            losses.append(logged.item())
            step += 1
            if step > start_step + args.warmup_steps:
                timed_samples += args.batch_size
                timed_seconds += time.perf_counter() - t0
            if args.checkpoint_every and step % args.checkpoint_every == 0 and ctx.is_main:
                # Written atomically; DDP's wrapper is removed, so any world size resumes it.
                utils.save_checkpoint(
                    ckpt_path, model, optimizer, step=step, losses=history + losses
                )
        epoch_times.append(time.perf_counter() - t_epoch)
        if step >= total_steps:
            break

    indices_per_rank = [first_indices]
    if ctx.distributed:
        indices_per_rank = [None] * ctx.world_size
        dist.all_gather_object(indices_per_rank, first_indices)

    raw = model.module if isinstance(model, DDP) else model
    metrics = {
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "device": ctx.device.type,
        "threads_per_process": torch.get_num_threads(),
        "start_step": start_step,
        "steps": step,
        "global_batch": args.batch_size,
        "local_batch": local_batch,
        "losses": history + losses,  # every step since step 0, across resumes
        "epoch_times_s": epoch_times,
        "samples_per_s": timed_samples / timed_seconds if timed_seconds else None,
        "first_batch_indices_per_rank": indices_per_rank,
    }
    if ctx.is_main:
        if test_set is not None:
            metrics["test_accuracy"] = evaluate(raw, test_set, ctx.device)
        torch.save(raw.state_dict(), out_dir / "model.pt")
        (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
        print(
            f"rank 0 of {ctx.world_size} ({ctx.backend or 'no process group'}, {ctx.device}): "
            f"{step - start_step} steps, last loss {losses[-1]:.4f}"
            if losses
            else "no steps",
            flush=True,
        )
    if ctx.distributed:
        dist.barrier()  # nobody leaves while rank 0 may still need the group
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
