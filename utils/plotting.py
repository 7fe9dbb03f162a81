"""Plotting helpers: showing normalized images and training curves.

``imshow`` is taught in ``notebooks/04_cifar10.ipynb`` (the first notebook with images);
``plot_curves`` in the same notebook's training section. Both work headless: they only
use matplotlib's object API and never call ``plt.show()`` themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes


def denormalize(
    img: torch.Tensor, mean: Sequence[float] = (0.5,), std: Sequence[float] = (0.5,)
) -> torch.Tensor:
    """Undo ``transforms.Normalize(mean, std)`` on a ``C x H x W`` tensor, clipped to [0, 1]."""
    img = img.detach().cpu().float()
    m = torch.as_tensor(mean, dtype=img.dtype).view(-1, 1, 1)
    s = torch.as_tensor(std, dtype=img.dtype).view(-1, 1, 1)
    return (img * s + m).clamp(0.0, 1.0)


def imshow(
    img: torch.Tensor,
    mean: Sequence[float] = (0.5,),
    std: Sequence[float] = (0.5,),
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Show a normalized image tensor (``C x H x W``, e.g. a ``make_grid`` result).

    ``mean``/``std`` are those given to ``transforms.Normalize``; the defaults undo the
    blitz's ``Normalize((0.5,)*3, (0.5,)*3)``. Returns the Axes so callers can add to it.
    """
    if img.dim() != 3:
        raise ValueError(f"imshow expects a C x H x W tensor, got shape {tuple(img.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, img.shape[-1] / 32), 3.0))
    pixels = denormalize(img, mean, std).permute(1, 2, 0)  # matplotlib wants H x W x C
    if pixels.shape[-1] == 1:
        ax.imshow(pixels.squeeze(-1).numpy(), cmap="gray")
    else:
        ax.imshow(pixels.numpy())
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


def plot_curves(
    history: Mapping[str, Sequence[float]],
    xlabel: str = "step",
    ylabel: str = "value",
    title: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Plot one line per named series, e.g. ``{"train loss": [...], "test loss": [...]}``."""
    if not history:
        raise ValueError("plot_curves needs at least one named series")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.0, 3.5))
    for name, values in history.items():
        ax.plot(range(1, len(values) + 1), list(values), label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax
