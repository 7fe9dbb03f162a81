"""Checks for the exercises of notebook 01 (tensors); see utils/exercises/__init__.py."""

from __future__ import annotations

import dis
import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from . import NotDone, Wrong, exercise
from ._answers import truth


def _a(value: Any) -> str:
    """What ``value`` is, with its article: "a list", "an int", "a NumPy array"."""
    kind = type(value).__name__
    if isinstance(value, np.ndarray):
        return "a NumPy array"
    return f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"


def _tensor(name: str, answer: Any, numpy_ok: bool = False) -> torch.Tensor:
    """``answer`` on the CPU, detached, or :class:`Wrong` if it is no tensor (a NumPy array
    of numbers passes too with ``numpy_ok``: where the question asks for numbers, not a type)."""
    if numpy_ok and isinstance(answer, np.ndarray) and answer.dtype.kind in "biuf":
        return torch.from_numpy(np.array(answer, dtype=np.float64))
    if not isinstance(answer, torch.Tensor):
        raise Wrong(
            f"`{name}` should be a tensor; it is {_a(answer)}.",
            f"`{name}` 应该是一个张量，现在是 {type(answer).__name__}。",
        )
    return answer.detach().cpu()


@exercise(1)
def q1(centred_cols, centred_rows) -> None:
    X = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)
    for name, answer, dim, other in (
        ("centred_cols", centred_cols, 0, "columns"),
        ("centred_rows", centred_rows, 1, "rows"),
    ):
        answer = _tensor(name, answer, numpy_ok=True).double()
        if answer.shape != X.shape:
            raise Wrong(
                f"`{name}` has shape {tuple(answer.shape)}; subtracting means keeps X's shape "
                "(4, 3). Look at the shape of the means and how it lines up with X from the right.",
                f"`{name}` 的形状是 {tuple(answer.shape)}；减去均值后形状应与 X 相同，即 (4, 3)。"
                "看看均值的形状，以及它从右边起如何与 X 对齐。",
            )
        sums = answer.sum(dim=dim)
        if not torch.allclose(sums, torch.zeros_like(sums), atol=1e-5):
            zh_other = "每一列" if dim == 0 else "每一行"
            raise Wrong(
                f"each of the {other} of `{name}` should sum to 0; they sum to {sums.tolist()}. "
                f"Which dimension does your `mean` reduce?",
                f"`{name}` 的{zh_other}之和应为 0，现在是 {sums.tolist()}。"
                "你的 `mean` 归约的是哪一维？",
            )
        shift = answer - X  # one number per column (or row) when only a mean was subtracted
        if not torch.allclose(shift, shift[:1] if dim == 0 else shift[:, :1], atol=1e-5):
            raise Wrong(
                f"`{name}` should be X minus one number per {other[:-1]}; "
                "subtract the mean, do not rescale.",
                f"`{name}` 应该是 X 减去每{'列' if dim == 0 else '行'}一个数；只减均值，不要缩放。",
            )


def _images() -> np.ndarray:
    """Exercise 2's batch, as its answer cell makes it: two 32 x 32 colour images."""
    return np.random.default_rng(0).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)


@exercise(2)
def q2(X, shares_memory) -> None:
    images = _images()
    X = _tensor("X", X)
    if tuple(X.shape) != (2, 3, 32, 32):
        raise Wrong(
            f"`X` has shape {tuple(X.shape)}, not (2, 3, 32, 32): the colour dimension comes "
            "right after the batch dimension, as PyTorch's convolution layers expect. Which "
            "dimension of `images` is the colour, and where must it go?",
            f"`X` 的形状是 {tuple(X.shape)}，不是 (2, 3, 32, 32)。"
            "颜色维应紧跟在批量维之后，这是 PyTorch 卷积层期望的顺序。"
            "`images` 的哪一维是颜色？它应该移到哪里？",
        )
    if X.dtype != torch.float32:
        raise Wrong(
            f"`X` has dtype {X.dtype}; the question asks for torch.float32. Look at the dtype "
            "that each of your steps returns.",
            f"`X` 的数据类型是 {X.dtype}，题目要求 torch.float32。"
            "看看你的每一步各返回什么数据类型。",
        )
    low, high = X.min().item(), X.max().item()
    if low < 0 or high > 1:
        raise Wrong(
            f"`X`'s values go from {low:g} to {high:g}, not from 0 to 1. What is the largest "
            "value a uint8 can hold?",
            f"`X` 的取值范围是 {low:g} 到 {high:g}，不在 0 到 1 之间。uint8 能表示的最大值是多少？",
        )
    expected = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    if not torch.allclose(X, expected):
        if torch.allclose(X.flatten().sort().values, expected.flatten().sort().values):
            raise Wrong(
                "`X` holds the right numbers in the wrong places: X[n, c, h, w] should be "
                "colour c of pixel (h, w) of image n. Changing the shape alone does not move "
                "the numbers; compare X[0, :, 0, 1] with images[0, 0, 1].",
                "`X` 里的数对了，位置却不对。X[n, c, h, w] 应是图像 n 中像素 (h, w) 的颜色通道 c。"
                "只改形状不会移动这些数；比较一下 X[0, :, 0, 1] 和 images[0, 0, 1]。",
            )
        raise Wrong(
            "`X` has the right shape, dtype and range, but not the right values: each should be "
            "its pixel's uint8 value scaled to [0, 1], so that 0 stays 0 and 255 becomes 1.",
            "`X` 的形状、数据类型和取值范围都对，但数值不对。"
            "每个值应是该像素的 uint8 值缩放到 [0, 1]，"
            "0 仍是 0，255 变为 1。",
        )
    if truth("shares_memory", shares_memory):
        raise Wrong(
            "`shares_memory` is not right: look at which of your steps return a view of the "
            "same memory and which make a new tensor.",
            "`shares_memory` 不对。看看你的哪些步骤返回同一块内存的视图，哪些生成了新张量。",
        )


# What torch says when a tensor on a GPU is handed to NumPy (torch/csrc/utils/tensor_numpy.cpp).
_NOT_ON_HOST = (
    "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
    "host memory first."
)


class _OnAGPU(TorchFunctionMode):
    """While active, the tensors it marks answer like tensors on a GPU where that matters to
    ``to_numpy``: their device is ``cuda:0``, NumPy cannot read them, and ``.cpu()``,
    ``.to("cpu")`` or ``.numpy(force=True)`` copy them to a plain CPU tensor; whatever else is
    computed from them is marked too. They stay plain ``torch.Tensor`` objects (no subclass),
    so an answer that checks ``type(t) is torch.Tensor`` is judged on what it does. It lets a
    machine without a GPU tell a device-safe ``to_numpy`` from one that only works on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.marked = WeakIdKeyDictionary()

    def mark(self, t: torch.Tensor) -> torch.Tensor:
        self.marked[t] = True
        return t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = tree_flatten((args, kwargs))[0]
        if not any(isinstance(a, torch.Tensor) and a in self.marked for a in flat):
            return func(*args, **kwargs)
        if func is torch.Tensor.numpy:
            if kwargs.get("force"):
                return args[0].detach().numpy().copy()
            raise TypeError(_NOT_ON_HOST)
        if func is torch.Tensor.__array__:
            raise TypeError(_NOT_ON_HOST)
        if func is torch.Tensor.cpu:
            return args[0].clone()  # a copy on the host; like .cpu(), autograd follows it
        if func is torch.Tensor.to:  # read its arguments as nn.Module.to does
            device, dtype, *_ = torch._C._nn._parse_to(*args[1:], **kwargs)
            if device is not None and device.type == "cpu":
                return args[0].to(dtype=dtype or args[0].dtype, copy=True)
        if func == torch.Tensor.device.__get__:
            return torch.device("cuda", 0)
        if func == torch.Tensor.is_cuda.__get__:
            return True
        if func is torch.Tensor.get_device:
            return 0
        result = func(*args, **kwargs)
        for out in tree_flatten(result)[0]:
            if isinstance(out, torch.Tensor):
                self.mark(out)
        return result


def _on_a_gpu(to_numpy: Callable, tensor: torch.Tensor) -> Any:
    """``to_numpy(tensor)`` with ``tensor`` standing in for one on a GPU (:class:`_OnAGPU`)."""
    stand_in = _OnAGPU()
    stand_in.mark(tensor)
    with stand_in:
        return to_numpy(tensor)


def _does_nothing(function: Callable) -> bool:
    """Whether ``function``'s body is only ``...`` (or ``pass``, or a docstring): a placeholder.
    A function in another process (the class grader's) says so itself (``does_nothing``)."""
    said = getattr(function, "does_nothing", None)
    if isinstance(said, bool):
        return said
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_CONST", "RETURN_CONST"):
            if instruction.argval is not None:
                return False
        elif instruction.opname not in ("RESUME", "NOP", "RETURN_VALUE", "CACHE"):
            return False
    return True


def _unforeseeable() -> torch.Generator:
    """A private generator seeded from the operating system: what it draws, no answer knows."""
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)


def _fresh_inputs() -> list[torch.Tensor]:
    """Tensors ``to_numpy`` has never seen, drawn now from a private generator (so an answer
    cannot know them in advance, and the learner's generators are not touched): CPU tensors of
    floats, of whole numbers, and one that requires grad."""
    g = _unforeseeable()
    rows, cols = (int(n) for n in torch.randint(2, 6, (2,), generator=g))
    floats = torch.randn(rows, cols, generator=g)
    whole = torch.randint(-50, 50, (rows * cols,), generator=g)
    learnt = torch.randn(cols, rows, generator=g).requires_grad_()
    return [floats, whole, learnt]


def _an_array_of(result: Any, given: torch.Tensor, device: str) -> None:
    """:class:`Wrong` unless ``result``, what ``to_numpy`` gave for ``given`` on ``device``,
    is a NumPy array with its numbers."""
    on, zh_on = ("the CPU", "CPU") if device == "cpu" else (device, device)
    if result is None:
        raise Wrong(
            f"`to_numpy` returned None for a tensor on {on}: did the function `return` its result?",
            f"`to_numpy` 对 {zh_on} 上的张量返回了 None。函数是否用 `return` 返回了结果？",
        )
    if not isinstance(result, np.ndarray):
        raise Wrong(
            f"`to_numpy` returned {_a(result)} for a tensor on {on}, not a NumPy array "
            "(numpy.ndarray). Look at the type of what your last step gives back.",
            f"`to_numpy` 对 {zh_on} 上的张量返回的是 {type(result).__name__}，"
            "不是 NumPy 数组（numpy.ndarray）。看看你最后一步返回的是什么类型。",
        )
    expected = given.detach().cpu().numpy()
    if result.shape != expected.shape or not np.array_equal(result, expected):
        raise Wrong(
            f"for a tensor of shape {tuple(expected.shape)} on {on}, `to_numpy` returned an "
            f"array of shape {result.shape} with other numbers or in another shape. Convert "
            "the tensor it is given, do not change it (try it on a few tensors of your own).",
            f"对 {zh_on} 上形状为 {tuple(expected.shape)} 的张量，`to_numpy` 返回了形状为 "
            f"{result.shape} 的数组，数值或形状变了。只转换传进来的张量，不要改动它"
            "（用你自己的几个张量试一试）。",
        )


@exercise(3)
def q3(to_numpy) -> None:
    if not callable(to_numpy):
        raise Wrong(
            f"`to_numpy` should be a function (`def to_numpy(t): ...`); it is {_a(to_numpy)}.",
            f"`to_numpy` 应该是一个函数（`def to_numpy(t): ...`），"
            f"现在是 {type(to_numpy).__name__}。",
        )
    if _does_nothing(to_numpy):
        raise NotDone
    given = torch.randn(3, 2, dtype=torch.float64, generator=_unforeseeable())
    on_devices = [("cuda:0", given.clone())]  # the stand-in, marked below
    if torch.accelerator.is_available():
        accelerator = torch.accelerator.current_accelerator()
        on_devices.append((str(accelerator), given.to(accelerator)))
    for device, on_device in on_devices:
        try:
            with warnings.catch_warnings():  # NumPy's warning about __array__ is not the point
                warnings.simplefilter("ignore")
                if device == "cuda:0" and on_device.device.type == "cpu":
                    via = getattr(to_numpy, "via", None)  # a function in another process
                    if via is not None:  # (the class grader's): the stand-in runs there
                        result = via(f"{__name__}:_on_a_gpu", on_device)
                    else:
                        result = _on_a_gpu(to_numpy, on_device)
                else:
                    result = to_numpy(on_device)
        except Exception as err:
            raise Wrong(
                f"`to_numpy` works on the CPU but raises {type(err).__name__} for a tensor on "
                f"{device}. NumPy reads only the computer's main memory: where are the tensor's "
                "numbers before you call `.numpy()`?",
                f"`to_numpy` 在 CPU 上可用，但对 {device} 上的张量抛出了 {type(err).__name__}。"
                "NumPy 只能读取主机内存。调用 `.numpy()` 之前，张量的数据在哪里？",
            ) from None
        _an_array_of(result, given, device)
    for given in _fresh_inputs():
        try:
            result = to_numpy(given)
        except Exception as err:
            if given.requires_grad:
                raise Wrong(
                    f"`to_numpy` raises {type(err).__name__} for a tensor that requires grad "
                    "(a model's output, a parameter): NumPy cannot keep autograd's graph. Which "
                    "method gives the same numbers without the graph?",
                    f"对需要梯度的张量（模型的输出、参数），`to_numpy` 抛出了 "
                    f"{type(err).__name__}：NumPy 无法保留自动求导的计算图。"
                    "哪个方法能给出同样的数值、但不带计算图？",
                ) from None
            raise
        _an_array_of(result, given, "cpu")
    try:
        result = to_numpy([1, 2, 3])
    except TypeError as err:
        if not str(err).strip():
            raise Wrong(
                "`to_numpy([1, 2, 3])` raises a TypeError without a message: say what it "
                "expected and what it got.",
                "`to_numpy([1, 2, 3])` 抛出的 TypeError 没有说明。写明它需要什么、实际收到了什么。",
            ) from None
    except Exception as err:
        raise Wrong(
            f"`to_numpy([1, 2, 3])` raises {type(err).__name__}, an error from deep inside your "
            "code. Check the argument's type first and raise a TypeError that says what it got.",
            f"`to_numpy([1, 2, 3])` 抛出了 {type(err).__name__}，这是代码深处的错误。"
            "先检查参数的类型，再抛出一个写明收到了什么的 TypeError。",
        ) from None
    else:
        raise Wrong(
            f"`to_numpy([1, 2, 3])` returned {_a(result)} instead of refusing the "
            "list: check that the argument is a tensor, and raise a TypeError if not.",
            f"`to_numpy([1, 2, 3])` 返回了 {type(result).__name__}，没有拒绝这个列表。"
            "检查参数是不是张量，不是就抛出 TypeError。",
        )


def _drawn(seed: int, *sizes: int) -> tuple[torch.Generator, list[torch.Tensor]]:
    """A private generator seeded with ``seed`` and what ``torch.rand`` draws from it for each
    size in turn (the learner's global generator is never touched)."""
    generator = torch.Generator().manual_seed(seed)
    return generator, [torch.rand(n, generator=generator) for n in sizes]


def _five_after(g: torch.Generator) -> list[torch.Tensor]:
    """Where drawing five numbers from ``g`` leaves its state, for each common way to draw
    them: uniform or normal floats of any dtype, whole numbers, a permutation, coin flips."""
    draws = [
        lambda g, dtype=dtype, draw=draw: draw(5, generator=g, dtype=dtype)
        for draw in (torch.rand, torch.randn)
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    ]
    draws += [
        lambda g: torch.randint(0, 10, (5,), generator=g),
        lambda g: torch.randperm(5, generator=g),
        lambda g: torch.bernoulli(torch.full((5,), 0.5), generator=g),
        lambda g: torch.normal(0.0, 1.0, (5,), generator=g),
    ]
    states = []
    for draw in draws:
        copy = torch.Generator()
        copy.set_state(g.get_state())
        draw(copy)
        states.append(copy.get_state())
    return states


def _same(answer: torch.Tensor, expected: torch.Tensor) -> bool:
    return answer.shape == expected.shape and torch.equal(answer, expected)


@exercise(4, global_state=True)
def q4(g, from_global, from_g, expected, after, *, global_state: torch.Tensor) -> None:
    if g is torch.default_generator:
        raise Wrong(
            "`g` is the global generator itself (torch.manual_seed returns it); make a "
            "generator of your own.",
            "`g` 就是全局生成器本身（torch.manual_seed 返回的正是它）。请创建你自己的生成器。",
        )
    if not isinstance(g, torch.Generator):
        raise Wrong(
            f"`g` should be a torch.Generator; it is {_a(g)}.",
            f"`g` 应该是一个 torch.Generator，现在是 {type(g).__name__}。",
        )
    if g.initial_seed() != 0:
        raise Wrong(
            f"`g` was seeded with {g.initial_seed()}, not 0: a new generator has a fixed seed "
            "of its own until you set one.",
            f"`g` 的种子是 {g.initial_seed()}，不是 0。"
            "新建的生成器在你设定种子之前有自己固定的种子。",
        )
    _, (first_three,) = _drawn(0, 3)
    names = ("from_global", "from_g", "expected", "after")
    for name, answer in zip(names, (from_global, from_g, expected, after), strict=True):
        _tensor(name, answer)
    if not _same(from_global.detach().cpu(), first_three):
        raise Wrong(
            "`from_global` is not the first three numbers after torch.manual_seed(0): draw it "
            "right after seeding, with nothing drawn in between.",
            "`from_global` 不是 torch.manual_seed(0) 之后的前三个数。"
            "设定种子后立即取数，中间不要抽取别的。",
        )
    if not _same(from_g.detach().cpu(), first_three):
        raise Wrong(
            "`from_g` differs from `from_global`: draw three numbers from `g`, freshly seeded, "
            "with torch.rand.",
            "`from_g` 与 `from_global` 不同。用 torch.rand 从刚设好种子的 `g` 中抽取三个数。",
        )
    _, (two_after_seed_1,) = _drawn(1, 2)
    if not _same(expected.detach().cpu(), two_after_seed_1):
        raise Wrong(
            "`expected` is not the first two numbers after torch.manual_seed(1): draw it right "
            "after seeding.",
            "`expected` 不是 torch.manual_seed(1) 之后的前两个数。设定种子后立即取数。",
        )
    if not _same(after.detach().cpu(), two_after_seed_1):
        raise Wrong(
            "`after` differs from `expected`: something drew from the global generator between "
            "torch.manual_seed(1) and `after`. Which generator did the five numbers come from?",
            "`after` 与 `expected` 不同：在 torch.manual_seed(1) 和 `after` 之间，"
            "有运算从全局生成器取了数。"
            "那五个数是从哪个生成器抽取的？",
        )
    # The question asks for `from_g` and then "five numbers drawn from g", not for one way to
    # draw them: g's state is compared with where each common draw of five numbers leaves it.
    drew = g.get_state()
    three = _drawn(0, 3)[0]
    if torch.equal(drew, three.get_state()):
        raise Wrong(
            "`g` has given no numbers after `from_g`: draw the five numbers from `g` "
            "(generator=g) between torch.manual_seed(1) and `after`, so that `after` shows "
            "what drawing from g does to the global sequence.",
            "`from_g` 之后 `g` 再没有给出任何数。在 torch.manual_seed(1) 和 `after` 之间，"
            "从 `g` 抽取那五个数（generator=g），`after` 才能说明从 g 抽数对全局序列有什么影响。",
        )
    if not any(torch.equal(drew, state) for state in _five_after(three)):
        raise Wrong(
            "`g` has not given `from_g` and then five numbers: draw both from `g` "
            "(generator=g), `from_g` first, and run the answer cell once from its first line.",
            "`g` 给出的不是先 `from_g`、再五个数。两者都从 `g` 抽取（generator=g），"
            "先抽 `from_g`，然后从第一行起把答案单元格运行一次。",
        )
    # `after` must be drawn, not copied: the global generator gives the numbers of `after` last,
    # so right after the answer cell it stands two numbers past torch.manual_seed(1).
    if torch.equal(global_state, torch.Generator().manual_seed(1).get_state()):
        raise Wrong(
            "the global generator has given no numbers since the last torch.manual_seed(1), so "
            "`after` was not drawn from it: make `after` with torch.rand(2) after the five "
            "numbers from g (a copy of `expected` shows nothing), then run the answer cell and "
            "this check again.",
            "自上一次 torch.manual_seed(1) 以来，全局生成器没有给出任何数，所以 `after` 不是从它"
            "抽取的。在从 g 抽取五个数之后，用 torch.rand(2) 生成 `after`（复制 `expected` "
            "说明不了什么），然后重新运行答案单元格和这个检查。",
        )
