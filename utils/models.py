"""Small models shared by the notebooks.

``LeNet`` is built step by step in ``notebooks/03_neural_networks.ipynb`` (one input
channel, 32 x 32 images) and reused with ``in_channels=3`` for CIFAR-10 in
``notebooks/04_cifar10.ipynb``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LeNet(nn.Module):
    """LeNet-5 style CNN for ``in_channels x 32 x 32`` images (the blitz's ``Net``).

    conv(5x5) -> ReLU -> max-pool(2) -> conv(5x5) -> ReLU -> max-pool(2) -> 3 linear layers.
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.conv1 = nn.Conv2d(in_channels, 6, 5)  # 32x32 -> 28x28, pooled to 14x14
        self.conv2 = nn.Conv2d(6, 16, 5)  # 14x14 -> 10x10, pooled to 5x5
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The fully connected layers fix the input size; say so instead of letting fc1
        # fail with an opaque "mat1 and mat2 shapes cannot be multiplied".
        expected = (self.in_channels, 32, 32)
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            hint = " (add a batch dimension with x.unsqueeze(0))" if x.dim() == 3 else ""
            raise ValueError(
                f"LeNet expects a batch of shape N x {' x '.join(map(str, expected))}, "
                f"got {tuple(x.shape)}{hint}"
            )
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)  # keep the batch dimension
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)
