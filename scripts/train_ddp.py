"""Train a CIFAR-10 classifier with DistributedDataParallel (DDP), one process per device.

Notebook 05 launches it in its deep dives, after a minimal DDP script that shows the
mechanics; this one adds what a real job needs. Two processes on this machine:

    torchrun --standalone --nproc-per-node=2 scripts/train_ddp.py --out-dir .runs/ddp

or one ordinary process: ``python scripts/train_ddp.py --out-dir .runs/one``. After an
interruption, the same command with ``--resume`` continues from the last checkpoint, with any
number of processes; without it, a folder that holds a run is refused, never replaced.
"""

import argparse
import itertools
import json
import math
import os
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401 -- before init_process_group: see the end
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset

import utils
from utils.cli import number


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    count = number(int, least=1)
    p = argparse.ArgumentParser(description="DDP training (notebook 05)")
    p.add_argument("--model", choices=["lenet", "resnet18"], default="lenet")
    p.add_argument("--width", type=count, default=64, help="ResNet-18 base width")
    p.add_argument("--data", choices=["synthetic", "cifar10"], default="synthetic")
    p.add_argument("--num-train", type=count, default=1024, help="synthetic: 50,000 at most")
    p.add_argument("--num-test", type=count, default=256, help="synthetic: 10,000 at most")
    p.add_argument("--batch-size", type=count, default=32, help="GLOBAL batch: all ranks together")
    p.add_argument("--epochs", type=count, default=1)
    steps = number(int, least=0)
    p.add_argument("--steps", type=steps, default=0, help="stop after this many steps (0: never)")
    p.add_argument("--lr", type=number(float, above=0), default=0.02)
    p.add_argument("--seed", type=number(int, least=0, most=2**32 - 1), default=0)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/checkpoint.pt")
    args = p.parse_args(argv)
    if not args.out_dir.strip():  # Path("") is the current folder: the repository's root
        p.error("--out-dir must name a folder (an empty one means the current folder)")
    args.out_dir = Path(args.out_dir)
    return args


# What a resumed run must share with the checkpoint's run (--epochs, --steps may grow).
SAME_ON_RESUME = ("data", "num_train", "batch_size", "lr", "seed")
TIMEOUT_S = 60  # how long a process waits for the others: to start, and at every collective


def setup() -> tuple[int, int, torch.device]:
    """Join the process group that torchrun describes in environment variables."""
    if "RANK" not in os.environ:  # started with plain `python`: a single process, on the
        # device the ranks would use (never Apple's MPS: DDP's processes train on the CPU
        # there), so that one process and several can be compared
        return 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    utils.distributed.check_torchrun_env(TIMEOUT_S)  # all its variables, the master there
    if "TORCHELASTIC_RUN_ID" in os.environ:  # started by torchrun: if it is killed, stop too
        utils.exit_with_launcher()
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])  # this process's number on its machine
    timeout = timedelta(seconds=TIMEOUT_S)
    try:
        gpus = torch.cuda.device_count() if dist.is_nccl_available() else 0  # Windows: no NCCL
        if gpus >= int(os.environ["LOCAL_WORLD_SIZE"]):  # a GPU per process, and NCCL
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
            dist.init_process_group("nccl", timeout=timeout, device_id=device)
        else:  # CPU processes talk through gloo
            device = torch.device("cpu")
            dist.init_process_group("gloo", timeout=timeout)
    except dist.DistError as err:  # the others never came: one line, not torch's stack
        why = f"{str(err).strip().splitlines()[0]} Start all {world_size} ranks"
        raise SystemExit(f"rank {rank}: {why} with this MASTER_ADDR and MASTER_PORT") from None
    return rank, world_size, device


def make_data(args: argparse.Namespace, world_size: int) -> tuple[TensorDataset, TensorDataset]:
    """Every rank builds the WHOLE dataset; the sampler decides which samples it trains on."""
    n = args.num_train + args.num_test
    sizes = {"train": 50_000, "test": 10_000}  # synthetic: as many as CIFAR-10
    if args.data == "cifar10":
        # One download per machine: its first process fetches CIFAR-10 while the others wait
        # (all at once, they would write the same archive into the same folder), then they
        # read what it left in data/.
        first_here = int(os.environ.get("LOCAL_RANK", "0")) == 0
        if first_here:
            cifar = load_cifar10()
        if world_size > 1:
            dist.barrier()
        if not first_here:
            cifar = load_cifar10()
        sizes = {"train": len(cifar.train), "test": len(cifar.test)}
    for split, size in sizes.items():
        if (asked := getattr(args, f"num_{split}")) > size:
            raise SystemExit(f"--num-{split} {asked}: the {args.data} {split} set has {size} only")
    if args.data == "synthetic":
        g = torch.Generator().manual_seed(1234)
        X, y = torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)
        return TensorDataset(X[: args.num_train], y[: args.num_train]), TensorDataset(
            X[args.num_train :], y[args.num_train :]
        )
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    parts = []
    for split, n in ((cifar.train, args.num_train), (cifar.test, args.num_test)):
        first = SimpleNamespace(data=split.data[:n], targets=split.targets[:n])  # n images only
        parts.append(TensorDataset(*utils.to_tensors(first, mean, std)))  # notebook 04's
    return parts[0], parts[1]


def load_cifar10() -> utils.CIFAR10Data:
    """Notebook 04's loader, from ./data; what is wrong (no data, no network) in one line."""
    try:
        return utils.load_cifar10(root="data")
    except (utils.CIFAR10Unavailable, utils.SubsetError, ValueError) as err:
        raise SystemExit(str(err)) from None


@torch.no_grad()
def evaluate(model: nn.Module, test_set, device, rank: int, world_size: int) -> float:
    """Test accuracy over ALL ranks: each counts its own share, one all-reduce adds them up."""
    model.eval()
    share = Subset(test_set, range(rank, len(test_set), world_size))  # disjoint shares
    counts = torch.zeros(2, device=device)  # [correct, seen]
    for X, y in DataLoader(share, batch_size=256):
        correct = (model(X.to(device)).argmax(1) == y.to(device)).sum()
        counts += torch.stack([correct, torch.tensor(len(y), device=device)])
    if world_size > 1:
        dist.all_reduce(counts)  # sum over ranks
    model.train()
    return (counts[0] / counts[1]).item()


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    rank, world_size, device = setup()
    if args.batch_size % world_size:
        raise SystemExit(
            f"--batch-size {args.batch_size} is not divisible by the world size "
            f"{world_size}: every rank must get the same share"
        )
    train_set, test_set = make_data(args, world_size)
    if rank == 0:  # only rank 0 writes: it locks the folder, which must hold no other run
        lock = claim_out_dir(args)  # noqa: F841 -- held until this process ends

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    if args.model == "resnet18":
        model = utils.ResNet18(width=args.width).to(device)
    else:
        model = utils.LeNet(in_channels=3).to(device)
    raw = model  # the plain model, also reachable as model.module once wrapped
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    metrics = {"losses": [], "epoch_times_s": [], "test_accuracy": []}
    step = epochs_done = 0
    if args.resume:  # before DDP: it starts every rank from rank 0's weights
        step, epochs_done, metrics = resume(args, raw, optimizer, device)
    metrics.update(
        world_size=world_size, device=str(device), threads=torch.get_num_threads(), start_step=step
    )
    if world_size > 1:
        # DDP copies rank 0's weights to all ranks, and in backward averages the gradients.
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    loss_fn = nn.CrossEntropyLoss()

    # Each rank takes a disjoint 1/world_size of the (shuffled) training set.
    sampler = DistributedSampler(
        train_set, world_size, rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(
        train_set, batch_size=args.batch_size // world_size, sampler=sampler, drop_last=True
    )

    if len(loader) == 0:
        raise SystemExit(
            f"--num-train {args.num_train} is less than one batch of {args.batch_size}"
        )
    if step // len(loader) != epochs_done:  # each checkpoint holds both: they agree
        raise SystemExit(
            f"cannot resume: {args.out_dir / 'checkpoint.pt'} is at step {step} but says "
            f"{epochs_done} epochs of {len(loader)} steps are done: {DAMAGED}"
        )
    last_step = len(loader) * args.epochs
    if args.steps:
        last_step = min(args.steps, last_step)
    if step >= last_step:
        raise SystemExit(
            f"nothing to do: the checkpoint is at step {step} and this run stops at "
            f"step {last_step}; ask for more --steps or --epochs"
        )
    for epoch in range(step // len(loader), args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        start, losses = time.perf_counter(), []
        done = step - epoch * len(loader)  # batches of this epoch trained before a resume
        for X, y in itertools.islice(loader, done, None):
            X, y = X.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(X), y)
            loss.backward()  # with DDP: gradients are averaged over the ranks here
            optimizer.step()
            losses.append(loss.detach())
            step += 1
            if step == args.steps:
                break
        metrics["epoch_times_s"].append(time.perf_counter() - start)
        losses = torch.stack(losses)  # this rank's losses; the global batch's are the mean
        if world_size > 1:
            dist.all_reduce(losses)
            losses /= world_size
            # Batch-norm statistics are buffers, updated on each rank's own shard: take
            # rank 0's everywhere, so that every rank evaluates the same model.
            for buffer in raw.buffers():
                dist.broadcast(buffer, src=0)
        metrics["losses"] += losses.tolist()
        metrics["test_accuracy"].append(evaluate(raw, test_set, device, rank, world_size))
        if rank == 0:  # only rank 0 prints and writes files
            print(
                f"epoch {epoch}: loss {metrics['losses'][-1]:.4f}, "
                f"test accuracy {metrics['test_accuracy'][-1]:.1%}",
                flush=True,
            )
            args.out_dir.mkdir(parents=True, exist_ok=True)
            utils.save_checkpoint(
                args.out_dir / "checkpoint.pt",
                model,
                optimizer,
                epoch=step // len(loader),  # finished epochs: --steps may stop one midway
                step=step,
                metrics=metrics,
                settings={k: getattr(args, k) for k in SAME_ON_RESUME},
            )
        if step == args.steps:
            break

    metrics["steps"] = step
    if rank == 0:
        torch.save(raw.state_dict(), args.out_dir / "model.pt")
        (args.out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1))
    if world_size > 1:
        dist.barrier()  # everyone waits until rank 0 has written its files, then leaves together
    return metrics


DAMAGED = "not written by this script, or damaged; delete it, or pass another --out-dir"
METRICS = ("losses", "epoch_times_s", "test_accuracy")  # lists of numbers, one entry per step
# or per epoch; what the run adds to them


def claim_out_dir(args: argparse.Namespace):
    """Lock OUT_DIR (one run at a time; a clear error if it cannot be written); refuse one
    that holds a run, unless --resume."""
    out, lock = args.out_dir, utils.lock_folder(args.out_dir)
    files = [f for f in ("checkpoint.pt", "metrics.json", "model.pt") if (out / f).exists()]
    if files and not args.resume:  # never replace a run without a word
        run = " and ".join(files)
        if "checkpoint.pt" in files:
            try:  # checked as --resume would check it: nothing unsafe or unbounded is read
                step = utils.checkpoint.read_checkpoint(out / "checkpoint.pt")["extra"]["step"]
                run = f"a run of {step} steps" if type(step) is int and step >= 0 else run
            except (utils.CheckpointError, TypeError, KeyError):  # not one of this script's
                pass
        raise SystemExit(
            f"{out} holds {run}: use --resume to continue it, or another --out-dir (or delete it)"
        )
    return lock


def _finite(values: object) -> bool:
    numbers = isinstance(values, list) and all(type(v) in (int, float) for v in values)
    return numbers and all(map(math.isfinite, values))


def resume(args: argparse.Namespace, model: nn.Module, optimizer, device) -> tuple[int, int, dict]:
    """Load weights and optimizer state; return the step reached, the finished epochs and the
    metrics so far, each checked: a checkpoint is a file like any other."""
    path = args.out_dir / "checkpoint.pt"
    if not path.exists():
        raise SystemExit(f"--resume given but there is no checkpoint at {path}")
    try:  # checked: integrity, weights_only, that it fits this model and optimizer
        state = utils.load_checkpoint(
            path, model, optimizer, map_location=device, restore_rng=False
        )
    except utils.CheckpointError as err:
        raise SystemExit(f"cannot resume: {err}") from None
    if "step" not in state or "metrics" not in state:
        raise SystemExit(f"cannot resume: {path} was not written by this script")
    step, metrics, saved = state["step"], state["metrics"], state.get("settings", {})
    if type(step) is not int or step < 0:
        raise SystemExit(
            f"cannot resume: {path} says step {step!r:.60}, not a whole number of 0 or more: "
            f"{DAMAGED}"
        )
    if not isinstance(metrics, dict) or not all(_finite(metrics.get(k)) for k in METRICS):
        what = f"{', '.join(METRICS)} (lists of numbers)"
        raise SystemExit(f"cannot resume: {path} has metrics without {what}: {DAMAGED}")
    if not isinstance(saved, dict):  # else the optimizer's state silently keeps the old --lr
        raise SystemExit(f"cannot resume: {path} has settings {saved!r:.60}, not a dict: {DAMAGED}")
    if differ := [k for k in SAME_ON_RESUME if k in saved and saved[k] != getattr(args, k)]:
        was = ", ".join(
            f"--{k.replace('_', '-')} {saved[k]} (not {getattr(args, k)})" for k in differ
        )
        raise SystemExit(
            f"cannot resume: {path} is a run with {was}: resume it with its values, or start a "
            "new run in another --out-dir"
        )
    return step, state["epoch"], metrics


if __name__ == "__main__":
    main()
    # The DDP model, which holds the group, was freed when main() returned: this frees the
    # group and stops gloo's threads while Python is still fully alive. (DDP imports
    # torch.distributed.nn; imported after init_process_group, its functions' default
    # arguments would keep the group alive, and a gloo thread could abort the exit.)
    if dist.is_initialized():
        dist.destroy_process_group()
