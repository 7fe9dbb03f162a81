"""utils.seed, utils.plotting and utils.parallel (GPUs mocked where needed)."""

from __future__ import annotations

import random

import matplotlib
import numpy as np
import pytest
import torch

import utils

matplotlib.use("Agg")


def draw() -> tuple[float, float, torch.Tensor]:
    return random.random(), float(np.random.rand()), torch.rand(3)


def test_seed_everything_is_reproducible_and_returns_none() -> None:
    assert utils.seed_everything(123) is None
    a = draw()
    utils.seed_everything(123)
    b = draw()
    assert a[:2] == b[:2]
    assert torch.equal(a[2], b[2])
    utils.seed_everything(124)
    assert draw()[0] != a[0]


def test_denormalize_inverts_normalize() -> None:
    img = torch.rand(3, 4, 4)
    normalized = (img - 0.5) / 0.5
    assert torch.allclose(utils.denormalize(normalized), img, atol=1e-6)


def test_imshow_shows_color_and_gray_images() -> None:
    import matplotlib.pyplot as plt

    ax = utils.imshow(torch.zeros(3, 8, 16), title="grid")
    assert ax.get_title() == "grid"
    data = ax.get_images()[0].get_array()
    assert data.shape == (8, 16, 3)
    assert np.allclose(data, 0.5)  # 0 normalized with mean=std=0.5 is mid-gray
    ax = utils.imshow(torch.zeros(1, 8, 8))
    assert ax.get_images()[0].get_array().shape == (8, 8)
    plt.close("all")


def test_imshow_rejects_a_batch() -> None:
    with pytest.raises(ValueError, match="C x H x W"):
        utils.imshow(torch.zeros(4, 3, 8, 8))


def test_plot_curves_draws_each_series() -> None:
    import matplotlib.pyplot as plt

    ax = utils.plot_curves({"train": [3.0, 2.0, 1.0], "test": [3.5, 2.5]}, xlabel="epoch")
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["train", "test"]
    assert list(lines[0].get_xdata()) == [1, 2, 3]
    assert ax.get_xlabel() == "epoch"
    with pytest.raises(ValueError):
        utils.plot_curves({})
    plt.close("all")
