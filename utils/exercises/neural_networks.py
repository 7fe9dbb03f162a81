"""Checks for the exercises of notebook 03 (neural networks); see utils/exercises/__init__.py."""

from __future__ import annotations

import os

import torch
from torch import nn

from . import Wrong, exercise
from ._answers import tensor, whole_number

# LeNet(in_channels=3)'s parameters, layer by layer: (name, weights, biases)
LAYERS = [
    ("conv1", 6 * 3 * 5 * 5, 6),
    ("conv2", 16 * 6 * 5 * 5, 16),
    ("fc1", 120 * 16 * 5 * 5, 120),
    ("fc2", 84 * 120, 84),
    ("fc3", 10 * 84, 10),
]
TOTAL = sum(w + b for _, w, b in LAYERS)


@exercise(1)
def q1(by_hand) -> None:
    count = whole_number("by_hand", by_hand)
    if count == TOTAL:
        return
    if count == TOTAL - 6 * 2 * 5 * 5:
        raise Wrong(
            "that is the count of LeNet() with 1 input channel: with in_channels=3, conv1's "
            "kernels read 3 channels.",
            "这是单输入通道的 LeNet() 的参数个数。in_channels=3 时，conv1 的卷积核要读 3 个通道。",
        )
    if count == TOTAL - sum(b for _, _, b in LAYERS):
        raise Wrong(
            "your count has no biases: each layer also has one bias per output.",
            "你的计数里没有偏置。每一层还有偏置，每个输出一个。",
        )
    for name, weights, biases in LAYERS:
        for part_en, part_zh, size in (("bias", "偏置", biases), ("weights", "权重", weights)):
            if count in (TOTAL - size, TOTAL + size):
                missed = count < TOTAL
                raise Wrong(
                    f"your count {'leaves out' if missed else 'counts twice'} {name}'s "
                    f"{part_en}: look at that layer again.",
                    f"你的计数{'漏掉了' if missed else '重复计算了'} {name} 的{part_zh}。"
                    "再看看这一层。",
                )
    others = TOTAL - LAYERS[2][1]  # every parameter but fc1's weights
    for k in range(1, 33):
        if k != 5 and count == others + 120 * 16 * k * k:
            raise Wrong(
                f"your count gives fc1 16 x {k} x {k} inputs: follow a 32 x 32 image through "
                "the layers (a 5 x 5 convolution without padding takes 4 pixels off, a 2 x 2 "
                "max-pool halves the size).",
                f"按你的计数，fc1 的输入是 16 x {k} x {k}。跟着一张 32 x 32 的图像走一遍各层："
                "不补零的 5 x 5 卷积会少 4 个像素，2 x 2 最大池化把尺寸减半。",
            )
    one_k = TOTAL - LAYERS[0][1] - LAYERS[1][1] + 6 * 3 * 5 + 16 * 6 * 5
    if count == one_k:
        raise Wrong(
            "look at the convolutions' weights: a 5 x 5 kernel holds 25 weights for each "
            "input channel.",
            "看看卷积层的权重：5 x 5 的卷积核对每个输入通道有 25 个权重。",
        )
    raise Wrong(
        "count layer by layer: a convolution has out · in · k · k weights and out biases, a "
        "linear layer out · in weights and out biases. Compare with the table of LeNet()'s "
        "parameters in the deep dive: only conv1 changes.",
        "逐层计数：卷积层有 out · in · k · k 个权重和 out 个偏置，"
        "线性层有 out · in 个权重和 out 个偏置。"
        "再与深入部分列出的 LeNet() 参数表比较，只有 conv1 会变。",
    )


def _leaves(module: nn.Module) -> list[nn.Module]:
    """The modules that do the work, in order (nested nn.Sequential flattened)."""
    return [m for m in module.modules() if not list(m.children())]


@exercise(2)
def q2(seq, model) -> None:
    if not isinstance(seq, nn.Sequential):
        raise Wrong(
            f"`seq` should be an nn.Sequential, built without a class; it is a "
            f"{type(seq).__name__}.",
            f"`seq` 应该是一个不写类、直接搭起来的 nn.Sequential，现在是 {type(seq).__name__}。",
        )
    mine, theirs = list(seq.named_parameters()), list(model.named_parameters())
    for (name, p), (model_name, q) in zip(mine, theirs, strict=False):
        if p.shape != q.shape:
            raise Wrong(
                f"seq's {name} has shape {tuple(p.shape)}, model's {model_name} "
                f"{tuple(q.shape)}: compare the layers' sizes with LeNet's __init__.",
                f"seq 的 {name} 形状是 {tuple(p.shape)}，model 的 {model_name} 是 "
                f"{tuple(q.shape)}。对照 LeNet 的 __init__ 比较各层的尺寸。",
            )
    if len(mine) != len(theirs):
        raise Wrong(
            f"seq has {len(mine)} parameter tensors, model {len(theirs)}: compare the layers "
            "with weights, nn.Conv2d and nn.Linear, with LeNet's __init__.",
            f"seq 有 {len(mine)} 个参数张量，model 有 {len(theirs)} 个。"
            "对照 LeNet 的 __init__ 比较带权重的层，即 nn.Conv2d 和 nn.Linear。",
        )
    if not any(isinstance(m, nn.Flatten) for m in _leaves(seq)):
        raise Wrong(
            "nothing in seq flattens the 16 x 5 x 5 maps before the first nn.Linear: "
            "LeNet.forward calls torch.flatten(x, 1) there.",
            "seq 在第一个 nn.Linear 之前没有把 16 x 5 x 5 的特征图展平。"
            "LeNet.forward 在那里调用了 torch.flatten(x, 1)。",
        )
    if not all(
        torch.equal(p.detach(), q.detach()) for (_, p), (_, q) in zip(mine, theirs, strict=True)
    ):
        raise Wrong(
            "seq's weights are not model's: load them with seq.load_state_dict(...). Its keys "
            "are named by position, so pair them with model's values (with strict=False, "
            "keys that do not match are skipped instead of raising an error).",
            "seq 的权重不是 model 的。要用 seq.load_state_dict(...) 加载。"
            "它的键按位置命名，所以要与 model 的值逐一配对。"
            "用 strict=False 时，对不上的键会被跳过，不会报错。",
        )
    X = torch.randn(4, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        try:
            got = seq(X)
        except RuntimeError as err:
            raise Wrong(
                f"seq fails on a batch of 4 images ({str(err).splitlines()[0]}): compare its "
                "layers, one by one, with LeNet.forward.",
                f"seq 处理 4 张图像的批量时出错（{str(err).splitlines()[0]}）。"
                "把它的层与 LeNet.forward 逐一对照。",
            ) from None
        want = model(X)
    if got.shape != want.shape or not torch.allclose(got, want, atol=1e-6):
        kinds = [type(m).__name__ for m in _leaves(seq)]
        if kinds[-1] != "Linear":
            raise Wrong(
                f"seq ends in {kinds[-1]}: LeNet returns the last nn.Linear's raw scores, with "
                "no activation after it.",
                f"seq 的最后一层是 {kinds[-1]}。"
                "LeNet 直接返回最后一个 nn.Linear 的原始分数，后面没有激活函数。",
            )
        raise Wrong(
            f"same weights, different scores: seq's layers are {', '.join(kinds)}. Compare "
            "them with LeNet.forward: a ReLU after each convolution and after fc1 and fc2, a "
            "max-pool after each convolution's ReLU.",
            f"权重相同，分数却不同。seq 的层依次是 {'、'.join(kinds)}。对照 LeNet.forward："
            "每个卷积层以及 fc1、fc2 之后各有一个 ReLU，每个卷积层的 ReLU 之后各有一次最大池化。",
        )


@exercise(3)
def q3(digit, features, padded) -> None:
    image = tensor("digit", digit, (1, 1, 28, 28))
    count = whole_number("features", features)
    if count != 16 * 4 * 4:
        if count == 16 * 5 * 5:
            raise Wrong(
                "`features` is what a 32 x 32 image gives: follow 28 x 28 through the layers.",
                "`features` 是 32 x 32 图像得到的数。让 28 x 28 的图像走一遍各层。",
            )
        raise Wrong(
            "`features` is not what reaches fc1: 16 channels times the height and width after "
            "the second pool. A 5 x 5 convolution without padding takes 4 pixels off, a 2 x 2 "
            "max-pool halves the size; the error message says the number too.",
            "`features` 不是到达 fc1 的特征数，它等于 16 个通道乘以第二次池化后的高和宽。"
            "不补零的 5 x 5 卷积会少 4 个像素，2 x 2 最大池化把尺寸减半。报错信息里也有这个数。",
        )
    if not isinstance(padded, torch.Tensor):
        tensor("padded", padded, (1, 1, 32, 32))
    if tuple(padded.shape) == (1, 1, 28, 32):
        raise Wrong(
            "`padded` is 28 x 32: F.pad's numbers go in pairs from the last dimension, so "
            "(left, right) pads only the width. Add a pair for the height.",
            "`padded` 是 28 x 32。F.pad 的数两两一组，从最后一维算起，"
            "所以 (left, right) 只填充宽度。还要为高度再加一组。",
        )
    if tuple(padded.shape[-2:]) == (30, 30):
        raise Wrong(
            "`padded` is 30 x 30: each number of F.pad is what one side gets, so 28 -> 32 "
            "needs 2 on each side.",
            "`padded` 是 30 x 30。F.pad 的每个数是一边要加的像素数，28 -> 32 要在每边加 2 个。",
        )
    frame = tensor("padded", padded, (1, 1, 32, 32))
    if not torch.equal(frame[..., 2:30, 2:30], image):
        if torch.equal(frame[..., :28, :28], image) or torch.equal(frame[..., 4:, 4:], image):
            raise Wrong(
                "the digit sits in a corner of `padded`: pad the same on every side, so it "
                "stays in the middle.",
                "数字落在了 `padded` 的一角。要在每一边填充同样多的像素，让它留在中间。",
            )
        raise Wrong(
            "`padded` should hold the digit unchanged in its middle, with a border around it: "
            "pad it (F.pad), do not resize it.",
            "`padded` 的中间应该原样保留这个数字，四周加一圈边。要填充（F.pad），不要缩放。",
        )
    if frame.abs().sum() != frame[..., 2:30, 2:30].abs().sum():
        raise Wrong(
            "the border of `padded` is not zero: pad with zeros, F.pad's default value.",
            "`padded` 的边框不是零。用零填充，这是 F.pad 的默认值。",
        )


def _scores_its_input(clf: nn.Module, images: torch.Tensor, scores: torch.Tensor) -> None:
    """:class:`Wrong` unless ``clf`` computes its scores from the images it is given: on
    images drawn now, which no answer can know in advance, it gives 10 scores each and other
    scores than on ``X4``, and it scores each image of ``X4`` alone as in the batch."""
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    fresh = torch.randn(3, *images.shape[1:], generator=g)
    with torch.no_grad():
        on_fresh = clf(fresh).detach().cpu()
        alone = torch.cat([clf(images[i : i + 1]).detach().cpu() for i in range(len(images))])
    if tuple(on_fresh.shape) != (3, 10):
        raise Wrong(
            f"for 3 new images clf gives shape {tuple(on_fresh.shape)}, not (3, 10): a network "
            "gives 10 scores for each image it is given, whatever the batch. Train a LeNet; do "
            "not write its outputs yourself.",
            f"对 3 张新图像，clf 给出的形状是 {tuple(on_fresh.shape)}，不是 (3, 10)。"
            "网络对传给它的每张图像各给出 10 个分数，与批量无关。"
            "要训练一个 LeNet，不要自己写出它的输出。",
        )
    if torch.allclose(on_fresh, scores[:3], atol=1e-6) or torch.allclose(
        on_fresh, on_fresh[:1].expand_as(on_fresh), atol=1e-6
    ):
        raise Wrong(
            "clf gives the same scores whatever images it is given: its scores must come from "
            "the images, through the layers of a trained LeNet.",
            "不管传入什么图像，clf 给出的分数都一样。分数必须由图像经过训练好的 LeNet 各层算出。",
        )
    if not torch.allclose(alone, scores, atol=1e-4):
        raise Wrong(
            "clf scores an image of X4 differently alone than in the batch of four: it should "
            "compute each image's scores from that image (a trained LeNet), not recognise X4.",
            "clf 单独给 X4 中一张图像打的分，与在四张一批时不同。"
            "它应根据每张图像本身算出分数（一个训练好的 LeNet），而不是认出 X4。",
        )


@exercise(4)
def q4(clf, X4, labels) -> None:
    if not isinstance(clf, nn.Module):
        raise Wrong(
            f"`clf` should be the trained network (an nn.Module); it is a {type(clf).__name__}.",
            f"`clf` 应该是训练好的网络（一个 nn.Module），现在是 {type(clf).__name__}。",
        )
    images = tensor("X4", X4, (4, 1, 32, 32)).float()
    targets = torch.as_tensor(labels)
    with torch.no_grad():
        scores = clf(images).detach().cpu()
    if tuple(scores.shape) != (4, 10):
        raise Wrong(
            f"clf(X4) has shape {tuple(scores.shape)}; a LeNet gives 10 scores per image, (4, 10).",
            f"clf(X4) 的形状是 {tuple(scores.shape)}；"
            "LeNet 对每张图像给出 10 个分数，应为 (4, 10)。",
        )
    _scores_its_input(clf, images, scores)
    if (scores >= 0).all() and torch.allclose(scores.sum(dim=1), torch.ones(4), atol=1e-4):
        raise Wrong(
            "clf's outputs are probabilities: nn.CrossEntropyLoss takes raw scores and computes "
            "the log-softmax itself, so the network must not end in a softmax.",
            "clf 输出的是概率。nn.CrossEntropyLoss 接受原始分数，自己会算 log-softmax，"
            "所以网络最后不能再加 softmax。",
        )
    predicted = scores.argmax(dim=1)
    if not torch.equal(predicted, targets.cpu()):
        raise Wrong(
            f"clf predicts {predicted.tolist()} for labels {targets.tolist()}: train until "
            "clf(X4).argmax(dim=1), one class per image, equals labels (each step: zero_grad, "
            "forward, loss, backward, step).",
            f"对标签 {targets.tolist()}，clf 的预测是 {predicted.tolist()}。"
            "要一直训练到 clf(X4).argmax(dim=1) 等于 labels，它给每张图像一个类别。"
            "每一步都是 zero_grad、前向传播、损失、backward、step。",
        )
