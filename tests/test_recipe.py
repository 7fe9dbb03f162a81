"""utils.recipe: the better CIFAR-10 recipe that notebook 04 teaches and bench/cifar10.py runs."""

from __future__ import annotations

import torch
from torch import nn

from utils import recipe


def test_better_net_shapes_and_any_image_size() -> None:
    model = recipe.better_net(width=8).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert model(torch.randn(2, 3, 40, 40)).shape == (2, 10)  # global pooling
    assert isinstance(model[0][1], nn.BatchNorm2d)  # batch norm before pooling


def test_augment_is_a_flip_and_a_shift_of_each_image() -> None:
    torch.manual_seed(0)
    X = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).view(2, 3, 8, 8) + 1
    out = recipe.augment(X, pad=2)
    assert out.shape == X.shape
    for x, o in zip(X, out, strict=True):
        candidates = [x, x.flip(2)]
        padded = [nn.functional.pad(c, (2, 2, 2, 2)) for c in candidates]
        windows = [p[:, i : i + 8, j : j + 8] for p in padded for i in range(5) for j in range(5)]
        assert any(torch.equal(o, w) for w in windows)


def test_training_lowers_the_loss_and_accuracy_counts() -> None:
    torch.manual_seed(0)
    X = torch.randn(64, 3, 8, 8)
    y = (X.mean(dim=(1, 2, 3)) > 0).long()  # a learnable rule
    model = recipe.better_net(width=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    device = torch.device("cpu")
    first = recipe.train_one_epoch(model, optimizer, nn.CrossEntropyLoss(), X, y, 16, device)
    for _ in range(15):
        last = recipe.train_one_epoch(model, optimizer, nn.CrossEntropyLoss(), X, y, 16, device)
    assert last < first
    acc = recipe.accuracy(model, X, y, device)
    assert 0.5 < acc <= 1.0
    assert 0.0 <= recipe.accuracy(model, X, y, device, flips=True) <= 1.0


def test_mixed_precision_only_on_cuda() -> None:
    assert recipe.amp_dtype_for(torch.device("cpu")) is None
