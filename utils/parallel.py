"""Putting a model on one GPU or several, and data parallelism written by hand.

Everything here is taught in ``notebooks/05_data_parallel.ipynb``:

* :func:`to_data_parallel` -- ``nn.DataParallel`` only when there are 2+ GPUs (the
  notebook writes this pattern in plain code);
* :func:`scatter_sizes` -- how DataParallel splits a batch (``Tensor.chunk``);
* :func:`data_parallel_or_local` -- the functional ``data_parallel`` where it can run;
* :func:`split_batch`, :func:`replicate`, :func:`allreduce` -- the from-scratch version;
  the notebook writes each in its cells and checks these copies equal to its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .device import get_device, num_gpus


def _available_gpus_text(n: int) -> str:
    if n == 0:
        return "this machine has no usable CUDA GPU (pass device_ids=None to run on the CPU)"
    names = ", ".join(f"cuda:{i}" for i in range(n))
    return f"this machine has {n} CUDA GPU(s): {names}"


def _as_index(d: int | str | torch.device) -> int:
    dev = torch.device(d) if isinstance(d, str) else d
    if isinstance(dev, torch.device):
        if dev.type != "cuda":
            raise ValueError(f"device_ids must name CUDA GPUs, got {dev}")
        return 0 if dev.index is None else dev.index
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise TypeError(f"device ids must be ints or CUDA devices, got {d!r}")
    return dev


def to_data_parallel(
    model: nn.Module, device_ids: Sequence[int | str | torch.device] | None = None
) -> nn.Module:
    """Put ``model`` on the right device; wrap it in ``nn.DataParallel`` only for 2+ GPUs.

    * ``device_ids=None``: use every visible GPU; with none, the model goes to
      :func:`utils.get_device` (MPS or CPU) and is returned unwrapped.
    * one id: the model moves to that GPU, unwrapped (DataParallel would only add cost).
    * two or more ids: ``nn.DataParallel(model, device_ids)`` with the model on the first.

    Raises ``ValueError`` naming the GPUs that do exist when an id is invalid. A batch
    smaller than the number of GPUs is legal: DataParallel gives the first GPUs one chunk
    each and leaves the others idle (as it does for 5, 6 or 9 samples on 4 GPUs). Notebook 05
    writes the same pattern in plain code.
    """
    n = num_gpus()
    if device_ids is None:
        if n == 0:
            return model.to(get_device())
        ids = list(range(n))
    else:
        ids = [_as_index(d) for d in device_ids]
        if not ids:
            raise ValueError("device_ids is empty: pass None to use every available device")
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"invalid device id(s) {bad}: {_available_gpus_text(n)}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"device_ids has duplicates: {ids}")
    model = model.to(torch.device(f"cuda:{ids[0]}"))
    if len(ids) == 1:
        return model
    return nn.DataParallel(model, device_ids=ids)


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


def data_parallel_or_local(
    module: nn.Module,
    inputs: torch.Tensor,
    device_ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """``torch.nn.parallel.data_parallel`` on the GPUs, or a plain call where there are none.

    The functional form only runs on CUDA (on the CPU it raises "device type could not be
    determined"); without a GPU this calls ``module(inputs)``, which is what DataParallel
    does too. ``device_ids=None`` means every visible GPU. Taught in notebook 05.
    """
    n = num_gpus()
    if n == 0:
        return module(inputs)
    ids = list(range(n)) if device_ids is None else list(device_ids)
    bad = [i for i in ids if not 0 <= i < n]
    if bad or not ids:
        raise ValueError(f"invalid device id(s) {bad or ids}: {_available_gpus_text(n)}")
    return nn.parallel.data_parallel(module, inputs, device_ids=ids)


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
