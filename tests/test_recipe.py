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


def test_better_net_without_batch_norm_has_biases_instead() -> None:
    plain, normed = recipe.better_net(batch_norm=False), recipe.better_net()
    assert not any(isinstance(m, nn.BatchNorm2d) for m in plain.modules())
    assert plain[0][0].bias is not None and normed[0][0].bias is None
    assert plain(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    # three conv biases replace three batch norms' scale and shift: 16 + 32 + 64 fewer weights
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(normed) - count(plain) == 16 + 32 + 64


def test_optimizer_schedule_and_loss_are_the_notebooks_last_rows() -> None:
    model = recipe.better_net(width=4)
    optimizer = recipe.make_optimizer(model.parameters())
    group = optimizer.param_groups[0]
    assert (group["nesterov"], group["weight_decay"]) == (True, 5e-4)
    scheduler = recipe.one_cycle(optimizer, total_steps=100)
    # OneCycleLR overrides lr and momentum: it starts at max_lr / 25 with momentum 0.95
    assert abs(group["lr"] - 0.1 / 25) < 1e-12 and group["momentum"] == 0.95
    lrs = []
    for _ in range(99):
        optimizer.step()
        scheduler.step()
        lrs.append(group["lr"])
    assert abs(max(lrs) - 0.1) < 1e-12 and abs(lrs[-1] - 0.1 / 25 / 1e4) < 1e-12
    assert recipe.make_loss_fn().label_smoothing == 0.1
