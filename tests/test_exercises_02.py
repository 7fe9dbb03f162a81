"""Notebook 02's exercise checks answer right, not done yet, or not right yet with the hint.

For each exercise, in English and Chinese: the solution's answer is right, the answer cell's
placeholder is "not done yet", and mistakes learners make are "not right yet" with the hint
that points at them (utils/exercises/autograd.py).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch import nn

from tests.exercise_cases import other_right_tests, outcome_tests
from utils.exercises import autograd as ex


def g_points(requires_grad: bool = True) -> torch.Tensor:
    return torch.linspace(-2, 2, 5, requires_grad=requires_grad)


def by_hand(x: torch.Tensor) -> torch.Tensor:
    x = x.detach()
    return torch.sin(x) + x * torch.cos(x)


def q1_solution(backwards: int = 1):
    x = g_points()
    for _ in range(backwards):
        (x * torch.sin(x)).sum().backward()
    return x, by_hand(x)


def q1_no_requires_grad():
    x = g_points(requires_grad=False)
    return x, by_hand(x)


def q1_not_a_leaf():
    x = torch.linspace(-2, 2, 5, requires_grad=True) * 1  # a result, not a leaf
    (x * torch.sin(x)).sum().backward()
    return x, by_hand(x)


def q1_no_backward():
    x = g_points()
    return x, by_hand(x)


def q1_derivative_of_sin_only():
    x = g_points()
    torch.sin(x).sum().backward()
    return x, by_hand(x)


def q1_product_rule_half():
    x, _ = q1_solution()
    return x, x.detach() * torch.cos(x.detach())


A = torch.tensor([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])
V = torch.tensor([1.0, -2.0])


def q2_answers(predicted=None, gradient="v", backwards=1, J=None):
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for _ in range(backwards):
        y = A @ x
        if gradient == "v":
            y.backward(gradient=V)
        else:
            y.sum().backward()
    J = torch.autograd.functional.jacobian(lambda x: A @ x, x.detach()) if J is None else J
    return A, x, V, A.T @ V if predicted is None else predicted, J


def three_layers() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)
    )


def q3_answers(freeze=lambda m: m[0].requires_grad_(False), count=None, copy=True, step=True):
    model = three_layers()
    freeze(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    before = [p.clone() if copy else p for p in model.parameters()]
    if step:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        optimizer.zero_grad()
        model(torch.randn(16, 8)).pow(2).mean().backward()
        optimizer.step()
    return model, trainable if count is None else count, before


def fit_line_with(clear=True, reduce="mean", no_grad=True, rebind=False):
    """A learner's fit_line, with or without the mistakes named by the arguments."""

    def fit_line(X, y, lr=0.5, num_epochs=200):
        w = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        for _ in range(num_epochs):
            getattr((w * X + b - y) ** 2, reduce)().backward()
            if rebind:
                w = w - lr * w.grad  # a new tensor, no longer a leaf
                b = b - lr * b.grad
                continue
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                w -= lr * w.grad
                b -= lr * b.grad
            if clear:
                w.grad = b.grad = None
        return w, b

    return fit_line


fit_line = fit_line_with()


def fit_line_placeholder(X, y, lr=0.5, num_epochs=200):
    """The answer cell's function, body still `...`."""
    ...


POINTS_OUTSIDE = torch.linspace(-1, 1, 50)


def fit_line_ignores_its_arguments(X, y, lr=0.5, num_epochs=200):
    return fit_line(POINTS_OUTSIDE, 2 * POINTS_OUTSIDE + 1, lr, num_epochs)


def fit_line_too_few_epochs(X, y, lr=0.5, num_epochs=5):
    return fit_line(X, y, lr, num_epochs)


def fit_line_closed_form(X, y, lr=0.5, num_epochs=200):
    # Issue 44, case 8: least squares, no gradient descent at all; it recovers the line.
    design = torch.stack([X, torch.ones_like(X)], dim=1)
    w, b = torch.linalg.lstsq(design, y[:, None]).solution.flatten()
    return w, b


def fit_line_ignoring(lr_used=None, epochs_used=None):
    """A loop that takes a fixed lr or a fixed number of epochs, whatever it is given."""

    def fit(X, y, lr=0.5, num_epochs=200):
        return fit_line(X, y, lr_used or lr, epochs_used or num_epochs)

    return fit


def fit_line_mse_loss(X, y, lr=0.5, num_epochs=200):
    w = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    for _ in range(num_epochs):
        nn.functional.mse_loss(X * w + b, y).backward()
        with torch.no_grad():
            for p in (w, b):
                p.sub_(lr * p.grad)
                p.grad.zero_()
    return w.item(), b.item()


def fit_line_sgd(X, y, lr=0.5, num_epochs=200):
    w, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([w, b], lr=lr)
    for _ in range(num_epochs):
        optimizer.zero_grad()
        ((y - (w * X + b)) ** 2).mean().backward()
        optimizer.step()
    return w, b


def fit_line_one_tensor(X, y, lr=0.5, num_epochs=200):
    wb = torch.zeros(2, requires_grad=True)
    for _ in range(num_epochs):
        ((wb[0] * X + wb[1] - y) ** 2).mean().backward()
        with torch.no_grad():
            wb -= lr * wb.grad
        wb.grad = None
    return wb[0].detach(), wb[1].detach()


def q1_numpy_by_hand():
    x, _ = q1_solution()
    p = np.linspace(-2, 2, 5)
    return x, np.sin(p) + p * np.cos(p)  # issue 44, case 3: refused as "not a tensor"


def q1_gradient_of_ones():
    x = g_points()
    g = x * torch.sin(x)
    g.backward(gradient=torch.ones_like(g))
    return x, by_hand(x).tolist() and torch.tensor(by_hand(x).tolist(), dtype=torch.float64)


def q1_float64():
    x = torch.linspace(-2, 2, 5, dtype=torch.float64, requires_grad=True)
    (x * torch.sin(x)).sum().backward()
    return x, x.grad.clone()


def q2_functional(J):
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    torch.autograd.backward(A @ x, grad_tensors=V)
    return A, x, V, (A.T @ V).numpy(), J


OTHER_RIGHT = {
    "q1 by_hand as a NumPy array": ("q1", q1_numpy_by_hand),
    "q1 backward with a gradient of ones": ("q1", q1_gradient_of_ones),
    "q1 in float64": ("q1", q1_float64),
    "q2 J as a NumPy array": ("q2", lambda: q2_answers(J=A.numpy().copy())),  # issue 44, case 3
    "q2 J from torch.func.jacrev": (
        "q2",
        lambda: q2_answers(J=torch.func.jacrev(lambda x: A @ x)(torch.zeros(3))),
    ),
    "q2 autograd.backward, predicted in NumPy": ("q2", lambda: q2_functional(A.clone())),
    "q3 before as a dict of clones": (
        "q3",
        lambda: (lambda m, n, b: (m, n, {i: t for i, t in enumerate(b)}))(*q3_answers()),
    ),
    "q3 trainable as a tensor, frozen one by one": (
        "q3",
        lambda: (lambda m, n, b: (m, torch.tensor(n), b))(
            *q3_answers(freeze=lambda m: [p.requires_grad_(False) for p in m[0].parameters()])
        ),
    ),
    "q3 trainable as a NumPy integer": (
        "q3",
        lambda: (lambda m, n, b: (m, np.int64(n), b))(*q3_answers()),
    ),
    "q4 F.mse_loss and grad.zero_()": ("q4", lambda: (fit_line_mse_loss,)),
    "q4 torch.optim.SGD": ("q4", lambda: (fit_line_sgd,)),
    "q4 w and b in one tensor": ("q4", lambda: (fit_line_one_tensor,)),
}
(
    test_another_right_answer_is_right,
    test_every_exercise_has_three_other_right_answers,
) = other_right_tests(ex, OTHER_RIGHT, ("q1", "q2", "q3", "q4"))


RIGHT = {
    "q1": lambda: q1_solution(),
    "q2": lambda: q2_answers(),
    "q3": lambda: q3_answers(),
    "q4": lambda: (fit_line,),
}
PLACEHOLDERS = {
    "q1": lambda: (..., ...),
    "q2": lambda: (A, torch.zeros(3, requires_grad=True), V, ..., ...),
    "q3": lambda: (..., ..., ...),
    "q4": lambda: (fit_line_placeholder,),
}
# (exercise, answers, a fragment of the English hint, a fragment of the Chinese hint)
WRONG = {
    "q1 x without requires_grad": ("q1", q1_no_requires_grad, "requires_grad=True", "不需要梯度"),
    "q1 x not a leaf": ("q1", q1_not_a_leaf, "not a leaf", "不是叶子张量"),
    "q1 no backward": ("q1", q1_no_backward, "is empty", "是空的"),
    "q1 backward twice": ("q1", lambda: q1_solution(backwards=2), "2 times", "2 倍"),
    "q1 derivative of sin only": ("q1", q1_derivative_of_sin_only, "called backward", "调用了"),
    "q1 product rule half": ("q1", q1_product_rule_half, "product rule", "乘积法则"),
    "q2 prediction ignores v": (
        "q2",
        lambda: q2_answers(predicted=A.sum(dim=0)),
        "leaves out v",
        "没有用到 v",
    ),
    "q2 prediction shaped like y": (
        "q2",
        lambda: q2_answers(predicted=A @ torch.tensor([0.5, -1.0, 2.0])),
        "shape (3,)",
        "形状是 (3,)",
    ),
    "q2 prediction from the first output only": (
        "q2",
        lambda: q2_answers(predicted=V[0] * A[0]),
        "Which entry of A",
        "A 的哪个元素",
    ),
    "q2 backward of the sum": (
        "q2",
        lambda: q2_answers(gradient="ones"),
        "gradient=v",
        "gradient=v",
    ),
    "q2 backward twice": ("q2", lambda: q2_answers(backwards=2), "2 times", "2 倍"),
    "q2 jacobian transposed": ("q2", lambda: q2_answers(J=A.T), "one row per output", "占一行"),
    "q3 whole model frozen": (
        "q3",
        lambda: q3_answers(freeze=lambda m: m.requires_grad_(False), step=False),
        "only the first nn.Linear",
        "只冻结第一个",
    ),
    "q3 only the weight frozen": (
        "q3",
        lambda: q3_answers(freeze=lambda m: m[0].weight.requires_grad_(False)),
        "bias still requires grad",
        "偏置仍然需要梯度",
    ),
    "q3 count includes frozen": ("q3", lambda: q3_answers(count=1476), "frozen ones too", "冻结的"),
    "q3 count forgets frozen bias": (
        "q3",
        lambda: q3_answers(count=1476 - 8 * 32),
        "first layer's biases",
        "第一层的偏置",
    ),
    "q3 count of tensors": ("q3", lambda: q3_answers(count=4), "p.numel()", "p.numel()"),
    "q3 before without clone": ("q3", lambda: q3_answers(copy=False), "p.clone()", "p.clone()"),
    "q3 no step": ("q3", lambda: q3_answers(step=False), "take one step", "做一步更新"),
    "q4 gradients never cleared": (
        "q4",
        lambda: (fit_line_with(clear=False),),
        "clear w.grad",
        "清空",
    ),
    "q4 summed loss": ("q4", lambda: (fit_line_with(reduce="sum"),), "inf or nan", "inf 或 nan"),
    "q4 update outside no_grad": (
        "q4",
        lambda: (fit_line_with(no_grad=False),),
        "with torch.no_grad()",
        "with torch.no_grad()",
    ),
    "q4 w rebound": ("q4", lambda: (fit_line_with(rebind=True),), "not a leaf", "叶子张量"),
    "q4 ignores its arguments": (
        "q4",
        lambda: (fit_line_ignores_its_arguments,),
        "not the points defined outside",
        "函数外面定义的点",
    ),
    "q4 stops too early": ("q4", lambda: (fit_line_too_few_epochs,), "stops too early", "停得太早"),
    "q4 closed-form least squares": (  # issue 44, case 8
        "q4",
        lambda: (fit_line_closed_form,),
        "returns the same (w, b) as with the defaults",
        "与默认参数时相同",
    ),
    "q4 ignores lr": (  # issue 44, case 8
        "q4",
        lambda: (fit_line_ignoring(lr_used=0.5),),
        "takes steps of size 0.5, not `lr`",
        "步长是 0.5",
    ),
    "q4 ignores num_epochs": (  # issue 44, case 8
        "q4",
        lambda: (fit_line_ignoring(epochs_used=200),),
        "takes 200 steps, not `num_epochs`",
        "走了 200 步",
    ),
    "q4 ignores both": (  # issue 44, case 8
        "q4",
        lambda: (fit_line_ignoring(lr_used=0.5, epochs_used=200),),
        "returns the same (w, b) as with the defaults",
        "与默认参数时相同",
    ),
    "q4 returns (b, w)": (
        "q4",
        lambda: (lambda X, y, *a: fit_line(X, y, *a)[::-1],),
        "(b, w)",
        "(b, w)",
    ),
}


(
    test_the_solutions_answer_is_right,
    test_the_answer_cells_placeholder_is_not_done_yet,
    test_a_learners_mistake_gets_its_hint,
    test_every_exercise_has_three_recorded_mistakes,
) = outcome_tests(ex, RIGHT, PLACEHOLDERS, WRONG)


def test_grading_raises_with_the_hint_and_passes_the_solution():
    ex.q1.grade(*q1_solution())
    with pytest.raises(AssertionError, match="product rule"):
        ex.q1.grade(*q1_product_rule_half())
