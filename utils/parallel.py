"""Data parallelism written by hand, as taught in ``notebooks/05_data_parallel.ipynb``.

* :func:`scatter_sizes` -- how DataParallel splits a batch (``Tensor.chunk``);
* :func:`split_batch`, :func:`replicate`, :func:`allreduce` -- the from-scratch version;
  the notebook writes each in its cells and checks these copies equal to its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_batch_size(batch_size: int, n_devices: int) -> None:
    """Raise ``ValueError`` when a batch cannot give every replica a shard (from scratch).

    Only :func:`split_batch` needs this: a hand-made replica without a shard would get no
    gradient. ``nn.DataParallel`` itself accepts such a batch and leaves GPUs idle.
    """
    if n_devices < 1:
        raise ValueError(f"need at least one device, got {n_devices}")
    if batch_size < n_devices:
        raise ValueError(
            f"batch of {batch_size} sample(s) is smaller than the {n_devices} devices: "
            f"use a batch of at least {n_devices} (ideally a multiple of it) or fewer devices"
        )


def scatter_sizes(batch_size: int, n_devices: int) -> list[int]:
    """Per-device batch sizes when DataParallel scatters ``batch_size`` samples (notebook 05).

    DataParallel splits along dim 0 with ``Tensor.chunk(n_devices)``: chunks of
    ``ceil(batch_size / n_devices)`` and a smaller last one -- so a batch of 9 on 4
    devices becomes ``[3, 3, 3]`` and the fourth device gets nothing. The sizes are
    computed with that very call, on an empty-cost index tensor.
    """
    if batch_size < 1 or n_devices < 1:
        raise ValueError(f"batch_size and n_devices must be >= 1, got {batch_size}, {n_devices}")
    return [len(c) for c in torch.arange(batch_size).chunk(n_devices)]


def split_batch(
    X: torch.Tensor, y: torch.Tensor, devices: Sequence[torch.device]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Split ``X`` and ``y`` into one shard per device, DataParallel's way (notebook 05).

    Shard sizes follow :func:`scatter_sizes`; every device must get at least one sample.
    """
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
    check_batch_size(X.shape[0], len(devices))
    sizes = scatter_sizes(X.shape[0], len(devices))
    if len(sizes) < len(devices):
        raise ValueError(
            f"a batch of {X.shape[0]} splits into only {len(sizes)} chunk(s) for "
            f"{len(devices)} devices: use a batch size that is a multiple of {len(devices)}"
        )
    return [
        (xs.to(d), ys.to(d))
        for xs, ys, d in zip(X.split(sizes), y.split(sizes), devices, strict=True)
    ]


def replicate(params: Sequence[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Copies of ``params`` on ``device`` that record gradients (notebook 05, from scratch)."""
    return [p.detach().to(device, copy=True).requires_grad_() for p in params]


def allreduce(tensors: Sequence[torch.Tensor]) -> None:
    """Sum ``tensors`` (one per device) in place, so every copy holds the total (notebook 05).

    The naive version: add everything onto the first device, then copy the sum back.
    Real all-reduce (ring, tree) spreads this traffic over every link.
    """
    if not tensors:
        raise ValueError("allreduce needs at least one tensor")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"allreduce needs tensors of one shape, got {sorted(shapes)}")
    total = tensors[0].detach().clone()
    for t in tensors[1:]:
        total += t.detach().to(total.device)
    for t in tensors:
        t.copy_(total.to(t.device))
