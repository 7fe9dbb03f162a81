"""utils.LeNet: the network of notebook 03, reused with 3 channels in notebook 04."""

from __future__ import annotations

import pytest
import torch

import utils


@pytest.mark.parametrize("channels", [1, 3])
def test_lenet_output_shape_and_parameter_count(channels: int) -> None:
    model = utils.LeNet(in_channels=channels)
    assert model(torch.zeros(2, channels, 32, 32)).shape == (2, 10)
    # conv1 + conv2 + fc1 + fc2 + fc3, counted by hand
    expected = (6 * channels * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120)
    expected += (120 * 84 + 84) + (84 * 10 + 10)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_lenet_rejects_a_single_sample_with_a_hint() -> None:
    with pytest.raises(ValueError, match=r"N x 1 x 32 x 32.*unsqueeze\(0\)"):
        utils.LeNet()(torch.zeros(1, 32, 32))


def test_lenet_rejects_wrong_size_or_channels() -> None:
    with pytest.raises(ValueError, match=r"got \(1, 1, 28, 28\)"):
        utils.LeNet()(torch.zeros(1, 1, 28, 28))
    with pytest.raises(ValueError, match="N x 3 x 32 x 32"):
        utils.LeNet(in_channels=3)(torch.zeros(1, 1, 32, 32))
