"""Checkpoints that survive an interrupted training run, loadable with ``weights_only=True``.

Taught in ``notebooks/04_cifar10.ipynb`` (section "Interrupted training").

A checkpoint holds everything a run needs to carry on exactly where it stopped: the
model's and optimizer's state, the learning-rate scheduler's state, the number of
finished epochs and the random number generators' states (Python, NumPy, PyTorch on
the CPU and on every GPU), so that shuffling and augmentation continue with the same
random numbers. Everything in it is a tensor, a number, a string or a container of
those, so ``torch.load(..., weights_only=True)`` reads it: loading a checkpoint never
runs pickled code.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

FORMAT = "blitz-checkpoint-v1"
_REQUIRED = ("format", "model", "epoch", "rng")


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt, truncated or does not fit the objects given."""


def rng_state() -> dict[str, Any]:
    """The state of every random number generator a training loop uses (notebook 04)."""
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        # NumPy's state holds an ndarray, which weights_only loading refuses: store a tensor.
        "numpy": (
            np_state[0],
            torch.from_numpy(np_state[1].astype(np.int64)),
            *[float(v) if isinstance(v, float) else int(v) for v in np_state[2:]],
        ),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the generators saved by :func:`rng_state` (notebook 04)."""
    version, keys, gauss_next = state["python"]
    random.setstate((version, tuple(keys), gauss_next))
    name, keys_t, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys_t.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    # Save the plain model's weights whatever wrapper (DataParallel, compile) is around it.
    inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None) or model
    return inner.state_dict()


def save_atomically(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a temporary file beside ``path``, then rename it into place.

    Readers see the old file or the new one, never half of one (notebook 04; also used
    by ``scripts/train_ddp.py``).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)  # atomic on POSIX and Windows
    return path


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    epoch: int = 0,
    **extra: Any,
) -> Path:
    """Save model + optimizer + scheduler + finished ``epoch`` + RNG states to ``path``.

    The file is written next to its destination and renamed into place, so an
    interruption while saving never leaves a half-written checkpoint behind.
    ``extra`` keyword arguments (numbers, strings, lists, tensors) are stored too, e.g.
    the loss history. Returns the path. Taught in notebook 04.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "model": _state_dict(model),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "epoch": int(epoch),
        "rng": rng_state(),
        "extra": extra,
    }
    return save_atomically(payload, path)


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    map_location: str | torch.device = "cpu",
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` into the given objects.

    Uses ``torch.load(..., weights_only=True)``. Restores the RNG states too unless
    ``restore_rng=False``. Returns ``{"epoch": ..., **extra}``. Raises
    :class:`CheckpointError` with a clear message when the file is missing, corrupt
    or truncated, is not such a checkpoint, or does not fit ``model``/``optimizer``.
    Taught in notebook 04.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: start training from scratch instead")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # zip/pickle errors say nothing about what to do
        detail = (str(err).strip().splitlines() or [""])[0][:200]  # the first line is enough
        raise CheckpointError(
            f"cannot read the checkpoint {path}: it is corrupt or truncated, or not a "
            f"PyTorch file ({type(err).__name__}: {detail}). "
            "Delete it and resume from an earlier checkpoint or from scratch."
        ) from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is a PyTorch file but not a checkpoint written by save_checkpoint "
            f"(expected format {FORMAT!r})"
        )
    missing = [k for k in _REQUIRED if k not in ckpt]
    if missing:
        raise CheckpointError(f"the checkpoint {path} lacks {missing}: it is incomplete")
    try:
        inner = getattr(model, "module", None) or getattr(model, "_orig_mod", None) or model
        inner.load_state_dict(ckpt["model"])
        if optimizer is not None:
            if ckpt.get("optimizer") is None:
                raise CheckpointError(f"the checkpoint {path} holds no optimizer state")
            optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None:
            if ckpt.get("scheduler") is None:
                raise CheckpointError(f"the checkpoint {path} holds no scheduler state")
            scheduler.load_state_dict(ckpt["scheduler"])
    except (RuntimeError, ValueError, KeyError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(
            f"the checkpoint {path} does not fit this model/optimizer/scheduler "
            f"(was it saved from another architecture?): {err}"
        ) from err
    if restore_rng:
        set_rng_state(ckpt["rng"])
    return {"epoch": int(ckpt["epoch"]), **ckpt.get("extra", {})}
