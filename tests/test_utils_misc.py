"""utils.seed, utils.plotting and utils.parallel (GPUs mocked where needed)."""

from __future__ import annotations

import random

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

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


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch):
    """Pretend to have ``n`` GPUs; ``.to(cuda)`` is recorded instead of performed."""
    moves: list[torch.device] = []

    def set_n(n: int) -> list[torch.device]:
        monkeypatch.delenv("BLITZ_FORCE_CPU", raising=False)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)

        def fake_to(self, device, *a, **k):
            moves.append(torch.device(device))
            return self

        monkeypatch.setattr(nn.Module, "to", fake_to)
        return moves

    return set_n


def test_wrapper_on_cpu_returns_the_model_unwrapped(gpus) -> None:
    moves = gpus(0)
    model = nn.Linear(2, 2)
    assert utils.to_data_parallel(model) is model
    assert moves == [torch.device("cpu")]


def test_wrapper_single_gpu_is_not_wrapped(gpus) -> None:
    moves = gpus(1)
    model = nn.Linear(2, 2)
    assert utils.to_data_parallel(model) is model
    assert moves == [torch.device("cuda:0")]
    moves.clear()
    gpus(3)
    assert utils.to_data_parallel(model, device_ids=[2]) is model
    assert moves == [torch.device("cuda:2")]


def test_wrapper_wraps_with_two_or_more_gpus(gpus, monkeypatch) -> None:
    gpus(4)
    made = {}

    class FakeDP(nn.Module):
        def __init__(self, module, device_ids):
            super().__init__()
            made["ids"] = device_ids
            self.module = module

    monkeypatch.setattr(nn, "DataParallel", FakeDP)
    wrapped = utils.to_data_parallel(nn.Linear(2, 2), device_ids=[1, "cuda:3"])
    assert isinstance(wrapped, FakeDP)
    assert made["ids"] == [1, 3]
    wrapped = utils.to_data_parallel(nn.Linear(2, 2))
    assert made["ids"] == [0, 1, 2, 3]


def test_wrapper_bad_ids_name_the_existing_devices(gpus) -> None:
    gpus(2)
    with pytest.raises(ValueError, match=r"invalid device id\(s\) \[5\].*cuda:0, cuda:1"):
        utils.to_data_parallel(nn.Linear(2, 2), device_ids=[0, 5])
    with pytest.raises(ValueError, match="duplicates"):
        utils.to_data_parallel(nn.Linear(2, 2), device_ids=[0, 0])
    with pytest.raises(ValueError, match="empty"):
        utils.to_data_parallel(nn.Linear(2, 2), device_ids=[])
    with pytest.raises(ValueError, match="CUDA"):
        utils.to_data_parallel(nn.Linear(2, 2), device_ids=["cpu"])


def test_wrapper_bad_ids_without_gpus_say_so(gpus) -> None:
    gpus(0)
    with pytest.raises(ValueError, match="no usable CUDA GPU"):
        utils.to_data_parallel(nn.Linear(2, 2), device_ids=[0])
