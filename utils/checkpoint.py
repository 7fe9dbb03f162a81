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

import io
import os
import pickle
import random
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

FORMAT = "blitz-checkpoint-v2"  # v2: the optimizer's class name is stored
_REQUIRED = ("format", "model", "epoch", "rng")
_TMP_PREFIX = ".blitz-save-"  # temporary files of save_atomically, recognisable by name
_STALE_TMP_S = 600  # a temporary file this old belongs to a writer that died


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


def unwrap_model(model: nn.Module) -> nn.Module:
    """The plain model inside any nesting of ``DataParallel``, DDP and ``torch.compile``.

    Unwrapped by type, never by attribute name: a model of your own may well have a
    submodule called ``module``. Used by :func:`save_checkpoint` and :func:`load_checkpoint`
    (notebooks 04 and 05).
    """
    from torch._dynamo.eval_frame import OptimizedModule  # what torch.compile returns

    while True:
        if isinstance(model, nn.DataParallel | nn.parallel.DistributedDataParallel):
            model = model.module
        elif isinstance(model, OptimizedModule):
            model = model._orig_mod
        else:
            return model


def _state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    return unwrap_model(model).state_dict()


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete temporary files that writers killed mid-save left behind (old enough)."""
    now = time.time()
    for tmp in folder.glob(_TMP_PREFIX + "*"):
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP_S:
                tmp.unlink()
        except OSError:
            pass  # another process removed or renamed it meanwhile


def save_atomically(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a fresh temporary file beside ``path``, then rename it into place.

    Readers see the old file or the new one, never half of one, even with several writers
    (each has its own temporary file). The data is flushed to disk (``fsync``) before the
    rename, and the folder after it, so a power cut cannot leave an empty file behind
    either. Temporary files of writers killed mid-save are removed by a later save. Taught
    in notebook 04; used by ``scripts/train_ddp.py``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # POSIX: make the rename itself durable
        dir_fd = os.open(path.parent, os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def _check_loadable(payload: dict[str, Any], path: Path) -> None:
    """Refuse now what ``torch.load(..., weights_only=True)`` would refuse later."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    buffer.seek(0)
    try:
        torch.load(buffer, weights_only=True)
    except Exception as err:
        bad = [k for k, v in payload.get("extra", {}).items() if not _plain(v)]
        which = f"the extra value(s) {bad}" if bad else "part of the checkpoint"
        raise CheckpointError(
            f"not saving {path}: {which} could not be loaded back with weights_only=True "
            f"({type(err).__name__}). Store only tensors, numbers, strings and lists/dicts "
            "of them, e.g. float(acc) instead of a NumPy number."
        ) from None


def _plain(value: Any) -> bool:
    """Tensors, exact Python numbers/strings (not NumPy's subclasses), and containers."""
    if isinstance(value, torch.Tensor) or type(value) in (str, bool, int, float, type(None)):
        return True
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(type(k) in (str, int) and _plain(v) for k, v in value.items())
    return False


def _check_zip(path: Path) -> None:
    """Catch flipped bytes: every member of a ``torch.save`` zip has a CRC-32."""
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except zipfile.BadZipFile:
        return  # not a zip at all: torch.load says what it is
    except OSError as err:
        raise CheckpointError(f"cannot read the checkpoint {path}: {err}") from err
    if bad is not None:
        raise CheckpointError(
            f"the checkpoint {path} is corrupt: the data of {bad} fails its checksum (CRC). "
            "Delete it and resume from an earlier checkpoint or from scratch."
        )


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
    payload = {
        "format": FORMAT,
        "model": _state_dict(model),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "optimizer_type": None if optimizer is None else type(optimizer).__name__,
        "scheduler": None if scheduler is None else scheduler.state_dict(),
        "epoch": int(epoch),
        "rng": rng_state(),
        "extra": extra,
    }
    _check_loadable(payload, path)
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
    _check_zip(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        # The weights_only unpickler met something that is not data (code, a custom class).
        # Its message ends with advice to load with weights_only=False: never do that with
        # a file you do not trust, so that part is left out.
        paragraphs = [p.strip() for p in str(err).split("\n\n") if p.strip()]
        reason = " ".join(p for p in paragraphs if "weights_only` set to `False`" not in p)
        raise CheckpointError(
            f"refused to load {path}: it holds more than tensors and plain data, which could "
            f"run code on this machine. {reason} Do not load files you do not trust; "
            "a checkpoint written by save_checkpoint never contains such objects."
        ) from None
    except Exception as err:  # zip/pickle errors say nothing about what to do
        detail = (str(err).strip().splitlines() or [""])[0][:200]  # the first line is enough
        raise CheckpointError(
            f"cannot read the checkpoint {path}: it is corrupt or truncated, or not a "
            f"PyTorch file ({type(err).__name__}: {detail}). "
            "Delete it and resume from an earlier checkpoint or from scratch."
        ) from err
    if isinstance(ckpt, dict) and ckpt.get("format") == "blitz-checkpoint-v1":
        raise CheckpointError(
            f"{path} was written by an older version of save_checkpoint ({ckpt['format']}); "
            "start this run from scratch or load its model weights with "
            "model.load_state_dict(torch.load(path, weights_only=True)['model'])"
        )
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is a PyTorch file but not a checkpoint written by save_checkpoint "
            f"(expected format {FORMAT!r})"
        )
    missing = [k for k in _REQUIRED if k not in ckpt]
    if missing:
        raise CheckpointError(f"the checkpoint {path} lacks {missing}: it is incomplete")
    try:
        unwrap_model(model).load_state_dict(ckpt["model"])
        if optimizer is not None:
            if ckpt.get("optimizer") is None:
                raise CheckpointError(f"the checkpoint {path} holds no optimizer state")
            saved, wanted = ckpt.get("optimizer_type"), type(optimizer).__name__
            if saved != wanted:
                raise CheckpointError(
                    f"the checkpoint {path} holds the state of a {saved} optimizer, but a "
                    f"{wanted} was given: build the same optimizer as the saved run, or pass "
                    "optimizer=None to load only the model"
                )
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
