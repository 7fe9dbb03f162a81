"""Checkpoint safety that no lesson teaches (notebook 04 teaches what a checkpoint holds): atomic
saves, a save-time refusal of what ``weights_only=True`` could not load, CRC checks, one-line
errors, loads that check every part before changing any, unwrapped models, a folder lock."""

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
from typing import IO, Any

import numpy as np
import torch
from torch import nn

FORMAT = "blitz-checkpoint-v2"
_TMP_PREFIX = ".blitz-save-"  # temporary files of a save, recognisable by name
_STALE_TMP_S = 600  # a temporary file this old belongs to a writer that died
_DELETE = "Delete it and resume from an earlier checkpoint or from scratch."


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt, unsafe, malformed or does not fit the objects."""


def _line(err: object) -> str:
    """``err`` whole, on one line: a message is never cut, nor spread over several lines."""
    return " ".join(str(err).split())


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
    # torch._dynamo takes seconds to import, and no compiled model exists before it is imported
    dynamo = sys.modules.get("torch._dynamo")
    compiled = (dynamo.OptimizedModule,) if dynamo else ()
    while isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel, *compiled)):
        model = model._orig_mod if isinstance(model, compiled) else model.module
    return model


def _refusal_reason(err: BaseException) -> str:
    """torch's reason for a weights_only refusal, without its advice to turn weights_only off."""
    # torch raises UnpicklingError(advice + reason) from None and keeps the unpickler's own
    # error, the reason alone, as __context__; without it, the advice is cut out.
    raw = err.__context__ if isinstance(err.__context__, pickle.UnpicklingError) else err
    sentences = re.split(r"(?<=[.!?])\s+", _line(raw))
    return " ".join(s for s in sentences if not ("weights_only" in s and "False" in s))


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: Any = None,
    scheduler: Any = None,
    epoch: int = 0,
    **extra: Any,
) -> Path:
    """Save model, optimizer, scheduler, finished ``epoch``, RNG states and ``extra`` values.

    Atomically (readers see the old file or the new one, even with several writers; through a
    symbolic link, its target is replaced). What ``weights_only=True`` could not load back is
    refused now, by name, rather than costing the run its checkpoint at load time.
    """
    objs = {"optimizer": optimizer, "scheduler": scheduler}
    states = {"model": unwrap_model(model).state_dict()}
    states.update((k, None if o is None else o.state_dict()) for k, o in objs.items())
    types = {f"{k}_type": None if o is None else type(o).__name__ for k, o in objs.items()}
    parts = {f"the {k} state": v for k, v in states.items()}
    parts.update((f"extra value {k!r}", v) for k, v in extra.items())
    problems = {}
    for name, value in parts.items():
        try:  # a real round trip, onto "meta": no second copy
            torch.save(value, buffer := io.BytesIO())
            torch.load(io.BytesIO(buffer.getvalue()), weights_only=True, map_location="meta")
        except Exception as err:  # a refused type, or not picklable at all (a lambda)
            problems[name] = _refusal_reason(err).split(". ")[0].rstrip(".")  # what, not how
    if problems:
        raise CheckpointError(
            f"not saving {path}: {' and '.join(problems)} could not be loaded back with "
            f"torch.load(weights_only=True) ({next(iter(problems.values()))}). Store only "
            "tensors, Python numbers and strings, and lists, tuples or dicts of them: e.g. "
            "float(acc) instead of a NumPy number, torch.from_numpy(a) instead of an array."
        )
    obj = {"format": FORMAT, **states, **types, "epoch": int(epoch), "rng": _rng_state()}
    obj["extra"] = extra
    real = Path(os.path.realpath(path))
    real.parent.mkdir(parents=True, exist_ok=True)
    for tmp in real.parent.glob(_TMP_PREFIX + "*"):  # left by writers killed mid-save
        with contextlib.suppress(OSError):  # another writer renamed or removed it meanwhile
            if time.time() - tmp.stat().st_mtime > _STALE_TMP_S:  # a live writer's is younger
                tmp.unlink()
    tmp = real.with_name(f"{_TMP_PREFIX}{real.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    # O_EXCL: never another writer's file; 0o666 less the umask, as for any file one writes
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    crc = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(True)  # load_checkpoint relies on them
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())  # else a power cut can leave an empty file after the rename
        os.replace(tmp, real)  # atomic on POSIX and Windows
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        torch.serialization.set_crc32_options(crc)
    return Path(path)


def lock_folder(folder: str | Path) -> IO[str] | None:
    """Hold ``folder/.lock`` (keep the file returned open), so that a second run writing into
    ``folder`` is refused; ``flock``: a crashed run leaves no stale lock. None on Windows.
    A folder that cannot be written (a file, inside a file, read-only) is one line too."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # A read-only folder that holds a .lock opens it all the same: write a file of one's
        # own now, rather than learn it at the first save, after an epoch of training.
        probe = folder / f"{_TMP_PREFIX}probe.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
        handle = open(folder / ".lock", "a")  # noqa: SIM115 -- stays open: it holds the lock
    except OSError as err:
        file = next((p for p in (folder, *folder.parents) if p.is_file()), None)
        why = f"{'it' if file == folder else file} is a file" if file else err.strerror
        raise SystemExit(f"cannot write to {folder} ({why}): pass another --out-dir") from None
    try:
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:  # Windows: no lock
        handle.close()
        return None
    except BlockingIOError:
        handle.close()
        msg = f"another run is writing to {folder}: wait for it to end, or pass another --out-dir"
        raise SystemExit(msg) from None
    return handle


def _read(path: Path, map_location: Any) -> Any:
    """``torch.load(weights_only=True)`` of a file whose every record passed its CRC-32 (flipped
    bytes; ``weights_only`` is the defence against forgery), or one clear CheckpointError."""
    try:
        with zipfile.ZipFile(path) as zf:
            # torch.save stores every record as it is (its writer takes no compression flag);
            # a compressed one can inflate to gigabytes from a small file: refused unread
            if packed := [i for i in zf.infolist() if i.compress_type != zipfile.ZIP_STORED]:
                big = max(packed, key=lambda info: info.file_size)
                raise CheckpointError(
                    f"the checkpoint {path} holds a compressed record ({big.filename}, "
                    f"{big.file_size:,} bytes once inflated), which torch.save never writes: "
                    f"another tool rewrote it. {_DELETE}"
                )
            if not any(info.CRC for info in zf.infolist() if info.file_size):
                why = "has no checksums (saved after torch.serialization.set_crc32_options(False))"
                raise CheckpointError(f"the checkpoint {path} {why}. {_DELETE}")
            # torch's reader hands back uninitialised memory for a record marked as a folder
            # (a trailing "/" or the DOS folder bit, 0x10)
            if bad := [i.filename for i in zf.infolist() if i.is_dir() or i.external_attr & 0x10]:
                what = f"{bad[0]} is marked as a folder"
            elif bad := zf.testzip():
                what = f"the data of {bad} fails its checksum (CRC)"
        if bad:
            raise CheckpointError(f"the checkpoint {path} is corrupt: {what}. {_DELETE}")
        return torch.load(path, map_location=map_location, weights_only=True)
    except zipfile.BadZipFile as err:
        with open(path, "rb") as f:
            head = f.read(4)
        # torch.save writes zip archives: anything else (a text file, a legacy pickle) is no
        # checkpoint, and must not reach the unpickler, whose refusal would talk of code
        if head and not head.startswith(b"PK"):
            raise CheckpointError(
                f"{path} is not a checkpoint file (a checkpoint is a zip archive written by "
                "torch.save): pass the path of a checkpoint.pt that save_checkpoint wrote"
            ) from None
        cause = err  # empty or cut short
    except CheckpointError:
        raise
    except Exception as err:  # a damaged zip directory (names, versions, offsets), data or code
        if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err):
            raise CheckpointError(  # torch's full reason, never its advice to load anyway
                f"refused to load {path}: it holds more than tensors and plain data, which could "
                f"run code on this machine. {_refusal_reason(err)} Do not load files you do not "
                "trust; a checkpoint written by save_checkpoint never contains such objects."
            ) from None
        cause = err
    why = f"it is corrupt or truncated, or not a PyTorch file ({type(cause).__name__}: "
    fix = "Make it readable." if isinstance(cause, PermissionError) else _DELETE
    raise CheckpointError(f"cannot read the checkpoint {path}: {why}{_line(cause)}). {fix}")


def read_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """What a checkpoint of :func:`save_checkpoint` holds, read as :func:`load_checkpoint` reads
    it (the file checked before ``torch.load(weights_only=True)``), loaded into nothing: for a
    look at its ``extra`` values. Raises :class:`CheckpointError` for a missing, corrupt or
    unsafe file, or another PyTorch file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}: start training from scratch instead")
    ckpt = _read(path, map_location)
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is a PyTorch file but not a checkpoint written by "
            f"save_checkpoint (expected format {FORMAT!r})"
        )
    return ckpt


class _Refused(Exception):
    """Why a checkpoint does not load into the objects given: the end of a CheckpointError."""


def _need(ok: Any, what: str) -> None:
    if not ok:
        raise _Refused(f"is malformed: {what}")


def _kind(value: Any) -> str:
    """What sort of value ``value`` is, in words, for comparing a saved state with a live one."""
    kinds = [((bool, int, float), "a number"), (torch.Tensor, "a tensor"), (str, "a string")]
    kinds += [(dict, "a dict"), ((list, tuple), "a list")]
    return next((name for types, name in kinds if isinstance(value, types)), type(value).__name__)


def _same_kinds(saved: Any, mine: Any, where: str) -> None:
    """Refuse ``saved`` where it holds another kind of value than the live state ``mine``
    (recursively). None on either side is an unset option and goes with anything."""
    if saved is None or mine is None:
        return
    _need(_kind(saved) == _kind(mine), f"its {where} is {_kind(saved)} where {_kind(mine)} belongs")
    if isinstance(mine, dict):
        for k in mine.keys() & saved.keys():
            _same_kinds(saved[k], mine[k], f"{where}[{k!r}]")
    elif isinstance(mine, (list, tuple)) and len(mine) == len(saved):
        for i, (s, m) in enumerate(zip(saved, mine, strict=True)):
            _same_kinds(s, m, f"{where}[{i}]")


def _form(t: torch.Tensor) -> str:
    """How a tensor is stored, as far as copying it into a parameter cares."""
    if t.is_meta:
        return "a meta tensor (no data)"
    traits = [] if t.layout == torch.strided else [str(t.layout).removeprefix("torch.")]
    traits += [p for p, on in (("quantized", t.is_quantized), ("nested", t.is_nested)) if on]
    return f"a {' '.join([*traits, 'complex' if t.is_complex() else 'real'])} tensor"


def _first(names: list) -> str:
    return ", ".join(map(str, names[:3])) + (f" and {len(names) - 3} more" if names[3:] else "")


def _check(ckpt: dict[str, Any], model: nn.Module, optimizer: Any, scheduler: Any) -> None:
    """Raise _Refused, or any error, where the checkpoint is malformed or does not fit the objects
    given: what ``load_state_dict`` would take and then break on, or fail on halfway."""
    parts = ("model", "optimizer", "scheduler", "optimizer_type", "scheduler_type", "epoch")
    missing = [k for k in (*parts, "rng", "extra") if k not in ckpt]
    _need(not missing, f"it has no {', '.join(missing)}")
    saved, extra, epoch = ckpt["model"], ckpt["extra"], ckpt["epoch"]
    _need(isinstance(saved, dict), "its model state is not a dict")
    ok = type(epoch) is int and epoch >= 0
    _need(ok, f"its epoch is {epoch!r}, not a number of finished epochs (0 or more)")
    names = isinstance(extra, dict) and all(isinstance(k, str) for k in extra)
    _need(names and "epoch" not in extra, "its extra values are not a dict of names (not 'epoch')")
    for kind in ("optimizer", "scheduler"):
        name, state = ckpt[f"{kind}_type"], ckpt[kind]
        paired = name is state is None or isinstance(name, str) and isinstance(state, dict)
        _need(paired, f"its {kind} state and type do not go together")
    try:
        _set_rng_state(ckpt["rng"], trial=True)
    except Exception as err:
        _need(False, f"its random-number states are not valid ({type(err).__name__}: {err})")

    def shape(v: Any) -> Any:
        return tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__

    mine, found = model.state_dict(), {}
    found["missing"] = sorted(mine.keys() - saved.keys())
    found["unexpected"] = sorted(saved.keys() - mine.keys())
    sizes = {k: (shape(saved[k]), shape(v)) for k, v in mine.items() if k in saved}
    found["saved vs this model"] = [f"{k} {a} vs {b}" for k, (a, b) in sizes.items() if a != b]
    if what := "; ".join(f"{name}: {_first(v)}" for name, v in found.items() if v):
        raise _Refused(f"does not fit this model (saved from another architecture?): {what}")
    for k, v in mine.items():  # load_state_dict would copy the others, then fail on this one
        forms = (_form(saved[k]), _form(v)) if isinstance(v, torch.Tensor) else (0, 0)
        _need(forms[0] == forms[1], f"its model value {k} is {forms[0]}, this model's {forms[1]}")
    for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        # another class's state can load, and break later (Adam's step would lack 'betas')
        if obj is not None and (saved_type := ckpt[f"{kind}_type"]) != type(obj).__name__:
            saved_type = f"the {kind} {saved_type}" if saved_type else f"no {kind} state"
            raise _Refused(
                f"was saved with {saved_type}, but {type(obj).__name__} was given: build the "
                f"same {kind} as the saved run, or pass {kind}=None"
            )
    if optimizer is not None:
        groups, params = ckpt["optimizer"]["param_groups"], {}
        mine, theirs = ([len(g["params"]) for g in gs] for gs in (optimizer.param_groups, groups))
        if theirs != mine:
            raise _Refused(
                f"does not fit this optimizer: its parameter groups hold {theirs} parameters, "
                f"this optimizer's {mine}: build it as the saved run did"
            )
        for i, (group, live) in enumerate(zip(groups, optimizer.param_groups, strict=True)):
            settings = {k: v for k, v in live.items() if k != "params"}
            _same_kinds(group, settings, f"optimizer setting (group {i})")
            params.update(zip(group["params"], live["params"], strict=True))
        for key, state in ckpt["optimizer"]["state"].items():
            where, p = f"optimizer state of parameter {key!r}", params[key]
            _need(isinstance(state, dict), f"its {where} is {_kind(state)} where a dict belongs")
            for name, v in state.items():
                ok = v is None or _kind(v) in ("a tensor", "a number", "a list")
                _need(ok, f"its {where} holds {_kind(v)} under {name!r}")
                # a running average has the parameter's shape, a step count none; LBFGS keeps
                # one flat state for all parameters
                if isinstance(v, torch.Tensor) and not isinstance(optimizer, torch.optim.LBFGS):
                    dims = zip(reversed(v.shape), reversed(p.shape), strict=False)
                    ok = v.dim() <= p.dim() and all(a in (1, b) for a, b in dims)
                    what = f"{_form(v)} of shape {tuple(v.shape)}, the parameter {tuple(p.shape)}"
                    _need(ok and _form(v) == _form(p), f"its {where}[{name!r}] is {what}")
    if scheduler is not None:
        live = scheduler.state_dict()
        # load_state_dict sets every saved name as an attribute: never one that is no state
        foreign = sorted(k for k in ckpt["scheduler"] if k not in live and k in vars(scheduler))
        _need(not foreign, f"its scheduler state would replace {_first(foreign)}")
        _same_kinds(ckpt["scheduler"], live, "scheduler state")


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
    and then nothing has changed.
    """
    path = Path(path)
    ckpt = read_checkpoint(path, map_location)
    raw = unwrap_model(model)
    try:
        _check(ckpt, raw, optimizer, scheduler)
    except Exception as err:  # _Refused, or a structure no check foresaw
        why = f"is malformed ({type(err).__name__}: {_line(err)})"
        why = str(err) if isinstance(err, _Refused) else why
        fix = f" {_DELETE}" if why.startswith("is malformed") else ""
        raise CheckpointError(f"the checkpoint {path} {why.rstrip('.')}.{fix}") from None
    # Loads can still fail midway (a scheduler's may set some attributes, then raise): what
    # each object held is put back, the model's weights in place, not through its load.
    objs = {"optimizer": optimizer, "scheduler": scheduler}
    before = {k: o.state_dict() for k, o in objs.items() if o is not None}
    weights = {
        k: v if v.is_meta else v.detach().to("cpu", copy=True) for k, v in raw.state_dict().items()
    }
    kind, obj = "model", raw
    try:
        raw.load_state_dict(ckpt["model"])
        for kind in before:
            obj = objs[kind]
            obj.load_state_dict(dict(ckpt[kind]))  # a copy: LambdaLR's pops from it
    except Exception as err:
        with torch.no_grad():
            for k, v in raw.state_dict().items():
                if not v.is_meta:
                    v.copy_(weights[k])
        for k, state in before.items():
            objs[k].load_state_dict(dict(state))
        why, name = f"{type(err).__name__}: {_line(err)}", type(obj).__name__
        if kind == "model":  # past every check: the model's own code refused
            why = f"does not fit this {name} (saved from another architecture?): {why}"
            raise CheckpointError(f"the checkpoint {path} {why}") from err
        why = f"is malformed: its {kind} state does not load into this {name} ({why})"
        raise CheckpointError(f"the checkpoint {path} {why}. {_DELETE}") from err
    if restore_rng:
        _set_rng_state(ckpt["rng"])
    return {"epoch": ckpt["epoch"], **ckpt["extra"]}
