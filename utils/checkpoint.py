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
import re
import secrets
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

FORMAT = "blitz-checkpoint-v2"  # v2: the optimizer's (and scheduler's) class name is stored
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
    # torch.compile returns a torch._dynamo.OptimizedModule (exported in torch._dynamo's
    # __all__; torch has no public name for it). Importing torch._dynamo takes seconds, and
    # no compiled model can exist before torch.compile has imported it: look, don't import.
    compiled = getattr(sys.modules.get("torch._dynamo"), "OptimizedModule", None)
    while True:
        if isinstance(model, nn.DataParallel | nn.parallel.DistributedDataParallel):
            model = model.module
        elif compiled is not None and isinstance(model, compiled):
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


def _new_temporary(path: Path) -> tuple[int, Path]:
    """Create a uniquely named, empty file beside ``path``: (open descriptor, its path).

    Like ``tempfile.mkstemp`` (``O_EXCL``: no two writers ever share one), but with the
    permissions of any file the user writes (``0o666`` less the umask) instead of 0600,
    since the file becomes the checkpoint.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = path.with_name(f"{_TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue  # astronomically unlikely: draw another name


def save_atomically(obj: Any, path: str | Path) -> Path:
    """``torch.save`` to a fresh temporary file beside ``path``, then rename it into place.

    Readers see the old file or the new one, never half of one, even with several writers
    (each has its own temporary file). The data is flushed to disk (``fsync``) before the
    rename, and the folder after it, so a power cut cannot leave an empty file behind
    either. Temporary files (``.blitz-save-*.tmp``) that writers killed mid-save left
    behind are removed by the next save into that folder once they are 10 minutes old
    (a live writer's file is younger: writing updates its time). Taught in notebook 04;
    used by ``scripts/train_ddp.py``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(path.parent)  # first: frees the space a killed writer took
    fd, tmp = _new_temporary(path)
    # load_checkpoint checks the CRC-32 that torch.save writes for every record, which can
    # be switched off globally (torch.serialization.set_crc32_options(False)): not here.
    crc_off = not torch.serialization.get_crc32_options()
    try:
        if crc_off:
            torch.serialization.set_crc32_options(True)
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if crc_off:
            torch.serialization.set_crc32_options(False)  # as the user set it
    if hasattr(os, "O_DIRECTORY"):  # POSIX: make the rename itself durable
        dir_fd = os.open(path.parent, os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path


def _refusal_reason(err: BaseException) -> str:
    """torch's reason for a weights_only refusal, without its advice to turn weights_only off.

    torch raises ``UnpicklingError(<its advice> + <the unpickler's message>) from None``;
    ``from None`` hides the unpickler's own exception from tracebacks but keeps it as
    ``__context__``: its message is the whole reason, and holds no such advice.
    """
    raw = err.__context__ if isinstance(err.__context__, pickle.UnpicklingError) else err
    text = str(raw)
    # Should a later torch no longer keep __context__: cut its advice out of the message.
    unsafe_advice = getattr(torch.serialization, "UNSAFE_MESSAGE", "")
    if unsafe_advice:
        text = text.replace(unsafe_advice, "")
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())  # no ANSI bold, one line
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return " ".join(s for s in sentences if not ("weights_only" in s and "False" in s))


def _weights_only_problem(obj: Any) -> Exception | None:
    """Why ``torch.load(..., weights_only=True)`` could not read ``obj`` back, or None.

    A real round trip in memory, not a list of allowed types that would drift from torch's;
    ``map_location="meta"`` rebuilds the structure without allocating any tensor (and no
    second copy on the GPU).
    """
    buffer = io.BytesIO()
    try:
        torch.save(obj, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True, map_location="meta")
    except Exception as err:  # a refused type, or not picklable at all (a lambda)
        return err
    return None


def _check_loadable(payload: dict[str, Any], path: Path) -> None:
    """Refuse at save time, naming the culprit, what ``weights_only=True`` cannot load.

    Found only at load time, it would cost the run its checkpoint.
    """
    err = _weights_only_problem(payload)
    if err is None:
        return
    culprits = [f"the {k} state" for k in ("model", "optimizer", "scheduler")
                if _weights_only_problem(payload[k])]  # fmt: skip
    culprits += [f"extra value {k!r}" for k, v in payload["extra"].items()
                 if _weights_only_problem(v)]  # fmt: skip
    if isinstance(err, pickle.UnpicklingError):
        # What was refused, not how to allowlist it (every reader would have to).
        reason = _refusal_reason(err).split(". ")[0].rstrip(".")
    else:
        reason = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"
    raise CheckpointError(
        f"not saving {path}: {' and '.join(culprits) or 'its content'} could not be loaded "
        f"back with torch.load(weights_only=True) ({reason}). Store only tensors, Python "
        "numbers and strings, and lists, tuples or dicts of them: e.g. float(acc) instead "
        "of a NumPy number, torch.from_numpy(a) instead of an array."
    ) from None


def _check_zip(path: Path) -> None:
    """Catch flipped bytes, with the CRC-32 that ``torch.save`` writes for every record.

    Why the CRC and not a digest of our own: it is already there, covers every byte of
    every record (the pickle and each tensor's data), costs one read of the file and no
    format change, and catches any burst of up to 32 flipped bits and all but 1 in 2**32
    random corruptions. It is no defence against someone who rewrites the file on purpose
    (they can recompute it, as they could a stored digest); ``weights_only=True`` is.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            records = [info for info in zf.infolist() if info.file_size]
            if records and not any(info.CRC for info in records):
                raise CheckpointError(
                    f"the checkpoint {path} has no checksums (it was written after "
                    "torch.serialization.set_crc32_options(False)), so damage to it could "
                    "not be detected: delete it and start from scratch, or, if you know it "
                    "is intact, load its weights yourself with model.load_state_dict("
                    "torch.load(path, weights_only=True)['model'])"
                )
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
        "scheduler_type": None if scheduler is None else type(scheduler).__name__,
        "epoch": int(epoch),
        "rng": rng_state(),
        "extra": extra,
    }
    _check_loadable(payload, path)
    return save_atomically(payload, path)


def lock_folder(folder: str | Path):
    """Hold ``folder/.lock`` so that a second run writing into ``folder`` is refused (notebook 05).

    Returns an open file: keep it while writing; the lock ends with it or with the process
    (``flock``: a crashed run leaves no stale lock). ``None`` where ``flock`` does not exist
    (Windows): the atomic saves still keep every file whole there.
    """
    try:
        import fcntl
    except ImportError:
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / ".lock", "w")  # noqa: SIM115 -- must stay open: it holds the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise SystemExit(
            f"another run is writing to {folder}: wait for it to end, or pass another --out-dir"
        ) from None
    return handle


def _check_same_type(path: Path, kind: str, saved: str | None, given: Any) -> None:
    """Refuse another optimizer's (or scheduler's) state, by the class name saved with it.

    Such a state loads without error and breaks later (Adam's step then lacks 'betas').
    """
    if saved != type(given).__name__:
        raise CheckpointError(
            f"the checkpoint {path} was saved with the {kind} {saved}, but "
            f"{type(given).__name__} was given: build the same {kind} as the saved run, or "
            f"pass {kind}=None to load the rest"
        )


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
    except Exception as err:
        if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err):
            # Something that is not data (code, a class of one's own): refused, with torch's
            # full reason but never its advice to load with weights_only=False.
            raise CheckpointError(
                f"refused to load {path}: it holds more than tensors and plain data, which "
                f"could run code on this machine. {_refusal_reason(err)} Do not load files "
                "you do not trust; a checkpoint written by save_checkpoint never contains "
                "such objects."
            ) from None
        # zip/pickle errors say nothing about what to do; their first line is enough
        detail = (str(err).strip().splitlines() or [""])[0][:200]
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
            _check_same_type(path, "optimizer", ckpt.get("optimizer_type"), optimizer)
            optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None:
            if ckpt.get("scheduler") is None:
                raise CheckpointError(f"the checkpoint {path} holds no scheduler state")
            # Checkpoints saved before scheduler_type was stored (same format) are not checked.
            if "scheduler_type" in ckpt:
                _check_same_type(path, "scheduler", ckpt["scheduler_type"], scheduler)
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
