"""What several lessons' judges ask of an answer: a tensor of a given shape, a whole number.

Each helper raises :class:`Wrong` with a hint in both languages naming the answer.
"""

from __future__ import annotations

from typing import Any

import torch

from . import Wrong


def tensor(name: str, value: Any, shape: tuple[int, ...]) -> torch.Tensor:
    """``value`` detached, as float, after checking it is a tensor of ``shape``."""
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
