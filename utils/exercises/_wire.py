"""Answers as data, for a judge that runs in another process than the answers (the class grader,
tools/teaching/judge.py): the kernel that ran a submission sends back only values, never code.

A value goes over the wire as ``torch.save`` bytes of a tree that ``torch.load(...,
weights_only=True)`` reads back without running anything: ``None``, ``bool``, ``int``,
``float``, ``str`` and plain tensors as themselves, every other node a dict tagged ``"kind"``:

- ``tuple``, ``list``, ``dict`` (its keys data too), ``ellipsis`` (the ``...`` placeholder);
- ``tensor``: a plain CPU copy, with whether it required grad (``nn.Parameter`` included;
  a subclass of ``torch.Tensor`` is no data: refused), ``ndarray``: NumPy's ``.npy`` bytes
  (written and read with ``allow_pickle=False``), ``generator``: its device, state and seed,
  ``device``, ``dtype``;
- ``function``: a handle the judge calls back with data (:func:`serve_call`), and whether its
  body is only ``...``; ``module`` (an ``nn.Module``): its class name, plain attributes,
  parameters, buffers and submodules, and a handle its forward runs through (the judge's copy
  is :class:`RemoteModule`; only a class of ``torch.nn`` is rebuilt as itself, by name);
- ``same``: a tensor already sent in the same tree (so that sharing memory shows);
- ``refused``: anything else, by its type's name: the judge does not see it (0 points).

The kernel's side (:func:`serve_export`, :func:`serve_call`) runs in the submission's own
process, so its code can be replaced there; what it sends is judged as an answer all the same,
and nothing it sends can run in the judge's process.
"""

from __future__ import annotations

import base64
import importlib
import io
import types
from typing import Any

import numpy as np
import torch

MAX_ITEMS = 200_000  # nodes of one tree (a list of CIFAR-10's 50 000 labels fits)
MAX_DEPTH = 32
MAX_ELEMENTS = 64 * 2**20  # numbers in all the tensors and arrays of one reply
HELPERS = "utils.exercises."  # the only modules a call may run a helper of (serve_call)


class NotData(ValueError):
    """A value (or a reply) that is not data the judge reads; the message says what it was."""


# ---- the kernel's side --------------------------------------------------------------------

_handles: dict[int, Any] = {}  # the kernel's callables, by the number sent in their place


def _article(value: Any) -> str:
    kind = type(value).__name__
    return f"{'an' if kind[:1] in 'aeiouAEIOU' else 'a'} {kind}"


def encode(value: Any, depth: int = 0, seen: dict | None = None) -> Any:
    """``value`` as a tree of data (module docstring). Within one tree, a tensor met again (the
    same view of the same memory) is sent as a reference to the first, so that sharing shows."""
    seen = {} if seen is None else seen
    if depth > MAX_DEPTH:
        return {"kind": "refused", "what": "a structure nested too deep"}
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if value is Ellipsis:
        return {"kind": "ellipsis"}
    if kind in (np.bool_,):
        return bool(value)
    if isinstance(value, np.integer) and kind.__module__ == "numpy":
        return int(value)
    if isinstance(value, np.floating) and kind.__module__ == "numpy":
        return float(value)
    if kind in (tuple, list):
        return {"kind": kind.__name__, "items": [encode(v, depth + 1, seen) for v in value]}
    if kind is dict:
        items = [[encode(k, depth + 1, seen), encode(v, depth + 1, seen)] for k, v in value.items()]
        return {"kind": "dict", "items": items}
    if kind in (torch.Tensor, torch.nn.Parameter):
        if value.layout != torch.strided or value.device.type == "meta":
            return {"kind": "refused", "what": f"a {value.layout} tensor on {value.device}"}
        view = (
            value.untyped_storage().data_ptr(),
            value.storage_offset(),
            tuple(value.shape),
            value.stride(),
            value.dtype,
        )
        if view in seen:
            return {"kind": "same", "index": seen[view]}
        seen[view] = len(seen)
        plain = value.detach().to("cpu", copy=True).contiguous()
        grad = value.grad if value.is_leaf else None
        return {
            "kind": "tensor",
            "data": plain,
            "grad": encode(grad, depth + 1, {}) if type(grad) is torch.Tensor else None,
            "requires_grad": bool(value.requires_grad),
            "parameter": kind is torch.nn.Parameter,
            "device": str(value.device),
        }
    if kind is np.ndarray:
        if value.dtype.hasobject:
            return {"kind": "refused", "what": "a NumPy array of Python objects"}
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return {"kind": "ndarray", "npy": buffer.getvalue()}
    if kind is torch.Generator:
        return {
            "kind": "generator",
            "device": str(value.device),
            "state": value.get_state(),
            "seed": int(value.initial_seed()),
            "default": value is torch.default_generator,
        }
    if kind is torch.device:
        return {"kind": "device", "name": str(value)}
    if kind is torch.dtype:
        return {"kind": "dtype", "name": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Tensor):
        return {"kind": "refused", "what": f"a subclass of torch.Tensor ({kind.__name__})"}
    if isinstance(value, torch.nn.Module):
        return _module(value, depth, seen)
    if callable(value) and not isinstance(value, type):
        handle = len(_handles) + 1
        _handles[handle] = value
        name = getattr(value, "__name__", "")
        placeholder = False
        if type(value) is types.FunctionType:
            from .tensors import _does_nothing  # a body of ``...`` alone: not done yet

            placeholder = _does_nothing(value)
        return {
            "kind": "function",
            "handle": handle,
            "name": name if type(name) is str else "",
            "does_nothing": placeholder,
        }
    return {"kind": "refused", "what": _article(value)}


def _module(module: torch.nn.Module, depth: int, seen: dict) -> dict:
    """A module as data: its class (by name: only a torch.nn class is ever rebuilt as itself),
    its plain attributes, parameters, buffers and submodules, and a handle to call it."""
    handle = len(_handles) + 1
    _handles[handle] = module
    kind = type(module)
    plain = (int, float, bool, str, tuple, type(None))
    return {
        "kind": "module",
        "handle": handle,
        "class": kind.__name__,
        "torch_nn": kind.__module__.startswith("torch.nn.")
        and kind is getattr(torch.nn, kind.__name__, None),
        "training": bool(module.training),
        "attributes": [
            [name, encode(value, depth + 1, seen)]
            for name, value in vars(module).items()
            if not name.startswith("_") and type(value) in plain
        ],
        "parameters": [
            [name, encode(p, depth + 1, seen)] for name, p in module._parameters.items()
        ],
        "buffers": [[name, encode(b, depth + 1, seen)] for name, b in module._buffers.items()],
        "children": [
            [name, encode(child, depth + 1, seen)] for name, child in module._modules.items()
        ],
    }


def to_bytes(tree: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(tree, buffer)
    return buffer.getvalue()


def _reply(tree: Any) -> str:
    """What the kernel hands back: the tree's bytes as base64 text (one ``str`` value)."""
    return base64.b64encode(to_bytes(tree)).decode("ascii")


def serve_export(getters: list, global_state: bool = False) -> str:
    """Each of ``getters`` (a function returning one answer) evaluated and encoded; an answer
    that raises (a name never defined) is refused with its error."""
    values, seen = [], {}  # one tree: a tensor in two answers is sent once
    for getter in getters:
        try:
            values.append(encode(getter(), 0, seen))
        except Exception as err:  # the answer's own error: what the judge is told instead
            values.append({"kind": "refused", "what": f"{type(err).__name__}: {err}"[:300]})
    tree: dict[str, Any] = {"kind": "export", "values": values}
    if global_state:
        tree["global_state"] = torch.get_rng_state()
    return _reply(tree)


def serve_call(handle: int, arguments: str, helper: str = "") -> str:
    """Call the kernel's callable ``handle`` on ``arguments`` (base64 of a tree the judge
    encoded), or ``helper(callable, *arguments)`` (a function of ``utils.exercises``); the
    result encoded, or the exception's type and message."""
    try:
        given = decode(base64.b64decode(arguments), None)
        if not (type(given) is list and len(given) == 2 and type(given[1]) is dict):
            raise NotData("arguments that are not [positional, keywords]")
        args, kwargs = given
        function = _handles[handle]
        if helper:
            module, _, name = helper.partition(":")
            if not module.startswith(HELPERS):
                raise NotData(f"{helper}: not a helper of {HELPERS}")
            args = [function, *args]
            function = getattr(importlib.import_module(module), name)
        result = {"kind": "returned", "value": encode(function(*args, **kwargs))}
    except Exception as err:
        result = {"kind": "raised", "type": type(err).__name__, "message": str(err)[:2000]}
    return _reply(result)


# ---- the judge's side ---------------------------------------------------------------------


class _Budget:
    def __init__(self) -> None:
        self.items = 0
        self.elements = 0
        self.tensors: list[torch.Tensor] = []  # in the order sent: what "same" refers to

    def item(self) -> None:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise NotData(f"more than {MAX_ITEMS} values in one answer")

    def numbers(self, n: int) -> None:
        self.elements += n
        if self.elements > MAX_ELEMENTS:
            raise NotData(f"more than {MAX_ELEMENTS} numbers in one answer")


def load(raw: bytes, max_bytes: int) -> Any:
    """The tree in ``raw`` (torch.save bytes), read with ``weights_only=True``."""
    if len(raw) > max_bytes:
        raise NotData(f"a reply of {len(raw)} bytes, more than {max_bytes}")
    try:
        return torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as err:  # whatever the bytes were, nothing in them ran
        raise NotData(f"a reply that is not data ({type(err).__name__})") from None


def decode(raw: bytes, function, max_bytes: int = 2**31) -> Any:
    """The value of the tree in ``raw``; ``function(handle, name)`` makes the stand-in of a
    callable (None: callables are refused). :class:`NotData` for anything unexpected."""
    return _value(load(raw, max_bytes), function, _Budget(), 0)


def decode_export(raw: bytes, function, max_bytes: int) -> tuple[list, torch.Tensor | None]:
    """(the answers, the kernel's global generator state or None) of :func:`serve_export`."""
    tree, budget = load(raw, max_bytes), _Budget()
    if type(tree) is not dict or tree.get("kind") != "export":
        raise NotData("a reply that is not the answers asked for")
    values = _field(tree, "values", list)
    state = tree.get("global_state")
    if state is not None and (type(state) is not torch.Tensor or state.dtype != torch.uint8):
        raise NotData("a generator state that is not one")
    return [_value(v, function, budget, 1) for v in values], state


def decode_call(raw: bytes, function, max_bytes: int) -> tuple[bool, Any]:
    """(True, the value returned) or (False, (exception type's name, message)) of
    :func:`serve_call`."""
    tree = load(raw, max_bytes)
    if type(tree) is not dict or tree.get("kind") not in ("returned", "raised"):
        raise NotData("a reply that is not a function's result")
    if tree["kind"] == "raised":
        return False, (_field(tree, "type", str)[:100], _field(tree, "message", str)[:2000])
    if "value" not in tree:
        raise NotData("a function's result without its value")
    return True, _value(tree["value"], function, _Budget(), 1)


class Refused:
    """What the judge sees in place of a value that is not data: it is not an answer."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<not an answer: {self.what}>"


def _value(node: Any, function, budget: _Budget, depth: int) -> Any:
    budget.item()
    if depth > MAX_DEPTH + 2:
        raise NotData("a structure nested too deep")
    kind = type(node)
    if node is None or kind in (bool, str):
        return node
    if kind is int:
        return node
    if kind is float:
        return node
    if kind is torch.Tensor:  # a tree's own tensors (a generator's state, the global state)
        budget.numbers(node.numel())
        return node
    if kind is not dict or type(node.get("kind")) is not str:
        raise NotData(f"an unexpected {kind.__name__} in a reply")
    tag = node["kind"]
    if tag in ("tuple", "list"):
        items = _field(node, "items", list)
        values = [_value(v, function, budget, depth + 1) for v in items]
        return tuple(values) if tag == "tuple" else values
    if tag == "dict":
        out = {}
        for pair in _field(node, "items", list):
            if type(pair) is not list or len(pair) != 2:
                raise NotData("a dict's item that is not a pair")
            key = _value(pair[0], function, budget, depth + 1)
            try:
                hash(key)
            except TypeError:
                raise NotData("a dict key that cannot be a key") from None
            out[key] = _value(pair[1], function, budget, depth + 1)
        return out
    if tag == "ellipsis":
        return Ellipsis
    if tag == "tensor":
        data = _field(node, "data", torch.Tensor)
        budget.numbers(data.numel())
        if data.layout != torch.strided or data.device.type != "cpu":
            raise NotData("a tensor that is not a plain CPU tensor")
        data = data.clone()
        grad = node.get("grad")
        mark = len(budget.tensors)  # a gradient takes no place among the tensors sent
        grad = None if grad is None else _value(grad, None, budget, depth + 1)
        del budget.tensors[mark:]
        if grad is not None and (type(grad) is not torch.Tensor or grad.shape != data.shape):
            raise NotData("a gradient that is no tensor of its tensor's shape")
        if _field(node, "parameter", bool):
            data = torch.nn.Parameter(data, requires_grad=_field(node, "requires_grad", bool))
        elif _field(node, "requires_grad", bool) and (
            data.is_floating_point() or data.is_complex()
        ):
            data.requires_grad_()
        if grad is not None and data.requires_grad:
            data.grad = grad.to(data.dtype)
        budget.tensors.append(data)
        return data
    if tag == "same":
        index = _field(node, "index", int)
        if not 0 <= index < len(budget.tensors):
            raise NotData("a reference to no tensor sent before")
        return budget.tensors[index]
    if tag == "module":
        return _mirror(node, function, budget, depth)
    if tag == "ndarray":
        raw = _field(node, "npy", bytes)
        try:
            array = np.load(io.BytesIO(raw), allow_pickle=False)
        except Exception as err:
            raise NotData(f"an array that is not NumPy's format ({type(err).__name__})") from None
        if type(array) is not np.ndarray:
            raise NotData("an .npy that holds no plain array")
        budget.numbers(array.size)
        return array
    if tag == "generator":
        device = torch.device(_field(node, "device", str))
        if _field(node, "default", bool):
            return torch.default_generator  # the judge says so: the global generator itself
        generator = torch.Generator(device="cpu")
        if device.type != "cpu":
            return Refused(f"a generator on {device}")
        try:
            generator.set_state(_field(node, "state", torch.Tensor))
        except (RuntimeError, TypeError):
            raise NotData("a generator's state that is not one") from None
        return generator
    if tag == "device":
        try:
            return torch.device(_field(node, "name", str))
        except RuntimeError:
            raise NotData("a device name that is not one") from None
    if tag == "dtype":
        dtype = getattr(torch, _field(node, "name", str), None)
        if type(dtype) is not torch.dtype:
            raise NotData("a dtype name that is not one")
        return dtype
    if tag == "function":
        if function is None:
            raise NotData("a function where only values are expected")
        made = function(_field(node, "handle", int), _field(node, "name", str)[:100])
        made.does_nothing = _field(node, "does_nothing", bool)
        return made
    if tag == "refused":
        return Refused(_field(node, "what", str)[:300])
    raise NotData(f"an unknown kind of value ({tag[:40]!r})")


class RemoteModule(torch.nn.Module):
    """The judge's copy of a submission's module: its structure, parameters and buffers here
    (read them, count them), its forward run in the kernel on data (``call``)."""

    _call = None  # the kernel's module, called with data (set by _mirror)

    def forward(self, *args, **kwargs):
        if self._call is None:
            raise RuntimeError("this module's forward runs where it was defined, not here")
        return self._call(*args, **kwargs)


def _mirror(node: dict, function, budget: _Budget, depth: int) -> torch.nn.Module:
    if function is None:
        raise NotData("a module where only values are expected")
    name = _field(node, "class", str)
    if not name.isidentifier() or len(name) > 80:
        name = "Module"
    base = getattr(torch.nn, name, None) if _field(node, "torch_nn", bool) else None
    if not (isinstance(base, type) and issubclass(base, torch.nn.Module)):
        base = torch.nn.Module
    kind = type(name, (RemoteModule, base), {"__module__": "submission"})
    module = kind.__new__(kind)
    torch.nn.Module.__init__(module)
    for key, value in _pairs(node, "attributes", function, budget, depth):
        if key.isidentifier() and not key.startswith("_") and not hasattr(kind, key):
            module.__dict__[key] = value
    for key, value in _pairs(node, "parameters", function, budget, depth):
        if not isinstance(value, torch.nn.Parameter) and value is not None:
            raise NotData("a parameter that is not one")
        module._parameters[key] = value
    for key, value in _pairs(node, "buffers", function, budget, depth):
        if value is not None and type(value) is not torch.Tensor:
            raise NotData("a buffer that is not a tensor")
        module._buffers[key] = value
    for key, value in _pairs(node, "children", function, budget, depth):
        if value is not None and not isinstance(value, RemoteModule):
            raise NotData("a submodule that is not one")
        module._modules[key] = value
    module.training = _field(node, "training", bool)
    module.__dict__["_call"] = function(_field(node, "handle", int), name)
    return module


def _pairs(node: dict, key: str, function, budget: _Budget, depth: int) -> list:
    pairs = []
    for pair in _field(node, key, list):
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
            raise NotData(f"a module's {key} that are not (name, value) pairs")
        pairs.append((pair[0][:200], _value(pair[1], function, budget, depth + 1)))
    return pairs


def _field(node: dict, key: str, kind: type) -> Any:
    value = node.get(key)
    if type(value) is not kind:
        raise NotData(f"a {node['kind']} without its {key}")
    return value
