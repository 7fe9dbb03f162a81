"""Putting a model on one GPU or several: the DataParallel wrapper.

Introduced in ``notebooks/05_data_parallel.ipynb``.
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

    Raises ``ValueError`` naming the GPUs that do exist when an id is invalid.
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
