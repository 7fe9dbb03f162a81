"""Notebook 03's exercise checks answer right, not done yet, or not right yet with the hint.

For each exercise, in English and Chinese: the solution's answer is right, the answer cell's
placeholder is "not done yet", and mistakes learners make are "not right yet" with the hint
that points at them (utils/exercises/neural_networks.py).
"""

from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tests.exercise_cases import other_right_tests, outcome_tests
from utils import LeNet
from utils.exercises import neural_networks as ex

COUNT = 62006  # LeNet(in_channels=3)'s parameters, as the solution counts them


def lenet() -> LeNet:
    torch.manual_seed(0)
    return LeNet()


def sequential(flatten=True, relu_after_conv1=True, ending=()) -> nn.Sequential:
    layers = [nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU()]
    layers += [nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU()]
    layers += [nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10), *ending]
    if not flatten:
        layers.remove(layers[6])
    if not relu_after_conv1:
        layers.remove(layers[1])
    return nn.Sequential(*layers)


def loaded(seq: nn.Sequential, model: nn.Module) -> nn.Sequential:
    seq.load_state_dict(dict(zip(seq.state_dict(), model.state_dict().values(), strict=True)))
    return seq


def q2_strict_false():
    model = lenet()
    seq = sequential()
    seq.load_state_dict(model.state_dict(), strict=False)  # no key matches: nothing loads
    return seq, model


def digit() -> torch.Tensor:
    return torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(0))


def q3_answers(features=256, pad=(2, 2, 2, 2), value=0.0):
    image = digit()
    return image, features, F.pad(image, pad, value=value)


@functools.cache  # the judge only reads the network: train each variant once
def trained_clf(steps=200, softmax=False):
    torch.manual_seed(0)
    X4 = torch.randn(4, 1, 32, 32)
    labels = torch.tensor([3, 1, 4, 1])
    clf = nn.Sequential(LeNet(), nn.Softmax(dim=1)) if softmax else LeNet()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(clf.parameters(), lr=0.01, momentum=0.9)
    for _ in range(steps):
        with torch.no_grad():
            if torch.equal(clf(X4).argmax(dim=1), labels):
                break
        optimizer.zero_grad()
        loss_fn(clf(X4), labels).backward()
        optimizer.step()
    return clf, X4, labels


class OneHot(nn.Module):
    """Issue 44, case 9: scores written by hand, one-hot for the labels, whatever the input."""

    def __init__(self, labels, batch_sized=False):
        super().__init__()
        self.labels, self.batch_sized = labels, batch_sized

    def forward(self, x):
        scores = 10 * F.one_hot(self.labels, 10).float()
        return scores[: len(x)] if self.batch_sized else scores


class Recognises(nn.Module):
    """Knows X4 by heart, and is an untrained LeNet on anything else."""

    def __init__(self, X4, labels):
        super().__init__()
        self.X4, self.labels, self.net = X4, labels, LeNet()

    def forward(self, x):
        if x.shape == self.X4.shape and torch.equal(x, self.X4):
            return 10 * F.one_hot(self.labels, 10).float()
        return self.net(x)


@functools.cache
def trained_for(steps=30, functional=False):
    """Another right route: a fixed number of steps, no early stop, maybe F.cross_entropy."""
    torch.manual_seed(0)
    X4, labels = torch.randn(4, 1, 32, 32), torch.tensor([3, 1, 4, 1])
    clf = LeNet()
    optimizer = torch.optim.SGD(clf.parameters(), lr=0.01, momentum=0.9)
    loss_fn = F.cross_entropy if functional else nn.CrossEntropyLoss()
    for _ in range(steps):
        optimizer.zero_grad()
        loss_fn(clf(X4), labels).backward()
        optimizer.step()
    return clf, X4, labels


def padded_by_hand():
    image = digit()
    frame = torch.zeros(1, 1, 32, 32)
    frame[..., 2:30, 2:30] = image
    return image, 256, frame


OTHER_RIGHT = {
    "q1 a tensor": ("q1", lambda: (torch.tensor(COUNT),)),
    "q1 a NumPy integer": ("q1", lambda: (np.int64(COUNT),)),
    "q1 a whole float": ("q1", lambda: (float(COUNT),)),
    "q2 named layers": ("q2", lambda: named()),
    "q2 weights copied layer by layer": ("q2", lambda: copied_by_hand()),
    "q2 nested Sequentials": ("q2", lambda: nested()),
    "q3 features as a tensor": (
        "q3",
        lambda: (lambda d, n, p: (d, torch.tensor(n), p))(*q3_answers()),
    ),
    "q3 padded with mode='constant'": (
        "q3",
        lambda: (digit(), 256, F.pad(digit(), (2, 2, 2, 2), mode="constant", value=0)),
    ),
    "q3 padded into a frame of zeros": ("q3", padded_by_hand),
    "q4 a fixed number of steps": ("q4", lambda: trained_for()),
    "q4 F.cross_entropy": ("q4", lambda: trained_for(functional=True)),
    "q4 in eval mode": ("q4", lambda: (lambda c, x, y: (c.eval(), x, y))(*trained_for(40))),
}


def copied_by_hand():
    model = lenet()
    seq = sequential()
    with torch.no_grad():
        for p, q in zip(seq.parameters(), model.parameters(), strict=True):
            p.copy_(q)
    return seq, model


def named():
    model = lenet()
    names = "conv1 r1 p1 conv2 r2 p2 flat fc1 r3 fc2 r4 fc3".split()
    seq = nn.Sequential(OrderedDict(zip(names, sequential(), strict=True)))
    seq.load_state_dict(model.state_dict(), strict=True)  # same names: fc1.weight, ...
    return seq, model


def nested():
    model = lenet()
    seq = sequential()
    features, classifier = nn.Sequential(*seq[:6]), nn.Sequential(*seq[6:])
    return loaded(nn.Sequential(features, classifier), model), model


(
    test_another_right_answer_is_right,
    test_every_exercise_has_three_other_right_answers,
) = other_right_tests(ex, OTHER_RIGHT, ("q1", "q2", "q3", "q4"))


RIGHT = {
    "q1": lambda: (COUNT,),
    "q2": lambda: (lambda model: (loaded(sequential(), model), model))(lenet()),
    "q3": lambda: q3_answers(),
    "q4": lambda: trained_clf(),
}
PLACEHOLDERS = {
    "q1": lambda: (...,),
    "q2": lambda: (..., lenet()),
    "q3": lambda: (digit(), ..., ...),
    "q4": lambda: (..., torch.randn(4, 1, 32, 32), torch.tensor([3, 1, 4, 1])),
}
CONV1_WEIGHTS = 6 * 3 * 5 * 5
# (exercise, answers, a fragment of the English hint, a fragment of the Chinese hint)
WRONG = {
    "q1 one input channel": (
        "q1",
        lambda: (COUNT - 6 * 2 * 5 * 5,),
        "1 input channel",
        "单输入通道",
    ),
    "q1 no biases": ("q1", lambda: (COUNT - (6 + 16 + 120 + 84 + 10),), "no biases", "没有偏置"),
    "q1 fc1's bias forgotten": ("q1", lambda: (COUNT - 120,), "fc1's bias", "fc1 的偏置"),
    "q1 flatten size of a 28 x 28 image": (
        "q1",
        lambda: (COUNT - 120 * 400 + 120 * 256,),
        "16 x 4 x 4",
        "16 x 4 x 4",
    ),
    "q1 kernel counted once": (
        "q1",
        lambda: (COUNT - CONV1_WEIGHTS - 2400 + 6 * 3 * 5 + 16 * 6 * 5,),
        "25 weights",
        "25 个权重",
    ),
    "q1 not a number": ("q1", lambda: ("62006 parameters",), "should be a number", "应该是一个数"),
    "q2 a class": ("q2", lambda: (lenet(), lenet()), "nn.Sequential", "nn.Sequential"),
    "q2 weights not loaded": (
        "q2",
        lambda: (sequential(), lenet()),
        "load_state_dict",
        "load_state_dict",
    ),
    "q2 loaded with strict=False": ("q2", q2_strict_false, "strict=False", "strict=False"),
    "q2 no flatten": (
        "q2",
        lambda: (lambda m: (loaded(sequential(flatten=False), m), m))(lenet()),
        "flattens",
        "展平",
    ),
    "q2 a missing ReLU": (
        "q2",
        lambda: (lambda m: (loaded(sequential(relu_after_conv1=False), m), m))(lenet()),
        "a ReLU after each convolution",
        "ReLU",
    ),
    "q2 softmax at the end": (
        "q2",
        lambda: (lambda m: (loaded(sequential(ending=(nn.Softmax(dim=1),)), m), m))(lenet()),
        "no activation",
        "没有激活函数",
    ),
    "q3 features of a 32 x 32 image": (
        "q3",
        lambda: q3_answers(features=400),
        "32 x 32",
        "32 x 32",
    ),
    "q3 features without the pools": (
        "q3",
        lambda: q3_answers(features=16 * 20 * 20),
        "halves",
        "减半",
    ),
    "q3 padding the width only": ("q3", lambda: q3_answers(pad=(2, 2)), "pairs", "两两一组"),
    "q3 one pixel a side": (
        "q3",
        lambda: q3_answers(pad=(1, 1, 1, 1)),
        "2 on each side",
        "每边加 2 个",
    ),
    "q3 digit in a corner": ("q3", lambda: q3_answers(pad=(0, 4, 0, 4)), "corner", "一角"),
    "q3 resized instead": (
        "q3",
        lambda: (digit(), 256, F.interpolate(digit(), size=(32, 32))),
        "do not resize",
        "不要缩放",
    ),
    "q3 border of ones": ("q3", lambda: q3_answers(value=1.0), "zeros", "用零填充"),
    "q4 untrained": ("q4", lambda: trained_clf(steps=0), "train until", "一直训练到"),
    "q4 softmax at the end": (
        "q4",
        lambda: trained_clf(steps=3, softmax=True),
        "raw scores",
        "原始分数",
    ),
    "q4 one-hot scores written by hand": (  # issue 44, case 9
        "q4",
        lambda: (OneHot(torch.tensor([3, 1, 4, 1])), *trained_clf(steps=0)[1:]),
        "not (3, 10)",
        "不是 (3, 10)",
    ),
    "q4 one-hot scores cut to the batch": (  # issue 44, case 9
        "q4",
        lambda: (OneHot(torch.tensor([3, 1, 4, 1]), True), *trained_clf(steps=0)[1:]),
        "the same scores whatever images",
        "分数都一样",
    ),
    "q4 X4 known by heart": (
        "q4",
        lambda: (lambda _, x, y: (Recognises(x, y), x, y))(*trained_clf(steps=0)),
        "not recognise X4",
        "而不是认出 X4",
    ),
    "q4 the loss, not the network": (
        "q4",
        lambda: (torch.tensor(0.5), *trained_clf(steps=0)[1:]),
        "nn.Module",
        "nn.Module",
    ),
}


(
    test_the_solutions_answer_is_right,
    test_the_answer_cells_placeholder_is_not_done_yet,
    test_a_learners_mistake_gets_its_hint,
    test_every_exercise_has_three_recorded_mistakes,
) = outcome_tests(ex, RIGHT, PLACEHOLDERS, WRONG)


def test_the_recorded_count_is_the_models():
    assert COUNT == sum(p.numel() for p in LeNet(in_channels=3).parameters())
