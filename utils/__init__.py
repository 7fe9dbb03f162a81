"""Small helpers shared by the notebooks; each one's docstring names where it is taught."""

from __future__ import annotations

import importlib
from typing import Any

from . import launch, recipe
from .checkpoint import (
    CheckpointError,
    load_checkpoint,
    lock_folder,
    save_atomically,
    save_checkpoint,
    unwrap_model,
)
from .data import (
    CIFAR10Data,
    CIFAR10Unavailable,
    SubsetError,
    load_cifar10,
    make_loader,
    subset_from_full,
    to_tensors,
)
from .device import device_summary, get_device, num_gpus, try_all_gpus, try_gpu
from .distributed import exit_with_launcher
from .models import LeNet
from .parallel import (
    allreduce,
    check_batch_size,
    replicate,
    scatter_sizes,
    split_batch,
)
from .resnet import ResNet18
from .seed import seed_everything

__all__ = [
    "CheckpointError",
    "CIFAR10Data",
    "CIFAR10Unavailable",
    "SubsetError",
    "load_cifar10",
    "load_checkpoint",
    "lock_folder",
    "make_loader",
    "save_atomically",
    "save_checkpoint",
    "LeNet",
    "ResNet18",
    "allreduce",
    "check_batch_size",
    "exit_with_launcher",
    "denormalize",
    "device_summary",
    "get_device",
    "imshow",
    "num_gpus",
    "plot_curves",
    "launch",
    "recipe",
    "replicate",
    "scatter_sizes",
    "seed_everything",
    "split_batch",
    "subset_from_full",
    "to_tensors",
    "try_all_gpus",
    "try_gpu",
    "unwrap_model",
]

# matplotlib costs 1-2 s to import: load the plotting helpers on first use, so the DDP
# worker processes (which never plot) start faster.
_LAZY = {"denormalize": "plotting", "imshow": "plotting", "plot_curves": "plotting"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
