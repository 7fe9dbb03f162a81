"""Notebook 04's exercise checks: the solution is right, the placeholder is not done, and the
mistakes learners make are caught with their hint, in English and in Chinese."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import utils
from tests.exercise_cases import assert_right, assert_todo, assert_wrong
from utils.exercises import cifar10 as ex

# --- exercise 1: chance level -----------------------------------------------------------------

# Labels shaped like the subset's: class 4 leads the training set, class 6 the test set.
TRAIN = [c for c, n in enumerate([51, 52, 48, 48, 53, 47, 50, 51, 52, 49]) for _ in range(n)]
TEST = torch.tensor(
    [c for c, n in enumerate([10, 9, 10, 10, 9, 9, 11, 10, 11, 11]) for _ in range(n)]
)


def chance_level(train_labels, test_labels):  # the notebook's solution
    most_frequent = torch.bincount(torch.tensor(train_labels)).argmax().item()
    return most_frequent, (test_labels == most_frequent).float().mean().item()


def test_chance_level_solution_is_right_and_placeholder_is_todo():
    most_frequent, chance_acc = chance_level(TRAIN, TEST)
    assert (most_frequent, round(chance_acc, 4)) == (4, 0.09)
    assert_right(ex.q1, most_frequent, chance_acc, TRAIN, TEST)
    assert_right(ex.q1, torch.tensor(most_frequent), torch.tensor(chance_acc), TRAIN, TEST)
    assert_todo(ex.q1, ..., ..., TRAIN, TEST)
    assert_todo(ex.q1, most_frequent, ..., TRAIN, TEST)


@pytest.mark.parametrize(
    "most_frequent", [4.0, np.int64(4), np.float64(4.0), torch.tensor(4.0), torch.tensor(4)]
)
def test_chance_level_accepts_the_class_as_any_whole_number(most_frequent):
    # Issue 44, case 3: `most_frequent = 4.0` was refused.
    assert_right(ex.q1, most_frequent, np.float32(0.09), TRAIN, TEST)


def test_chance_level_accepts_any_of_tied_classes():
    balanced = [c for c in range(10) for _ in range(5)]  # the full CIFAR-10: 5,000 of each
    test = torch.arange(10).repeat(3)
    assert_right(ex.q1, 7, 0.1, balanced, test)
    assert_right(ex.q1, 0, 0.1, balanced, test)


@pytest.mark.parametrize(
    ("answers", "en", "zh"),
    [
        ((6, 11 / 100), "most frequent in the test labels", "测试标签里最常见"),
        ((2, 10 / 100), "not the most frequent training label", "不是训练标签里最常见"),
        ((4, 9.0), "looks like a percentage", "百分数"),
        ((4, 53 / 501), "share of the training labels", "训练标签中所占的比例"),
        ((4, 0.1), "1/10 holds only if", "1/10"),
        ((4, 0.5), "is not the test accuracy", "不是总预测类别"),
        (("deer", 0.09), "give the class's index", "类别的索引"),
        ((4.5, 0.09), "one class index", "一个类别索引"),
    ],
)
def test_chance_level_mistakes_get_their_hint(answers, en, zh):
    assert_wrong(ex.q1, (*answers, TRAIN, TEST), en, zh)


# --- exercise 2: a wider network --------------------------------------------------------------


def lenet(c1=6, c2=16):  # the lesson's LeNet, its channels as arguments
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


def widened_lenet(c1, c2):  # the notebook's solution: LeNet with three layers replaced
    net = lenet()
    net[0] = nn.Conv2d(3, c1, 5)
    net[3] = nn.Conv2d(c1, c2, 5)
    net[7] = nn.Linear(c2 * 5 * 5, 120)
    return net


def widened_module(c1, c2):  # another right way: notebook 03's class with its layers replaced
    net = utils.LeNet(in_channels=3)
    net.conv1, net.conv2 = nn.Conv2d(3, c1, 5), nn.Conv2d(c1, c2, 5)
    net.fc1 = nn.LazyLinear(120)
    return net


class WidenedClass(nn.Module):  # another right way: a class of one's own, functional calls
    def __init__(self, c1, c2):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, c1, 5), nn.Conv2d(c1, c2, 5)
        self.fc1, self.fc2, self.fc3 = (
            nn.Linear(c2 * 25, 120),
            nn.Linear(120, 84),
            nn.Linear(84, 10),
        )

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def widened_in_two_parts(c1, c2):  # features and classifier, as torchvision's models are built
    net = lenet(c1, c2)
    return nn.Sequential(net[:7], net[7:])


def widened_placeholder(c1, c2): ...


def widened_with(replace):
    """Issue 44, case 7: the right channels and parameter count, other layers in between."""

    def widened(c1, c2):
        net = lenet(c1, c2)
        for index, layer in replace.items():
            net[index] = layer
        return net

    return widened


def widened_without_fc1(c1, c2):
    net = lenet()
    net[0] = nn.Conv2d(3, c1, 5)
    net[3] = nn.Conv2d(c1, c2, 5)
    return net


def widened_fixed_channels(c1, c2):
    return lenet(32, 64)


SHARED = lenet()


def widened_in_place(c1, c2):  # changes one network and hands it out every time
    SHARED[0] = nn.Conv2d(3, c1, 5)
    SHARED[3] = nn.Conv2d(c1, c2, 5)
    SHARED[7] = nn.Linear(c2 * 5 * 5, 120)
    return SHARED


def widened_unchanged(c1, c2):
    return lenet()


def widened_swapped(c1, c2):
    return lenet(c2, c1)


def widened_with_padding(c1, c2):
    net = widened_lenet(c1, c2)
    net[0] = nn.Conv2d(3, c1, 5, padding=2)  # 32 x 32 kept: fc1 no longer fits
    net[7] = nn.Linear(c2 * 6 * 6, 120)
    return net


def test_wider_network_solutions_are_right_and_placeholder_is_todo():
    assert_right(ex.q2, widened_lenet)
    assert_right(ex.q2, widened_module)
    assert_right(ex.q2, lenet)  # the channels as arguments from the start
    assert_right(ex.q2, WidenedClass)
    assert_right(ex.q2, widened_in_two_parts)
    assert_todo(ex.q2, widened_placeholder)
    assert_todo(ex.q2, ...)


@pytest.mark.parametrize(
    ("answer", "en", "zh"),
    [
        (widened_without_fc1, "at its first linear layer", "第一个全连接层出错"),
        (widened_fixed_channels, "whatever it is asked for", "不管要求多少"),
        (widened_in_place, "the same network object", "同一个网络对象"),
        (widened_unchanged, "still has LeNet's 6 and 16", "仍是 LeNet 的 6 和 16"),
        (widened_swapped, "the first should give `c1`", "第一个应输出 `c1` 个"),
        (widened_with_padding, "parameters, not the count", "个参数，与换了通道数"),
        (
            widened_with({1: nn.Identity(), 4: nn.Identity(), 8: nn.Identity(), 10: nn.Identity()}),
            "gives other scores than LeNet",
            "给出的分数与 LeNet 不同",
        ),
        (
            widened_with({1: nn.Tanh(), 2: nn.AvgPool2d(2), 4: nn.Tanh(), 5: nn.AvgPool2d(2)}),
            "a ReLU after each convolution",
            "2 x 2 最大池化",
        ),
        (
            lambda c1, c2: nn.Sequential(lenet(c1, c2), nn.Softmax(dim=1)),
            "ends in Softmax",
            "最后一层是 Softmax",
        ),
    ],
)
def test_wider_network_mistakes_get_their_hint(answer, en, zh):
    assert_wrong(ex.q2, (answer,), en, zh)


# --- exercise 3: another optimizer or schedule ------------------------------------------------


def adamw(params):  # the notebook's solution
    return torch.optim.AdamW(params, lr=0.001)


def one_cycle_to_003(optimizer, steps):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.03, total_steps=steps)


def adam_decoupled(params):  # another right way: AdamW is Adam with decoupled weight decay
    return torch.optim.Adam(params, lr=0.001, weight_decay=0.01, decoupled_weight_decay=True)


def one_cycle_with(options):
    """Issue 44, case 4: other right OneCycleLR schedules, whose sampled peak misses 0.03."""

    def schedule(optimizer, steps):
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.03, **options(steps))

    return schedule


def adamw_placeholder(params): ...


def one_cycle_placeholder(optimizer, steps): ...


def adam(params):
    return torch.optim.Adam(params, lr=0.001)


def adamw_default_lr_typo(params):
    return torch.optim.AdamW(params, lr=0.01)


def adamw_on_another_network(params):
    return torch.optim.AdamW(nn.Linear(3, 2).parameters(), lr=0.001)


def one_cycle_500(optimizer, steps):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.03, total_steps=500)


def one_cycle_peak_03(optimizer, steps):
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.3, total_steps=steps)


def linear_warm_up_forever(optimizer, steps):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: (i + 1) / (10 * steps))


def cosine(optimizer, steps):
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)


def optimizer_instead_of_schedule(optimizer, steps):
    return torch.optim.SGD(optimizer.param_groups[0]["params"], lr=0.03)


def test_optimizer_and_schedule_solutions_are_right_and_placeholders_are_todo():
    assert_right(ex.q3, adamw, one_cycle_to_003)
    assert_right(ex.q3, adam_decoupled, one_cycle_to_003)
    for options in (
        lambda steps: {"total_steps": steps, "pct_start": 0.33},
        lambda steps: {"total_steps": steps, "pct_start": 0.33, "three_phase": True},
        lambda steps: {"epochs": 1, "steps_per_epoch": steps, "anneal_strategy": "linear"},
        lambda steps: {"total_steps": steps, "three_phase": True},
    ):
        assert_right(ex.q3, adamw, one_cycle_with(options))
    assert_right(ex.q3, lambda p: torch.optim.AdamW(p, 1e-3, weight_decay=0.05), one_cycle_to_003)
    assert_todo(ex.q3, adamw_placeholder, one_cycle_placeholder)
    assert_todo(ex.q3, adamw, one_cycle_placeholder)
    assert_todo(ex.q3, ..., one_cycle_to_003)


@pytest.mark.parametrize(
    ("answers", "en", "zh"),
    [
        ((adam, one_cycle_to_003), "not AdamW", "不是 AdamW"),
        ((adamw_default_lr_typo, one_cycle_to_003), "its learning rate is 0.01", "学习率是 0.01"),
        ((adamw_on_another_network, one_cycle_to_003), "passed in as `params`", "`params` 传进来"),
        ((adamw, one_cycle_500), "lasts 500 steps, not `steps` (20)", "持续 500 步"),
        (
            (adamw, one_cycle_with(lambda steps: {"total_steps": steps + 2})),
            "lasts 22 steps, not `steps` (20)",
            "total_steps=steps",
        ),
        ((adamw, linear_warm_up_forever), "still rising", "还在上升"),
        ((adamw, one_cycle_peak_03), "peaks at 0.3", "峰值是 0.3"),
        ((adamw, cosine), "starts at its highest value", "一开始就是最大值"),
        ((adamw, optimizer_instead_of_schedule), "learning-rate scheduler", "学习率调度器"),
    ],
)
def test_optimizer_and_schedule_mistakes_get_their_hint(answers, en, zh):
    assert_wrong(ex.q3, answers, en, zh)


def test_checks_leave_the_learners_random_numbers_alone():
    answers = {ex.q1: (4, 0.09, TRAIN, TEST), ex.q2: (widened_lenet,), ex.q3: (adamw, cosine)}
    for q, given in answers.items():
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        q.outcome(*given, lang="en")
        assert torch.equal(torch.rand(3), expected)  # as if the check had not run
