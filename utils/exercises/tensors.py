"""Checks for the exercises of notebook 01 (tensors); see utils/exercises/__init__.py."""

from __future__ import annotations

import torch

from . import Wrong, exercise


@exercise(1)
def q1(centred_cols, centred_rows) -> None:
    X = torch.arange(12.0).reshape(4, 3)
    for name, answer, dim, other in (
        ("centred_cols", centred_cols, 0, "columns"),
        ("centred_rows", centred_rows, 1, "rows"),
    ):
        if not isinstance(answer, torch.Tensor):
            raise Wrong(
                f"`{name}` should be a tensor; it is a {type(answer).__name__}.",
                f"`{name}` 应该是一个张量，现在是 {type(answer).__name__}。",
            )
        if answer.shape != X.shape:
            raise Wrong(
                f"`{name}` has shape {tuple(answer.shape)}; subtracting means keeps X's shape "
                "(4, 3). Look at the shape of the means and how it lines up with X from the right.",
                f"`{name}` 的形状是 {tuple(answer.shape)}；减去均值后形状应与 X 相同，即 (4, 3)。"
                "看看均值的形状，以及它从右边起如何与 X 对齐。",
            )
        sums = answer.sum(dim=dim)
        if not torch.allclose(sums, torch.zeros_like(sums)):
            zh_other = "每一列" if dim == 0 else "每一行"
            raise Wrong(
                f"each of the {other} of `{name}` should sum to 0; they sum to {sums.tolist()}. "
                f"Which dimension does your `mean` reduce?",
                f"`{name}` 的{zh_other}之和应为 0，现在是 {sums.tolist()}。"
                "你的 `mean` 归约的是哪一维？",
            )
        if not torch.allclose(answer - X, (answer - X)[:1] if dim == 0 else (answer - X)[:, :1]):
            raise Wrong(
                f"`{name}` should be X minus one number per {other[:-1]}; "
                "subtract the mean, do not rescale.",
                f"`{name}` 应该是 X 减去每{'列' if dim == 0 else '行'}一个数；只减均值，不要缩放。",
            )
