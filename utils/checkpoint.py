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


def _set_rng_state(state: dict[str, Any], trial: bool = False) -> None:
    """Set the global generators to ``state``; ``trial``: fresh ones, only to check that it fits."""
    python, numpy = (random.Random(), np.random.RandomState()) if trial else (random, np.random)
    python.setstate(state["python"])
    name, keys, *rest = state["numpy"]
    numpy.set_state((name, keys.cpu().numpy().astype(np.uint32), *rest))
    (torch.Generator() if trial else torch.default_generator).set_state(state["torch"].cpu())
    cuda = state.get("cuda", [])
    if not all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda):
        raise TypeError("the CUDA states are not byte tensors")
    if cuda and not trial and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


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
    readers see the old file or the new one, never half of one, even with several writers.
    Through a symbolic link: its target is replaced, the link stays."""
    path = Path(os.path.realpath(path))
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
    ``folder`` is refused. ``flock``: a crashed run leaves no stale lock. None on Windows.
    A folder that cannot be written (a file, inside a file, read-only) is one line too."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / ".lock", "a")  # noqa: SIM115 -- stays open: it holds the lock
    except OSError as err:
        file = next((p for p in (folder, *folder.parents) if p.is_file()), None)
        why = f"{'it' if file == folder else file} is a file" if file else err.strerror
        raise SystemExit(f"cannot write to {folder} ({why}): pass another --out-dir") from None
    try:
        import fcntl
    except ImportError:
        handle.close()
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        msg = f"another run is writing to {folder}: wait for it to end, or pass another --out-dir"
        raise SystemExit(msg) from None
    return handle


def _unreadable(path: Path, err: BaseException) -> CheckpointError:
    detail = (str(err).strip().splitlines() or [""])[0][:200]  # the rest is noise
    why = f"it is corrupt or truncated, or not a PyTorch file ({type(err).__name__}: {detail})"
    fix = "Make it readable." if isinstance(err, PermissionError) else _DELETE
    return CheckpointError(f"cannot read the checkpoint {path}: {why}. {fix}")


def _check_crc(path: Path) -> None:
    """Catch flipped bytes with the CRC-32 ``torch.save`` writes for every record (not forgery:
    ``weights_only=True`` is the defence against that)."""
    try:
        with zipfile.ZipFile(path) as zf:
            if not any(info.CRC for info in zf.infolist() if info.file_size):
                why = "has no checksums (saved after torch.serialization.set_crc32_options(False))"
                raise CheckpointError(f"the checkpoint {path} {why}. {_DELETE}")
            # torch's reader skips a record marked as a folder (a trailing "/" or the DOS
            # folder bit, 0x10) and hands back uninitialised memory as its data
            folders = [i.filename for i in zf.infolist() if i.is_dir() or i.external_attr & 0x10]
            bad = folders[0] if folders else zf.testzip()
    except zipfile.BadZipFile:
        return  # not a zip at all: torch.load says what it is
    except CheckpointError:
        raise
    except Exception as err:  # a damaged zip directory: bad names, versions, offsets...
        raise _unreadable(path, err) from err
    if bad is not None:
        what = f"the data of {bad} fails its checksum (CRC)"
        what = f"{bad} is marked as a folder" if folders else what
        raise CheckpointError(f"the checkpoint {path} is corrupt: {what}. {_DELETE}")


_PARTS = ("model", "optimizer", "scheduler", "optimizer_type", "scheduler_type", "epoch", "rng")


def _malformed(ckpt: dict[str, Any]) -> str | None:
    """What is wrong with the parts of a checkpoint that fit any objects; None: nothing."""
    if missing := [k for k in (*_PARTS, "extra") if k not in ckpt]:
        return f"it has no {', '.join(missing)}"
    if not isinstance(ckpt["model"], dict):
        return "its model state is not a dict"
    if type(ckpt["epoch"]) is not int:
        return f"its epoch is {ckpt['epoch']!r}, not a number of finished epochs"
    extra = ckpt["extra"]
    named = isinstance(extra, dict) and all(isinstance(k, str) for k in extra)
    if not named or "epoch" in extra:
        return "its extra values are not a dict of names (other than 'epoch')"
    for kind in ("optimizer", "scheduler"):
        name, state = ckpt[f"{kind}_type"], ckpt[kind]
        if not (name is state is None or isinstance(name, str) and isinstance(state, dict)):
            return f"its {kind} state and type do not go together"
    try:
        _set_rng_state(ckpt["rng"], trial=True)
    except Exception as err:
        return f"its random-number states are not valid ({type(err).__name__}: {err})"
    return None


def _misfit(ckpt: dict[str, Any], model: nn.Module, optimizer: Any, scheduler: Any) -> str | None:
    """How the checkpoint does not fit the objects given; None: it fits."""
    mine, saved = unwrap_model(model).state_dict(), ckpt["model"]

    def shape(v: Any) -> Any:
        return tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__

    missing, unexpected = sorted(mine.keys() - saved.keys()), sorted(saved.keys() - mine.keys())
    resized = [
        f"{k} {shape(saved[k])} vs {shape(v)}"
        for k, v in mine.items()
        if k in saved and shape(saved[k]) != shape(v)
    ]
    if missing or unexpected or resized:
        found = [("missing", missing), ("unexpected", unexpected), ("saved vs this model", resized)]
        what = "; ".join(f"{name}: {', '.join(map(str, v[:3]))}" for name, v in found if v)
        return f"does not fit this model (saved from another architecture?): {what}"
    for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is None:
            continue
        # Another class's state can load without error and break later (Adam's step would
        # lack 'betas'): refused by the class name saved with it.
        if (saved_type := ckpt[f"{kind}_type"]) != type(obj).__name__:
            saved_type = f"the {kind} {saved_type}" if saved_type else f"no {kind} state"
            return (
                f"was saved with {saved_type}, but {type(obj).__name__} was given: build the "
                f"same {kind} as the saved run, or pass {kind}=None"
            )
    if optimizer is not None:
        groups = [len(g["params"]) for g in optimizer.param_groups]
        saved_groups = [len(g["params"]) for g in ckpt["optimizer"]["param_groups"]]
        if groups != saved_groups or not isinstance(ckpt["optimizer"]["state"], dict):
            return (
                f"does not fit this optimizer: its parameter groups hold {saved_groups} "
                f"parameters, this optimizer's {groups}: build it as the saved run did"
            )
    return None


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
    A missing, corrupt, unsafe, malformed or unfitting file raises :class:`CheckpointError`,
    and then nothing has changed: everything is checked before anything is loaded.
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
        raise _unreadable(path, err) from err
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is a PyTorch file but not a checkpoint written by "
            f"save_checkpoint (expected format {FORMAT!r})"
        )
    if why := _malformed(ckpt):
        raise CheckpointError(f"the checkpoint {path} is malformed: {why}. {_DELETE}")
    try:
        why = _misfit(ckpt, model, optimizer, scheduler)
    except Exception as err:  # e.g. an optimizer state without param_groups
        why = f"is malformed ({type(err).__name__}: {err}). {_DELETE}"
    if why:
        raise CheckpointError(f"the checkpoint {path} {why}")
    try:  # checked above: this fails only in ways no check foresaw
        unwrap_model(model).load_state_dict(ckpt["model"])
        for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
            if obj is not None:
                obj.load_state_dict(ckpt[kind])
    except Exception as err:
        why = "does not fit this model/optimizer/scheduler (saved from another architecture?)"
        raise CheckpointError(f"the checkpoint {path} {why}: {' '.join(str(err).split())}") from err
    if restore_rng:
        _set_rng_state(ckpt["rng"])
    return {"epoch": ckpt["epoch"], **ckpt["extra"]}
