"""What several lessons' judges ask of an answer: a tensor of a given shape, a whole number.

Each helper raises :class:`Wrong` with a hint in both languages naming the answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import Wrong


def tensor(name: str, value: Any, shape: tuple[int, ...], numpy_ok: bool = False) -> torch.Tensor:
    """``value`` detached, as float, after checking it is a tensor of ``shape`` (or, with
    ``numpy_ok``, where the question asks for numbers and not a tensor, a NumPy array)."""
    if numpy_ok and isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        value = torch.from_numpy(np.array(value, dtype=np.float64))
    if not isinstance(value, torch.Tensor):
        raise Wrong(
            f"`{name}` should be a tensor; it is a {type(value).__name__}.",
            f"`{name}` 应该是一个张量，现在是 {type(value).__name__}。",
        )
    if tuple(value.shape) != shape:
        raise Wrong(
            f"`{name}` has shape {tuple(value.shape)}; it should have shape {shape}.",
            f"`{name}` 的形状是 {tuple(value.shape)}，应该是 {shape}。",
        )
    return value.detach().cpu().double()


def whole_number(name: str, value: Any) -> int:
    """``value`` as an ``int``: a Python or NumPy integer, a whole float, a one-element tensor."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        and not hasattr(value, "__index__")
    ):
        raise Wrong(
            f"`{name}` should be a number; it is a {type(value).__name__}.",
            f"`{name}` 应该是一个数，现在是 {type(value).__name__}。",
        )
    if isinstance(value, float) and not value.is_integer():
        raise Wrong(
            f"`{name}` is {value}: a count is a whole number.",
            f"`{name}` 是 {value}；个数应该是整数。",
        )
    return int(value)


def truth(name: str, value: Any) -> bool:
    """``value`` as a ``bool``: Python's, NumPy's, or a one-element boolean tensor or array."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype == torch.bool:
        value = bool(value.item())
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype == np.bool_:
        value = bool(value.item())
    if not isinstance(value, (bool, np.bool_)):
        raise Wrong(
            f"`{name}` should be True or False; it is {_a(value)}.",
            f"`{name}` 应该是 True 或 False，现在是 {type(value).__name__}。",
        )
    return bool(value)


def _a(value: Any) -> str:
    """What ``value`` is, with its article: "a list", "an int", "a NumPy array"."""
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"
