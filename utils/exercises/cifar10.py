"""Checks for the exercises of notebook 04 (CIFAR-10); see utils/exercises/__init__.py.

No judge trains: exercise 1 is judged against the labels it is given, exercises 2 and 3 by
building what the learner's functions return (a network, an optimizer, a schedule) on tiny
inputs, so a check takes well under a second on a CPU and never reads the learner's globals.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from . import NotDone, Wrong, exercise


def _labels(labels) -> torch.Tensor:
    return torch.as_tensor(list(labels) if not isinstance(labels, torch.Tensor) else labels)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)


@exercise(1)
def q1(most_frequent, chance_acc, train_labels, test_labels) -> None:
    train, test = _labels(train_labels).long(), _labels(test_labels).long()
    counts = torch.bincount(train, minlength=10)
    top = set((counts == counts.max()).nonzero().flatten().tolist())

    if isinstance(most_frequent, torch.Tensor) and most_frequent.numel() == 1:
        most_frequent = most_frequent.item()
    if isinstance(most_frequent, str):
        raise Wrong(
            f"`most_frequent` is the name {most_frequent!r}; give the class's index "
            "(0 to 9), the number the labels and the network's predictions use.",
            f"`most_frequent` 是类别名 {most_frequent!r}；请给出类别的索引（0 到 9），"
            "也就是标签和网络预测所用的那个数。",
        )
    if (
        isinstance(most_frequent, numbers.Real)
        and not isinstance(most_frequent, (bool, numbers.Integral))
        and float(most_frequent).is_integer()
    ):
        most_frequent = int(most_frequent)  # 4.0 names class 4 as well as 4 does
    if isinstance(most_frequent, bool) or not isinstance(most_frequent, numbers.Integral):
        raise Wrong(
            f"`most_frequent` should be one class index (an int); it is a "
            f"{type(most_frequent).__name__}.",
            f"`most_frequent` 应该是一个类别索引（int）；现在是 {type(most_frequent).__name__}。",
        )
    most_frequent = int(most_frequent)
    if most_frequent not in top:
        test_counts = torch.bincount(test, minlength=10)
        if test_counts[most_frequent] == test_counts.max():
            raise Wrong(
                f"class {most_frequent} is the most frequent in the test labels; the constant "
                "classifier must be chosen from the training labels alone, the test set only "
                "measures it.",
                f"类别 {most_frequent} 是测试标签里最常见的；这个常数分类器只能根据训练标签来选，"
                "测试集只用来衡量它。",
            )
        raise Wrong(
            f"class {most_frequent} is not the most frequent training label: count how often "
            "each class occurs in the training labels.",
            f"类别 {most_frequent} 不是训练标签里最常见的：数一数每个类别在训练标签中出现几次。",
        )

    if isinstance(chance_acc, torch.Tensor) and chance_acc.numel() == 1:
        chance_acc = chance_acc.item()
    if isinstance(chance_acc, bool) or not isinstance(chance_acc, numbers.Real):
        raise Wrong(
            f"`chance_acc` should be one number; it is a {type(chance_acc).__name__}.",
            f"`chance_acc` 应该是一个数；现在是 {type(chance_acc).__name__}。",
        )
    chance_acc = float(chance_acc)
    expected = (test == most_frequent).double().mean().item()
    if _close(chance_acc, expected):
        return
    if _close(chance_acc, 100 * expected):
        raise Wrong(
            "that looks like a percentage; give the accuracy as a fraction between 0 and 1, "
            "as `test_acc` is.",
            "这看起来是百分数；请把准确率写成 0 到 1 之间的小数，和 `test_acc` 一样。",
        )
    if _close(chance_acc, (train == most_frequent).double().mean().item()):
        raise Wrong(
            "that is the class's share of the training labels; the accuracy is measured on "
            "the test labels.",
            "这是该类别在训练标签中所占的比例；准确率要在测试标签上衡量。",
        )
    if _close(chance_acc, 1 / len(counts)):
        raise Wrong(
            "1/10 holds only if the test set has every class equally often; count how often "
            "the constant prediction matches the test labels.",
            "只有测试集里每个类别一样多时才是 1/10；数一数这个固定的预测与测试标签相符的次数。",
        )
    raise Wrong(
        f"{chance_acc:.4g} is not the test accuracy of always predicting class "
        f"{most_frequent}: compare that one prediction with every test label.",
        f"{chance_acc:.4g} 不是总预测类别 {most_frequent} 时的测试准确率："
        "把这一个预测与每个测试标签比较。",
    )


def _lenet_parameters(c1: int, c2: int) -> int:
    """Parameters of LeNet with c1 and c2 channels: two 5x5 convolutions, then 120, 84, 10."""
    sizes = [(3 * 25, c1), (c1 * 25, c2), (c2 * 25, 120), (120, 84), (84, 10)]
    return sum(fan_in * fan_out + fan_out for fan_in, fan_out in sizes)


def _network(widened_lenet, c1: int, c2: int) -> nn.Module:
    net = widened_lenet(c1, c2)
    if net is None:
        raise NotDone
    if not isinstance(net, nn.Module):
        raise Wrong(
            f"`widened_lenet({c1}, {c2})` should return a network (an `nn.Module`); "
            f"it returned a {type(net).__name__}.",
            f"`widened_lenet({c1}, {c2})` 应返回一个网络（`nn.Module`）；"
            f"现在返回的是 {type(net).__name__}。",
        )
    return net


@exercise(2)
def q2(widened_lenet) -> None:
    first, again = _network(widened_lenet, 32, 64), _network(widened_lenet, 32, 64)
    if first is again:
        raise Wrong(
            "two calls returned the same network object: build a new network in every call "
            "(changing the layers of an existing one changes it everywhere it is used).",
            "两次调用返回了同一个网络对象：每次调用都要新建一个网络"
            "（改动已有网络的层，用到它的每个地方都会跟着变）。",
        )
    for c1, c2 in ((32, 64), (8, 12)):
        net = _network(widened_lenet, c1, c2)
        convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
        if len(convs) != 2:
            raise Wrong(
                f"LeNet has two convolutions; `widened_lenet({c1}, {c2})` has {len(convs)}.",
                f"LeNet 有两个卷积层；`widened_lenet({c1}, {c2})` 有 {len(convs)} 个。",
            )
        outs = (convs[0].out_channels, convs[1].out_channels)
        if outs != (c1, c2):
            if outs == (6, 16):
                raise Wrong(
                    f"`widened_lenet({c1}, {c2})` still has LeNet's 6 and 16 channels: "
                    "which layers must be replaced, and with what?",
                    f"`widened_lenet({c1}, {c2})` 仍是 LeNet 的 6 和 16 个通道："
                    "哪些层需要替换，换成什么？",
                )
            if outs == (32, 64):
                raise Wrong(
                    f"`widened_lenet({c1}, {c2})` has 32 and 64 channels whatever it is asked "
                    "for: build the layers from the arguments `c1` and `c2`.",
                    f"不管要求多少，`widened_lenet({c1}, {c2})` 都是 32 和 64 个通道："
                    "请用参数 `c1` 和 `c2` 来构造这些层。",
                )
            raise Wrong(
                f"the convolutions of `widened_lenet({c1}, {c2})` give {outs[0]} and {outs[1]} "
                "channels; the first should give `c1`, the second `c2`.",
                f"`widened_lenet({c1}, {c2})` 的两个卷积层输出 {outs[0]} 和 {outs[1]} 个通道；"
                "第一个应输出 `c1` 个，第二个应输出 `c2` 个。",
            )
        if (convs[0].in_channels, convs[1].in_channels) != (3, c1):
            raise Wrong(
                "a convolution's input channels must match what comes in: the 3 colours for the "
                "first, the first one's output channels for the second.",
                "卷积层的输入通道数必须与传进来的数据一致：第一个是 3 个颜色通道，"
                "第二个是第一个卷积层的输出通道数。",
            )
        X = torch.randn(2, 3, 32, 32)
        try:
            with torch.no_grad():
                out = net(X)
        except RuntimeError as err:
            linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
            if linears and linears[0].in_features != c2 * 5 * 5:
                raise Wrong(
                    f"`widened_lenet({c1}, {c2})` fails on a batch of images at its first "
                    "linear layer: how many features does the second convolution hand it "
                    "after pooling and flattening?",
                    f"`widened_lenet({c1}, {c2})` 处理一批图像时在第一个全连接层出错："
                    "第二个卷积层的输出经过池化和展平后，交给它多少个特征？",
                ) from err
            raise
        if tuple(out.shape) != (2, 10):
            raise Wrong(
                f"for 2 images the network should give 2 x 10 scores; it gave shape "
                f"{tuple(out.shape)}.",
                f"输入 2 张图像，网络应给出 2 x 10 个分数；现在的形状是 {tuple(out.shape)}。",
            )
        n_params = sum(p.numel() for p in net.parameters())
        if n_params != _lenet_parameters(c1, c2):
            raise Wrong(
                f"`widened_lenet({c1}, {c2})` has {n_params:,} parameters, not the count of "
                "LeNet with those channels: change only the channels, and keep the rest of "
                "LeNet (5 x 5 kernels, pooling, the layers of 120, 84 and 10 units).",
                f"`widened_lenet({c1}, {c2})` 有 {n_params:,} 个参数，与换了通道数的 LeNet "
                "不符。只改通道数，LeNet 的其余部分保持不变："
                "5 x 5 卷积核、池化，以及 120、84、10 个单元的全连接层。",
            )
        _computes_as_lenet(net, c1, c2, X, out)


def _lenet(c1: int, c2: int) -> nn.Sequential:
    """The lesson's ``lenet()`` with ``c1`` and ``c2`` channels: the reference network."""
    return nn.Sequential(
        nn.Conv2d(3, c1, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(c2 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def _computes_as_lenet(
    net: nn.Module, c1: int, c2: int, X: torch.Tensor, out: torch.Tensor
) -> None:
    """:class:`Wrong` unless ``net`` gives the scores of LeNet with the same weights: its
    layers' weights are copied into the reference, in order, and both score ``X``."""
    reference = _lenet(c1, c2)
    theirs = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    ours = [m for m in reference.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    shapes = [(m.weight.shape, None if m.bias is None else m.bias.shape) for m in theirs]
    kinds = [type(m).__name__ for m in net.modules() if not list(m.children())]
    if shapes != [(m.weight.shape, m.bias.shape) for m in ours]:
        raise Wrong(
            f"the layers with weights of `widened_lenet({c1}, {c2})` are not LeNet's, in "
            f"LeNet's order ({', '.join(kinds)}): change only the two convolutions' channels "
            "and the first linear layer's inputs.",
            f"`widened_lenet({c1}, {c2})` 中带权重的层与 LeNet 的不同，或顺序不同"
            f"（{'、'.join(kinds)}）。只改两个卷积层的通道数和第一个全连接层的输入数。",
        )
    with torch.no_grad():
        for mine, model in zip(ours, theirs, strict=True):
            mine.weight.copy_(model.weight.detach().cpu())
            mine.bias.copy_(model.bias.detach().cpu())
        want = reference(X)
    if torch.allclose(out.detach().cpu(), want, atol=1e-5):
        return
    if kinds and kinds[-1] in ("Softmax", "LogSoftmax", "Sigmoid"):
        raise Wrong(
            f"`widened_lenet({c1}, {c2})` ends in {kinds[-1]}: LeNet returns the last linear "
            "layer's raw scores, and nn.CrossEntropyLoss applies the softmax itself.",
            f"`widened_lenet({c1}, {c2})` 的最后一层是 {kinds[-1]}。LeNet 直接返回最后一个"
            "全连接层的原始分数，nn.CrossEntropyLoss 会自己计算 softmax。",
        )
    raise Wrong(
        f"with LeNet's weights copied in, `widened_lenet({c1}, {c2})` gives other scores than "
        f"LeNet: its layers are {', '.join(kinds)}. Keep everything but the channels as in "
        "`lenet()`: a ReLU after each convolution and hidden linear layer, 2 x 2 max-pooling.",
        f"把 LeNet 的权重复制进去后，`widened_lenet({c1}, {c2})` 给出的分数与 LeNet 不同。"
        f"它的层依次是 {'、'.join(kinds)}。除通道数外，一切都应与 `lenet()` 相同："
        "每个卷积层和隐藏全连接层之后有 ReLU，池化是 2 x 2 最大池化。",
    )


def _describe_optimizer(adamw) -> dict:
    """What ``adamw(params)`` builds, as data: it runs where the answer lives (for the class
    grader, the submission's kernel), the judge reads the description."""
    net = nn.Linear(3, 2)
    optimizer = adamw(net.parameters())
    if optimizer is None:
        return {"none": True}
    is_optimizer = isinstance(optimizer, torch.optim.Optimizer)
    given = {id(p) for p in net.parameters()}
    held = {id(p) for g in optimizer.param_groups for p in g["params"]} if is_optimizer else set()
    lr = optimizer.param_groups[0]["lr"] if is_optimizer and optimizer.param_groups else None
    return {
        "none": False,
        "class": type(optimizer).__name__,
        "optimizer": is_optimizer,
        "adam": isinstance(optimizer, torch.optim.Adam),
        "decoupled": is_optimizer and bool(optimizer.defaults.get("decoupled_weight_decay", False)),
        "same_params": held == given,
        "lr": float(lr) if isinstance(lr, (int, float, torch.Tensor)) else None,
    }


def _described(function, helper: str, *args) -> dict:
    """``helper(function, *args)`` here, or where ``function`` lives (the grader's kernel)."""
    via = getattr(function, "via", None)
    found = (
        globals()[helper](function, *args) if via is None else via(f"{__name__}:{helper}", *args)
    )
    if not isinstance(found, dict) or not isinstance(found.get("none"), bool):
        raise Wrong(
            "the check could not read what your function built.",
            "检查无法读取你的函数构造的对象。",
        )
    return found


def _optimizer(adamw) -> None:
    optimizer = _described(adamw, "_describe_optimizer")
    if optimizer["none"]:
        raise NotDone
    name = str(optimizer.get("class"))
    if optimizer.get("optimizer") is not True:
        raise Wrong(
            f"`adamw(params)` should return an optimizer; it returned a {name}.",
            f"`adamw(params)` 应返回一个优化器；现在返回的是 {name}。",
        )
    if optimizer.get("adam") is not True or optimizer.get("decoupled") is not True:
        raise Wrong(
            f"`adamw(params)` builds {name}, not AdamW: AdamW differs "
            "from Adam in how it applies weight decay (decoupled from the gradient).",
            f"`adamw(params)` 构造的是 {name}，不是 AdamW："
            "AdamW 与 Adam 的区别在于施加权重衰减的方式（与梯度解耦）。",
        )
    if optimizer.get("same_params") is not True:
        raise Wrong(
            "the optimizer does not hold the parameters passed in as `params`: build it on "
            "those, not on another network's.",
            "这个优化器没有持有作为 `params` 传进来的参数：请用这些参数构造它，"
            "不要用别的网络的参数。",
        )
    lr = optimizer.get("lr")
    if not isinstance(lr, float) or not _close(lr, 1e-3):
        raise Wrong(
            f"its learning rate is {lr:g}; read again which one the question asks for.",
            f"它的学习率是 {lr:g}；请再读一遍题目要求的学习率。",
        )


def _describe_schedule(one_cycle_to_003, steps: int) -> dict:
    """What ``one_cycle_to_003(optimizer, steps)`` builds and the learning rates it sets over
    ``steps`` steps, as data (see :func:`_describe_optimizer`)."""
    optimizer = torch.optim.SGD(nn.Linear(3, 2).parameters(), lr=0.01, momentum=0.9)
    scheduler = one_cycle_to_003(optimizer, steps)
    if scheduler is None:
        return {"none": True}
    found = {
        "none": False,
        "class": type(scheduler).__name__,
        "scheduler": isinstance(scheduler, torch.optim.lr_scheduler.LRScheduler),
        "cycle": isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR),
    }
    if not found["scheduler"]:
        return found
    found["same_optimizer"] = scheduler.optimizer is optimizer
    found["total_steps"] = int(scheduler.total_steps) if found["cycle"] else None
    lrs = []
    for _ in range(steps):  # as train_briefly does: one scheduler step per optimizer step
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        optimizer.step()
        scheduler.step()
    found["lrs"] = lrs
    found["max_lr"] = float(optimizer.param_groups[0].get("max_lr", 0.0))
    return found


def _schedule(one_cycle_to_003) -> None:
    steps = 20
    scheduler = _described(one_cycle_to_003, "_describe_schedule", steps)
    if scheduler["none"]:
        raise NotDone
    name = str(scheduler.get("class"))
    if scheduler.get("scheduler") is not True:
        raise Wrong(
            f"`one_cycle_to_003(optimizer, steps)` should return a learning-rate scheduler; "
            f"it returned a {name}.",
            f"`one_cycle_to_003(optimizer, steps)` 应返回一个学习率调度器；现在返回的是 {name}。",
        )
    if scheduler.get("same_optimizer") is not True:
        raise Wrong(
            "the schedule drives another optimizer than the one passed in: build it on "
            "`optimizer`.",
            "这个调度器驱动的不是传进来的那个优化器：请在 `optimizer` 上构造它。",
        )
    cycle = scheduler.get("cycle") is True
    if cycle and scheduler.get("total_steps") != steps:
        raise Wrong(
            f"the schedule lasts {scheduler.get('total_steps')} steps, not `steps` ({steps}): give "
            "OneCycleLR total_steps=steps, so that it ends when training does.",
            f"这个调度持续 {scheduler.get('total_steps')} 步，而不是 `steps`（{steps}）步。"
            "给 OneCycleLR 传入 total_steps=steps，让它与训练同时结束。",
        )
    lrs = scheduler.get("lrs")
    if not (isinstance(lrs, list) and len(lrs) == steps and all(isinstance(v, float) for v in lrs)):
        raise Wrong(
            "the check could not read the learning rates your schedule sets.",
            "检查无法读取你的调度器设置的学习率。",
        )
    peak, at = max(lrs), lrs.index(max(lrs))
    if at == steps - 1 and lrs[0] < peak:
        raise Wrong(
            f"after {steps} steps the learning rate is still rising: the schedule should rise "
            "and fall back within `steps` steps. Does it know `steps`?",
            f"{steps} 步之后学习率还在上升：调度应在 `steps` 步之内先升后降。它知道 `steps` 吗？",
        )
    if at == 0:
        raise Wrong(
            "the learning rate starts at its highest value; a one-cycle schedule first warms "
            "it up from a small value to the peak, then anneals it.",
            "学习率一开始就是最大值；单周期学习率调度先把它从一个小值升到峰值，再逐渐降下来。",
        )
    # OneCycleLR says its peak, max_lr; the 20 steps sampled here can fall beside it (with
    # pct_start=0.33 the highest sampled rate is 0.0299).
    peak = scheduler.get("max_lr") if cycle else peak
    if not isinstance(peak, float):
        raise Wrong(
            "the check could not read your schedule's peak.",
            "检查无法读取你的调度的峰值。",
        )
    if not math.isclose(peak, 0.03, rel_tol=1e-3):
        raise Wrong(
            f"the learning rate peaks at {peak:.3g}; read again which peak the question asks for.",
            f"学习率的峰值是 {peak:.3g}；请再读一遍题目要求的峰值。",
        )
    if lrs[-1] > 0.1 * peak:
        raise Wrong(
            f"at the last of the {steps} steps the learning rate is still {lrs[-1]:.3g}; "
            "a one-cycle schedule anneals it to almost zero by the end.",
            f"在 {steps} 步中的最后一步，学习率仍是 {lrs[-1]:.3g}；"
            "单周期学习率调度到最后会把它降到接近零。",
        )


@exercise(3)
def q3(adamw, one_cycle_to_003) -> None:
    _optimizer(adamw)
    _schedule(one_cycle_to_003)
