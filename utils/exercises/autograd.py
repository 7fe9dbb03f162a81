"""Checks for the exercises of notebook 02 (autograd); see utils/exercises/__init__.py."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from . import NotDone, Wrong, exercise
from ._answers import tensor, whole_number


def _times(got: torch.Tensor, want: torch.Tensor) -> int | None:
    """The whole number k >= 2 with got == k * want (backward run k times), else None."""
    scale = want.abs().max()
    if scale == 0:
        return None
    k = round(float((got * want).sum() / (want * want).sum()))
    return k if k >= 2 and torch.allclose(got, k * want, atol=1e-5) else None


def _gradient(name: str, leaf: torch.Tensor, expected: torch.Tensor, what: str) -> torch.Tensor:
    """The leaf's ``.grad`` (detached, float64), after checking it was filled once."""
    if not leaf.requires_grad:
        raise Wrong(
            f"`{name}` does not require grad, so autograd recorded nothing: "
            "create it with requires_grad=True.",
            f"`{name}` 不需要梯度，自动求导什么也没记录。创建它时要传入 requires_grad=True。",
        )
    if not leaf.is_leaf:
        raise Wrong(
            f"`{name}` is the result of an operation, not a leaf tensor, so its .grad stays "
            "empty: pass requires_grad=True where the tensor is created.",
            f"`{name}` 是某个运算的结果，不是叶子张量，它的 .grad 不会被填上。"
            "应该在创建张量时就传入 requires_grad=True。",
        )
    if leaf.grad is None:
        raise Wrong(
            f"`{name}.grad` is empty: call backward() on the result after computing it.",
            f"`{name}.grad` 是空的。算出结果后，要对它调用 backward()。",
        )
    grad = leaf.grad.detach().cpu().double()
    k = _times(grad, expected)
    if k is not None:
        raise Wrong(
            f"`{name}.grad` is {k} times {what}: backward() adds into .grad, so each run of "
            f"the cell adds the gradient again. Create {name} afresh before one backward().",
            f"`{name}.grad` 是 {what} 的 {k} 倍。backward() 会把梯度累加进 .grad，"
            f"单元格每运行一次就多加一次。先重新创建 {name}，再调用一次 backward()。",
        )
    return grad


@exercise(1)
def q1(x, by_hand) -> None:
    points = torch.linspace(-2, 2, 5, dtype=torch.float64)
    values = tensor("x", x, (5,))
    if not torch.allclose(values, points, atol=1e-6):
        raise Wrong(
            f"`x` holds {values.tolist()}; the question asks for torch.linspace(-2, 2, 5).",
            f"`x` 的值是 {values.tolist()}；题目要的是 torch.linspace(-2, 2, 5)。",
        )
    expected = torch.sin(points) + points * torch.cos(points)
    grad = _gradient("x", x, expected, "g'(x)")
    if not torch.allclose(grad, expected, atol=1e-5):
        raise Wrong(
            "`x.grad` is not g'(x): look at what you called backward() on. It should be "
            "g(x) = x * torch.sin(x), summed to one number.",
            "`x.grad` 不是 g'(x)。看看你对什么调用了 backward()：应该是 "
            "g(x) = x * torch.sin(x) 求和得到的那个数。",
        )
    hand = tensor("by_hand", by_hand, (5,), numpy_ok=True)
    if not torch.allclose(hand, expected, atol=1e-5):
        if torch.allclose(hand, points * torch.cos(points), atol=1e-5) or torch.allclose(
            hand, torch.cos(points), atol=1e-5
        ):
            raise Wrong(
                "`by_hand` misses a term: x * sin x is a product, and the product rule "
                "gives one term for each factor.",
                "`by_hand` 少了一项。x * sin x 是乘积，乘积法则对每个因子各给出一项。",
            )
        raise Wrong(
            "`by_hand` is not sin x + x cos x at the points of x: compare it with x.grad "
            "point by point.",
            "`by_hand` 不等于 x 各点上的 sin x + x cos x。把它与 x.grad 逐点比较一下。",
        )


@exercise(2)
def q2(A, x, v, predicted, J) -> None:
    matrix = tensor("A", A, (2, 3))
    weights = tensor("v", v, (2,))
    tensor("x", x, (3,))
    expected = matrix.T @ weights
    prediction = torch.as_tensor(predicted).detach().cpu().double()
    if prediction.shape != (3,):
        raise Wrong(
            f"`predicted` has shape {tuple(prediction.shape)}; x.grad has one number per "
            "element of x, shape (3,).",
            f"`predicted` 的形状是 {tuple(prediction.shape)}；"
            "x.grad 对 x 的每个元素各有一个数，形状是 (3,)。",
        )
    if not torch.allclose(prediction, expected, atol=1e-5):
        if torch.allclose(prediction, matrix.sum(dim=0), atol=1e-5):
            raise Wrong(
                "`predicted` is what a gradient of all ones gives: it leaves out v, which "
                "weighs each output y_i.",
                "`predicted` 是梯度全为 1 时的结果，没有用到 v；v 给每个输出 y_i 加权。",
            )
        raise Wrong(
            "`predicted` is not what backward stores: x_j's gradient is the sum over i of "
            "v_i times dy_i/dx_j. Which entry of A is dy_i/dx_j?",
            "`predicted` 不是 backward 存入的值。x_j 的梯度是 v_i 与 dy_i/dx_j 之积对 i 求和。"
            "dy_i/dx_j 是 A 的哪个元素？",
        )
    grad = _gradient("x", x, expected, "A^T v")
    if not torch.allclose(grad, expected, atol=1e-5):
        if torch.allclose(grad, matrix.sum(dim=0), atol=1e-5):
            raise Wrong(
                "`x.grad` is the gradient of y.sum(), with all ones: pass gradient=v to "
                "backward().",
                "`x.grad` 是 y.sum() 的梯度，相当于梯度全为 1。要给 backward() 传入 gradient=v。",
            )
        raise Wrong(
            "`x.grad` is not what y.backward(gradient=v) stores for y = A @ x: look at "
            "which tensor you called backward() on.",
            "`x.grad` 不是 y = A @ x 时 y.backward(gradient=v) 存入的值。"
            "看看你对哪个张量调用了 backward()。",
        )
    if isinstance(J, (torch.Tensor, np.ndarray)) and tuple(J.shape) == (3, 2):
        raise Wrong(
            "`J` has shape (3, 2): a Jacobian has one row per output y_i and one column per "
            "input x_j.",
            "`J` 的形状是 (3, 2)。雅可比矩阵每个输出 y_i 占一行，每个输入 x_j 占一列。",
        )
    jacobian = tensor("J", J, (2, 3), numpy_ok=True)
    if not torch.allclose(jacobian, matrix, atol=1e-5):
        raise Wrong(
            "`J` is not the Jacobian of x -> A @ x: give torch.autograd.functional.jacobian "
            "that function and x.",
            "`J` 不是 x -> A @ x 的雅可比矩阵。"
            "把这个函数和 x 交给 torch.autograd.functional.jacobian。",
        )


LAYERS = [(32, 8), (32,), (32, 32), (32,), (4, 32), (4,)]  # the model's parameter shapes
FROZEN = [True, True, False, False, False, False]  # the first nn.Linear's weight and bias


@exercise(3)
def q3(model, trainable, before) -> None:
    if not isinstance(model, nn.Module):
        raise Wrong(
            f"`model` should be the network (an nn.Module); it is a {type(model).__name__}.",
            f"`model` 应该是网络本身（一个 nn.Module），现在是 {type(model).__name__}。",
        )
    params = list(model.parameters())
    if [tuple(p.shape) for p in params] != LAYERS:
        raise Wrong(
            "`model` does not have the layers of the deep dive: nn.Linear 8 -> 32, 32 -> 32, "
            "32 -> 4, with an nn.ReLU between them.",
            "`model` 的层与深入部分的不同。"
            "应该是 nn.Linear 8 -> 32、32 -> 32、32 -> 4，层间用 nn.ReLU。",
        )
    frozen = [not p.requires_grad for p in params]
    if all(frozen):
        raise Wrong(
            "every parameter is frozen: freeze only the first nn.Linear (model[0]), not the "
            "whole model.",
            "所有参数都冻结了。只冻结第一个 nn.Linear（model[0]），不要冻结整个模型。",
        )
    if frozen[0] and not frozen[1]:
        raise Wrong(
            "the first layer's bias still requires grad: freeze the layer, weight and bias "
            "together, with model[0].requires_grad_(False).",
            "第一层的偏置仍然需要梯度。"
            "要用 model[0].requires_grad_(False) 把这一层的权重和偏置一起冻结。",
        )
    if frozen != FROZEN:
        raise Wrong(
            "look at requires_grad of each parameter (model.named_parameters()): only the "
            "first nn.Linear's weight and bias should be False.",
            "逐个看看参数的 requires_grad（model.named_parameters()）："
            "只有第一个 nn.Linear 的权重和偏置应该是 False。",
        )
    count = whole_number("trainable", trainable)
    total = sum(p.numel() for p in params)
    right = sum(p.numel() for p in params if p.requires_grad)
    if count != right:
        if count == total:
            raise Wrong(
                "`trainable` counts every parameter, the frozen ones too: keep only those "
                "with p.requires_grad.",
                "`trainable` 把所有参数都数进去了，包括冻结的。只数 p.requires_grad 为真的参数。",
            )
        if count == right + params[1].numel():
            raise Wrong(
                "`trainable` still counts the first layer's biases, which are frozen with its "
                "weights.",
                "`trainable` 还把第一层的偏置数了进去；它们和权重一起被冻结了。",
            )
        if count in (sum(not f for f in frozen), len(params)):
            raise Wrong(
                "`trainable` counts parameter tensors; count the numbers in them (p.numel()).",
                "`trainable` 数的是参数张量的个数。要数的是其中数值的个数（p.numel()）。",
            )
        raise Wrong(
            "`trainable` is not the number of parameters that require grad: add up "
            "p.numel() over them.",
            "`trainable` 不是需要梯度的参数个数。对这些参数把 p.numel() 加起来。",
        )
    copies = list(before.values()) if isinstance(before, dict) else before
    if not isinstance(copies, (list, tuple)) or len(copies) != len(params):
        raise Wrong(
            "`before` should hold a copy of each of the model's 6 parameter tensors, taken "
            "before the optimizer step.",
            "`before` 应该保存模型 6 个参数张量各自的副本，要在优化器更新之前复制。",
        )
    for copy, p in zip(copies, params, strict=True):
        if not isinstance(copy, torch.Tensor) or copy.shape != p.shape:
            raise Wrong(
                "`before` should hold the model's parameters in order, one tensor each.",
                "`before` 应该按顺序保存模型的各个参数，每个参数一个张量。",
            )
        if copy.untyped_storage().data_ptr() == p.untyped_storage().data_ptr():
            raise Wrong(
                "`before` holds the parameters themselves, and the step changes them in place: "
                "keep copies (p.clone()).",
                "`before` 里放的是参数本身，而优化器更新会原地修改它们。要保存副本（p.clone()）。",
            )
    pairs = zip(copies, params, strict=True)
    changed = [not torch.equal(c.detach().cpu(), p.detach().cpu()) for c, p in pairs]
    if not any(changed):
        raise Wrong(
            "no parameter changed since `before`: after copying them, take one step "
            "(zero_grad, forward, loss, backward, step).",
            "从 `before` 到现在没有任何参数变化。复制之后，要做一步更新"
            "（zero_grad、前向传播、损失、backward、step）。",
        )
    if changed != [not f for f in FROZEN]:
        raise Wrong(
            f"after the step, changed per parameter tensor: {changed}. The frozen first layer "
            "should stay as it was and every other layer should move: did the optimizer get "
            "all the trainable parameters?",
            f"更新之后，各参数张量是否改变：{changed}。冻结的第一层应该不变，"
            "其余各层都应该变。优化器拿到所有可训练的参数了吗？",
        )


def _fit(fit_line: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, float]:
    """Run the learner's ``fit_line``; its (w, b) as floats, or Wrong for a known mistake."""
    with warnings.catch_warnings():  # .grad of a non-leaf warns; the hint below says more
        warnings.simplefilter("ignore")
        try:
            result = fit_line(*args, **kwargs)
        except RuntimeError as err:
            if "leaf Variable" in str(err):
                raise Wrong(
                    "updating w in place while autograd records raises an error: do the "
                    "update inside `with torch.no_grad():`.",
                    "在自动求导记录时原地更新 w 会报错。要把更新放进 `with torch.no_grad():` 里。",
                ) from None
            if "does not require grad" in str(err):
                raise Wrong(
                    "after the first update w no longer requires grad: `w = w - ...` makes a "
                    "new tensor. Update in place, `w -= lr * w.grad`, under torch.no_grad().",
                    "第一次更新之后 w 不再需要梯度，因为 `w = w - ...` 生成了新张量。"
                    "应该在 torch.no_grad() 下原地更新：`w -= lr * w.grad`。",
                ) from None
            raise
        except TypeError as err:
            if "NoneType" in str(err):
                raise Wrong(
                    "w.grad became None: `w = w - ...` outside torch.no_grad() makes w a "
                    "result, not a leaf. Update in place, `w -= lr * w.grad`, under "
                    "torch.no_grad().",
                    "w.grad 变成了 None。在 torch.no_grad() 之外写 `w = w - ...`，"
                    "w 就成了运算结果，不再是叶子张量。应该在 torch.no_grad() 下原地更新："
                    "`w -= lr * w.grad`。",
                ) from None
            raise
    if result is None:
        raise NotDone
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Wrong(
            "`fit_line` should return two things, (w, b).",
            "`fit_line` 应该返回两个值：(w, b)。",
        )
    try:
        return tuple(float(torch.as_tensor(p).detach().reshape(-1)[0]) for p in result)
    except (TypeError, ValueError, IndexError, RuntimeError):
        raise Wrong(
            "`fit_line` should return w and b as numbers or one-element tensors.",
            "`fit_line` 应该把 w 和 b 作为数或单元素张量返回。",
        ) from None


def _line(slope: float, intercept: float) -> tuple[torch.Tensor, torch.Tensor]:
    """50 points on slope * x + intercept with a little noise, the same on every call."""
    noise = torch.randn(50, generator=torch.Generator().manual_seed(0))
    X = torch.linspace(-1, 1, 50)
    return X, slope * X + intercept + 0.05 * noise


def _descend(
    X: torch.Tensor, y: torch.Tensor, steps: int, clear: bool, lr: float = 0.5
) -> tuple[float, float]:
    """Plain gradient descent on the mean squared error from w = b = 0."""
    w = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(steps):
        ((w * X + b - y) ** 2).mean().backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        if clear:
            w.grad = b.grad = None
    return w.item(), b.item()


def _near(got: tuple[float, float], want: tuple[float, float], tol: float = 0.1) -> bool:
    return all(abs(g - w) < tol for g, w in zip(got, want, strict=True))


@exercise(4)
def q4(fit_line) -> None:
    if not callable(fit_line):
        raise Wrong(
            f"`fit_line` should be a function; it is a {type(fit_line).__name__}.",
            f"`fit_line` 应该是一个函数，现在是 {type(fit_line).__name__}。",
        )
    for slope, intercept in ((2.0, 1.0), (-3.0, 0.5)):
        X, y = _line(slope, intercept)
        w, b = _fit(fit_line, X, y)
        if not (math.isfinite(w) and math.isfinite(b)):
            raise Wrong(
                "w and b grew to inf or nan: the steps are too large. Is the loss the mean "
                "of the squared errors (not their sum), with lr=0.5?",
                "w 和 b 变成了 inf 或 nan，说明每一步走得太大。"
                "损失是平方误差的平均值（而不是总和）吗？lr 是 0.5 吗？",
            )
        if _near((w, b), (slope, intercept)):
            continue
        if (slope, intercept) != (2.0, 1.0) and _near((w, b), (2.0, 1.0)):
            raise Wrong(
                "on points of another line fit_line still returns about (2, 1): fit the X "
                "and y it is given, not the points defined outside it.",
                "换成另一条直线上的点，fit_line 仍然返回约 (2, 1)。"
                "要拟合传进来的 X 和 y，而不是函数外面定义的点。",
            )
        if _near((b, w), (slope, intercept)):
            raise Wrong(
                "fit_line returns (b, w); return (w, b).",
                "fit_line 返回的是 (b, w)，应该返回 (w, b)。",
            )
        try:  # two epochs at lr=0.5 tell a missing zero_grad from a loop that stops early
            two_steps = _fit(fit_line, X, y, 0.5, 2)
        except Exception:  # e.g. a fit_line without lr and num_epochs: no diagnosis
            two_steps = (math.nan, math.nan)
        if _near(two_steps, _descend(X, y, 2, clear=False), 1e-4):
            raise Wrong(
                "the second step is too large: backward() adds into .grad, so clear w.grad "
                "and b.grad (set them to None) after every update.",
                "第二步走得太大了。backward() 会累加进 .grad，"
                "所以每次更新之后都要清空 w.grad 和 b.grad（设为 None）。",
            )
        if _near(two_steps, _descend(X, y, 2, clear=True), 1e-4):
            raise Wrong(
                f"fit_line returns ({w:.2f}, {b:.2f}) for the line {slope:g}x + "
                f"{intercept:g}: its steps are right but it stops too early. Look at "
                "num_epochs and lr.",
                f"对直线 {slope:g}x + {intercept:g}，fit_line 返回 ({w:.2f}, {b:.2f})。"
                "每一步都对，但停得太早。看看 num_epochs 和 lr。",
            )
        raise Wrong(
            f"fit_line returns ({w:.2f}, {b:.2f}) for the line {slope:g}x + {intercept:g}. "
            "Print the loss every few epochs: start from w = b = 0, and each epoch compute "
            "the mean squared error, backward(), update, clear the gradients.",
            f"对直线 {slope:g}x + {intercept:g}，fit_line 返回 ({w:.2f}, {b:.2f})。"
            "每隔几轮打印一次损失。从 w = b = 0 开始，每一轮计算均方误差、"
            "backward()、更新参数、清空梯度。",
        )
    _uses_lr_and_num_epochs(fit_line)


def _uses_lr_and_num_epochs(fit_line: Callable[..., Any]) -> None:
    """:class:`Wrong` unless ``fit_line`` run with other ``lr`` and ``num_epochs`` ends where
    that many plain gradient-descent steps of that size end: a closed-form fit, or a loop
    that ignores either argument, recovers the line but is not what the question asks."""
    X, y = _line(2.0, 1.0)
    defaults = _fit(fit_line, X, y)
    for lr, epochs in ((0.02, 5), (0.3, 7)):  # 200 steps at lr 0.02 are far from the fit
        try:
            got = _fit(fit_line, X, y, lr=lr, num_epochs=epochs)
        except TypeError as err:
            if "argument" not in str(err):
                raise
            raise Wrong(
                "`fit_line` should take `lr` and `num_epochs` as the question writes it: "
                "`fit_line(X, y, lr=0.5, num_epochs=200)`.",
                "`fit_line` 应按题目写的那样接受 `lr` 和 `num_epochs`："
                "`fit_line(X, y, lr=0.5, num_epochs=200)`。",
            ) from None
        want = _descend(X, y, epochs, clear=True, lr=lr)
        if _near(got, want, 1e-4):
            continue
        call = f"fit_line(X, y, lr={lr}, num_epochs={epochs})"
        if _near(got, defaults, 1e-3):
            raise Wrong(
                f"`{call}` returns the same (w, b) as with the defaults: the fit must come "
                "from `num_epochs` gradient-descent steps of size `lr` from w = b = 0, so "
                "other values of them give another (w, b).",
                f"`{call}` 返回的 (w, b) 与默认参数时相同。拟合结果应来自从 w = b = 0 开始、"
                "步长为 `lr` 的 `num_epochs` 步梯度下降，换了这两个值，(w, b) 也应不同。",
            )
        if _near(got, _descend(X, y, epochs, clear=True), 1e-4):
            raise Wrong(
                f"`{call}` takes steps of size 0.5, not `lr`: use the argument `lr` in the update.",
                f"`{call}` 的步长是 0.5，而不是 `lr`。在更新中使用参数 `lr`。",
            )
        if _near(got, _descend(X, y, 200, clear=True, lr=lr), 1e-4):
            raise Wrong(
                f"`{call}` takes 200 steps, not `num_epochs`: loop `num_epochs` times.",
                f"`{call}` 走了 200 步，而不是 `num_epochs` 步。循环 `num_epochs` 次。",
            )
        raise Wrong(
            f"`{call}` returns ({got[0]:.4f}, {got[1]:.4f}); {epochs} gradient-descent steps of "
            f"size {lr} from w = b = 0 end at ({want[0]:.4f}, {want[1]:.4f}). Each epoch: the "
            "mean squared error, backward(), w -= lr * w.grad (and b), clear the gradients.",
            f"`{call}` 返回 ({got[0]:.4f}, {got[1]:.4f})；从 w = b = 0 开始、步长 {lr} 的 "
            f"{epochs} 步梯度下降结束于 ({want[0]:.4f}, {want[1]:.4f})。每一轮计算均方误差、"
            "backward()、w -= lr * w.grad（b 也一样）、清空梯度。",
        )
