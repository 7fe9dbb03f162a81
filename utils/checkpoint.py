"""Checkpoint safety that no lesson teaches: what a long run needs around ``torch.save``.

Notebook 04 teaches what a checkpoint holds. Here: atomic saves, a save-time refusal of what
``weights_only=True`` could not load, CRC checks, clear errors, unwrapped models, a lock.
"""

from __future__ import annotations

import contextlib
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

FORMAT = "blitz-checkpoint-v2"
_TMP_PREFIX = ".blitz-save-"  # temporary files of a save, recognisable by name
_STALE_TMP_S = 600  # a temporary file this old belongs to a writer that died
_DELETE = "Delete it and resume from an earlier checkpoint or from scratch."


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt, truncated or does not fit the objects given."""


def _rng_state() -> dict[str, Any]:
    name, keys, *rest = np.random.get_state()
    numpy = (name, torch.from_numpy(keys.astype(np.int64)), *rest)  # weights_only: no ndarray
    cuda = {"cuda": torch.cuda.get_rng_state_all()} if torch.cuda.is_available() else {}
    return {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state(), **cuda}


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model inside any nesting of ``DataParallel``, DDP and ``torch.compile``, unwrapped
    by type, never by attribute name: a model may have a submodule called ``module``."""
    # torch.compile's wrapper lives in torch._dynamo, whose import takes seconds; no compiled
    # model exists before torch.compile has imported it: look, don't import.
    dynamo = sys.modules.get("torch._dynamo")
    compiled = (dynamo.OptimizedModule,) if dynamo else ()
    while isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel, *compiled)):
        model = model._orig_mod if isinstance(model, compiled) else model.module
    return model


def _save_atomically(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file of this writer's own, ``fsync``, rename into place:
    readers see the old file or the new one, never half of one, even with several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for tmp in path.parent.glob(_TMP_PREFIX + "*"):  # left behind by writers killed mid-save
        with contextlib.suppress(OSError):  # another writer renamed or removed it meanwhile
            if time.time() - tmp.stat().st_mtime > _STALE_TMP_S:  # a live writer's is younger
                tmp.unlink()
    tmp = path.with_name(f"{_TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    # O_EXCL: never another writer's file; 0o666 less the umask, as for any file one writes
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    crc = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(True)  # load_checkpoint relies on them
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())  # else a power cut can leave an empty file after the rename
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        torch.serialization.set_crc32_options(crc)


def _refusal_reason(err: BaseException) -> str:
    """torch's reason for a weights_only refusal, without its advice to turn weights_only off."""
    # torch raises UnpicklingError(advice + reason) from None; the unpickler's own error, kept
    # as __context__, holds the reason alone. Without it, the advice is cut out.
    raw = err.__context__ if isinstance(err.__context__, pickle.UnpicklingError) else err
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(str(raw).split()))
    return " ".join(s for s in sentences if not ("weights_only" in s and "False" in s))


def _weights_only_problem(obj: Any) -> str | None:
    """Why ``torch.load(weights_only=True)`` could not read ``obj`` back: a real round trip."""
    buffer = io.BytesIO()
    try:
        torch.save(obj, buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True, map_location="meta")  # "meta": no second copy
    except Exception as err:  # a refused type, or not picklable at all (a lambda)
        return _refusal_reason(err).split(". ")[0].rstrip(".")  # what, not how to allow it
    return None


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: Any = None,
    scheduler: Any = None,
    epoch: int = 0,
    **extra: Any,
) -> Path:
    """Save model, optimizer, scheduler, finished ``epoch``, RNG states and ``extra`` values.

    Atomically. What ``weights_only=True`` could not load back is refused now, by name,
    rather than costing the run its checkpoint at load time.
    """
    path = Path(path)
    states, types = {"model": unwrap_model(model).state_dict()}, {}
    for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        states[kind] = None if obj is None else obj.state_dict()
        types[f"{kind}_type"] = None if obj is None else type(obj).__name__
    parts = {f"the {k} state": v for k, v in states.items()}
    parts.update((f"extra value {k!r}", v) for k, v in extra.items())
    problems = {name: why for name, v in parts.items() if (why := _weights_only_problem(v))}
    if problems:
        raise CheckpointError(
            f"not saving {path}: {' and '.join(problems)} could not be loaded back with "
            f"torch.load(weights_only=True) ({next(iter(problems.values()))}). Store only "
            "tensors, Python numbers and strings, and lists, tuples or dicts of them: e.g. "
            "float(acc) instead of a NumPy number, torch.from_numpy(a) instead of an array."
        )
    _save_atomically(
        {
            "format": FORMAT,
            **states,
            **types,
            "epoch": int(epoch),
            "rng": _rng_state(),
            "extra": extra,
        },
        path,
    )
    return path


def lock_folder(folder: str | Path):
    """Hold ``folder/.lock`` (keep the file returned open), so that a second run writing into
    ``folder`` is refused. ``flock``: a crashed run leaves no stale lock. None on Windows."""
    try:
        import fcntl
    except ImportError:
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    handle = open(Path(folder) / ".lock", "w")  # noqa: SIM115 -- stays open: it holds the lock
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        msg = f"another run is writing to {folder}: wait for it to end, or pass another --out-dir"
        raise SystemExit(msg) from None
    return handle


def _check_crc(path: Path) -> None:
    """Catch flipped bytes with the CRC-32 ``torch.save`` writes for every record (not forgery:
    ``weights_only=True`` is the defence against that)."""
    try:
        with zipfile.ZipFile(path) as zf:
            if not any(info.CRC for info in zf.infolist() if info.file_size):
                why = "has no checksums (saved after torch.serialization.set_crc32_options(False))"
                raise CheckpointError(f"the checkpoint {path} {why}. {_DELETE}")
            bad = zf.testzip()
    except zipfile.BadZipFile:
        return  # not a zip at all: torch.load says what it is
    if bad is not None:
        why = f"is corrupt: the data of {bad} fails its checksum (CRC)"
        raise CheckpointError(f"the checkpoint {path} {why}. {_DELETE}")


def load_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: Any = None,
    scheduler: Any = None,
    map_location: Any = "cpu",
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint of :func:`save_checkpoint` into the given objects, with ``weights_only``.

    Restores the RNG states unless ``restore_rng=False``; returns ``{"epoch": ..., **extra}``.
    A missing, corrupt, unsafe or unfitting file raises :class:`CheckpointError`.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: start training from scratch instead")
    _check_crc(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err):
            raise CheckpointError(  # torch's full reason, never its advice to load anyway
                f"refused to load {path}: it holds more than tensors and plain data, which could "
                f"run code on this machine. {_refusal_reason(err)} Do not load files you do not "
                "trust; a checkpoint written by save_checkpoint never contains such objects."
            ) from None
        detail = (str(err).strip().splitlines() or [""])[0][:200]  # the rest is noise
        why = f"it is corrupt or truncated, or not a PyTorch file ({type(err).__name__}: {detail})"
        raise CheckpointError(f"cannot read the checkpoint {path}: {why}. {_DELETE}") from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is a PyTorch file but not a checkpoint written by "
            f"save_checkpoint (expected format {FORMAT!r})"
        )
    try:
        unwrap_model(model).load_state_dict(ckpt["model"])
        for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
            if obj is None:
                continue
            # Another class's state can load without error and break later (Adam's step
            # would lack 'betas'): refused by the class name saved with it.
            if (saved := ckpt[f"{kind}_type"]) != type(obj).__name__:
                saved = f"the {kind} {saved}" if saved else f"no {kind} state"
                raise CheckpointError(
                    f"the checkpoint {path} was saved with {saved}, but {type(obj).__name__} "
                    f"was given: build the same {kind} as the saved run, or pass {kind}=None"
                )
            obj.load_state_dict(ckpt[kind])
    except CheckpointError:
        raise
    except (RuntimeError, ValueError, KeyError) as err:
        why = "does not fit this model/optimizer/scheduler (saved from another architecture?)"
        raise CheckpointError(f"the checkpoint {path} {why}: {err}") from err
    if restore_rng:
        _set_rng_state(ckpt["rng"])
    return {"epoch": int(ckpt["epoch"]), **ckpt["extra"]}
