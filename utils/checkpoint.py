"""Checkpoint safety that no lesson teaches: what a long run needs around ``torch.save``.

Notebook 04 teaches what a checkpoint holds. Here: atomic saves, a save-time refusal of what
``weights_only=True`` could not load, CRC checks, clear errors, unwrapped models, a lock.
"""

from __future__ import annotations

import contextlib
import copy
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
    # A read-only folder that already holds a .lock opens it all the same: write a file of
    # one's own there now, rather than learn it at the first save, after an epoch of training.
    probe = folder / f"{_TMP_PREFIX}probe.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as err:
        handle.close()
        why = err.strerror or type(err).__name__
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


def _one_line(text: object) -> str:
    """``text`` whole, on one line: a message is never cut, nor spread over several lines."""
    return " ".join(str(text).split())


def _unreadable(path: Path, err: BaseException) -> CheckpointError:
    detail = _one_line(err)
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
        with open(path, "rb") as f:
            head = f.read(4)
        # torch.save has written zip archives since torch 1.6, and save_checkpoint always
        # does: anything else that does not even start like one (a text file, a legacy or
        # foreign pickle) is no checkpoint, and its bytes must not reach the unpickler,
        # whose refusal would talk of code; an empty file or a cut zip is a truncated one.
        if head and not head.startswith(b"PK"):
            raise CheckpointError(
                f"{path} is not a checkpoint file (a checkpoint is a zip archive written by "
                "torch.save): pass the path of a checkpoint.pt that save_checkpoint wrote"
            ) from None
        return  # truncated: torch.load says so
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


def _kind(value: Any) -> str:
    """What sort of value ``value`` is, in words, for comparing a saved state with a live one."""
    for types, name in (
        ((bool, int, float), "a number"),
        (torch.Tensor, "a tensor"),
        (str, "a string"),
        (dict, "a dict"),
        ((list, tuple), "a list"),
    ):
        if isinstance(value, types):
            return name
    return type(value).__name__


def _wrong_type(saved: Any, mine: Any, where: str) -> str | None:
    """Where ``saved`` holds another kind of value than the live state ``mine`` (recursively);
    None: the same kinds. None on either side is an unset option and goes with anything."""
    if saved is None or mine is None:
        return None
    if _kind(saved) != _kind(mine):
        return f"{where} is {_kind(saved)} where {_kind(mine)} belongs"
    if isinstance(mine, dict):
        pairs = [(saved[k], mine[k], f"{where}[{k!r}]") for k in mine.keys() & saved.keys()]
    elif isinstance(mine, (list, tuple)) and len(mine) == len(saved):
        pairs = [(s, m, f"{where}[{i}]") for i, (s, m) in enumerate(zip(saved, mine, strict=True))]
    else:
        pairs = []
    return next((why for s, m, w in pairs if (why := _wrong_type(s, m, w))), None)


def _form(t: torch.Tensor) -> str:
    """How a tensor is stored, as far as copying it into a parameter cares."""
    if t.is_meta:
        return "a meta tensor (no data)"
    if t.layout != torch.strided:
        return f"a {str(t.layout).removeprefix('torch.')} tensor"
    parts = [p for p, on in (("quantized", t.is_quantized), ("nested", t.is_nested)) if on]
    return f"a {' '.join([*parts, 'complex' if t.is_complex() else 'real'])} tensor"


def _optimizer_problem(saved: Any, optimizer: Any) -> str | None:
    """How an optimizer state does not fit ``optimizer`` or is malformed; None: it fits."""
    groups = saved.get("param_groups")
    if not (
        isinstance(saved.get("state"), dict)
        and isinstance(groups, list)
        and all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups)
    ):
        return "is malformed: its optimizer state is not a dict of 'state' and 'param_groups'"
    mine = [len(g["params"]) for g in optimizer.param_groups]
    if (theirs := [len(g["params"]) for g in groups]) != mine:
        return (
            f"does not fit this optimizer: its parameter groups hold {theirs} "
            f"parameters, this optimizer's {mine}: build it as the saved run did"
        )
    params: dict[Any, torch.Tensor] = {}
    for i, (group, live) in enumerate(zip(groups, optimizer.param_groups, strict=True)):
        settings = {k: v for k, v in live.items() if k != "params"}
        if why := _wrong_type(group, settings, f"optimizer setting (group {i})"):
            return f"is malformed: its {why}"
        params.update(zip(group["params"], live["params"], strict=True))
    # LBFGS keeps one flat state for all parameters under the first: no shapes to compare
    flat = isinstance(optimizer, torch.optim.LBFGS)
    for key, state in saved["state"].items():
        if key not in params:
            return f"is malformed: its optimizer state names parameter {key!r}, which no group has"
        where = f"optimizer state of parameter {key!r}"
        if not isinstance(state, dict):
            return f"is malformed: its {where} is {_kind(state)} where a dict belongs"
        mine_state = optimizer.state.get(params[key], {})
        for name, value in state.items():
            if _kind(value) not in ("a tensor", "a number", "a list") and value is not None:
                return f"is malformed: its {where} holds {_kind(value)} under {name!r}"
            if why := _wrong_type(value, mine_state.get(name), f"{where}[{name!r}]"):
                return f"is malformed: its {why}"
            if isinstance(value, torch.Tensor) and not flat:
                shape = tuple(params[key].shape)
                try:  # a running average has the parameter's shape, a step count none
                    fits = torch.broadcast_shapes(value.shape, shape) == shape
                except RuntimeError:
                    fits = False
                if not fits or _form(value) != _form(params[key]):
                    what = f"{_form(value)} of shape {tuple(value.shape)}"
                    return f"is malformed: its {where}[{name!r}] is {what}, the parameter {shape}"
    return None


def _misfit(ckpt: dict[str, Any], model: nn.Module, optimizer: Any, scheduler: Any) -> str | None:
    """How the checkpoint does not fit the objects given, or holds a value of the wrong type
    for them; None: it fits."""
    mine, saved = unwrap_model(model).state_dict(), ckpt["model"]

    def shape(v: Any) -> Any:
        return tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__

    def first(names: list) -> str:
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return ", ".join(map(str, names[:3])) + more

    missing, unexpected = sorted(mine.keys() - saved.keys()), sorted(saved.keys() - mine.keys())
    resized = [
        f"{k} {shape(saved[k])} vs {shape(v)}"
        for k, v in mine.items()
        if k in saved and shape(saved[k]) != shape(v)
    ]
    if missing or unexpected or resized:
        found = [("missing", missing), ("unexpected", unexpected), ("saved vs this model", resized)]
        what = "; ".join(f"{name}: {first(v)}" for name, v in found if v)
        return f"does not fit this model (saved from another architecture?): {what}"
    for k, v in mine.items():  # load_state_dict would copy the others, then fail on this one
        if isinstance(v, torch.Tensor) and _form(saved[k]) != _form(v):
            return (
                f"is malformed: its model value {k} is {_form(saved[k])}, this model's {_form(v)}"
            )
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
    if optimizer is not None and (why := _optimizer_problem(ckpt["optimizer"], optimizer)):
        return why
    if scheduler is not None:
        live = scheduler.state_dict()
        # load_state_dict sets every saved name as an attribute: never one that is no state
        if foreign := sorted(
            k for k in ckpt["scheduler"] if k not in live and k in vars(scheduler)
        ):
            return f"is malformed: its scheduler state would replace {first(foreign)}"
        if why := _wrong_type(ckpt["scheduler"], live, "scheduler state"):
            return f"is malformed: its {why}"
    return None


def _trial_copies(optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """Copies of the optimizer and scheduler to try a load on first: they share the model's
    parameters and the optimizer, which their ``load_state_dict`` only reads."""
    driven = optimizer if optimizer is not None else getattr(scheduler, "optimizer", None)
    groups = getattr(driven, "param_groups", [])
    shared = {id(p): p for g in groups for p in g["params"]}  # never copy the weights
    copies = {}
    if optimizer is not None:
        with contextlib.suppress(Exception):  # not copyable (a lock inside): loaded untried
            copies["optimizer"] = copy.deepcopy(optimizer, dict(shared))
    if scheduler is not None:
        with contextlib.suppress(Exception):  # the copy drives the real optimizer
            copies["scheduler"] = copy.deepcopy(scheduler, {**shared, id(driven): driven})
    return copies


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
    except Exception as err:  # a structure no check foresaw
        why = f"is malformed ({type(err).__name__}: {_one_line(err)})"
    if why:
        fix = f" {_DELETE}" if why.startswith("is malformed") else ""
        raise CheckpointError(f"the checkpoint {path} {why.rstrip('.')}.{fix}")
    # Every part is tried before any is applied: a scheduler's load_state_dict may set some
    # attributes and then raise (ReduceLROnPlateau with an unknown mode), a model's may copy
    # some weights and then raise; the caller's objects never end up half-loaded.
    for kind, trial in _trial_copies(optimizer, scheduler).items():
        try:
            trial.load_state_dict(dict(ckpt[kind]))  # a copy: LambdaLR's pops from it
        except Exception as err:
            why = f"{type(err).__name__}: {_one_line(err)}"
            raise CheckpointError(
                f"the checkpoint {path} is malformed: its {kind} state does not load into "
                f"this {type(trial).__name__} ({why}). {_DELETE}"
            ) from err
    why = "does not fit this model/optimizer/scheduler (saved from another architecture?)"
    raw = unwrap_model(model)
    # a copy on the CPU (a meta tensor has no data to keep): what a failed load puts back
    before = {
        k: v if v.is_meta else v.detach().to("cpu", copy=True) for k, v in raw.state_dict().items()
    }
    try:  # checked and tried above: this fails only in ways no check foresaw
        raw.load_state_dict(ckpt["model"])
        for kind, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
            if obj is not None:
                obj.load_state_dict(dict(ckpt[kind]))
    except Exception as err:
        with torch.no_grad():  # in place, not through the load that just failed
            for k, v in raw.state_dict().items():
                if not v.is_meta:
                    v.copy_(before[k])
        raise CheckpointError(f"the checkpoint {path} {why}: {_one_line(err)}") from err
    if restore_rng:
        _set_rng_state(ckpt["rng"])
    return {"epoch": ckpt["epoch"], **ckpt["extra"]}
